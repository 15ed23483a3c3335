"""One member of the compose demo's consumer group (docker-compose.yml runs two).

It subscribes to a topic through groupd, prints every assignment and revocation, prints any
records it reads, and commits its position on each assigned partition every few seconds, so
`groupd groups describe demo` and Prometheus show a live group: members, assignments, commits.
It uses aiokafka, which groupd's image already has (a groupd dependency); SIGTERM or Ctrl-C
leaves the group cleanly, so the other member takes over its partitions.

    python examples/demo_consumer.py [--bootstrap groupd:9092] [--topic demo] [--group demo]

Every option can also come from the environment: DEMO_BOOTSTRAP, DEMO_TOPIC, DEMO_GROUP,
DEMO_CLIENT_ID, DEMO_COMMIT_INTERVAL (seconds).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import signal
import socket
import sys

from aiokafka import AIOKafkaConsumer, ConsumerRebalanceListener
from aiokafka.errors import KafkaError

log = logging.getLogger("demo")


def _names(tps) -> str:
    return ",".join(f"{tp.topic}-{tp.partition}" for tp in sorted(tps)) or "nothing"


class _Report(ConsumerRebalanceListener):
    async def on_partitions_revoked(self, revoked) -> None:
        if revoked:
            log.info("revoked %s", _names(revoked))

    async def on_partitions_assigned(self, assigned) -> None:
        log.info("assigned %s", _names(assigned))


async def _commit_positions(consumer: AIOKafkaConsumer) -> None:
    assignment = consumer.assignment()
    if not assignment:
        return
    offsets = {tp: await consumer.position(tp) for tp in assignment}
    await consumer.commit(offsets)
    log.info("committed %s", " ".join(f"{tp.topic}-{tp.partition}={o}" for tp, o in sorted(offsets.items())))


async def run(args: argparse.Namespace) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)

    while True:  # groupd may still be starting: retry until it answers
        consumer = AIOKafkaConsumer(
            bootstrap_servers=args.bootstrap, group_id=args.group, client_id=args.client_id,
            enable_auto_commit=False, auto_offset_reset="earliest",
            session_timeout_ms=10000, heartbeat_interval_ms=1000, metadata_max_age_ms=10000)
        consumer.subscribe([args.topic], listener=_Report())
        try:
            await consumer.start()
            break
        except KafkaError as e:
            await consumer.stop()
            log.warning("cannot reach %s yet (%s); retrying", args.bootstrap, e)
        try:
            await asyncio.wait_for(stop.wait(), 2)
            return
        except asyncio.TimeoutError:
            pass
    log.info("joining group %s on topic %s via %s", args.group, args.topic, args.bootstrap)
    try:
        next_commit = loop.time() + args.commit_interval
        while not stop.is_set():
            batches = await consumer.getmany(timeout_ms=1000)
            for tp, records in batches.items():
                for r in records:
                    log.info("read %s-%d@%d key=%r value=%r", tp.topic, tp.partition, r.offset, r.key, r.value)
            if loop.time() >= next_commit:
                next_commit = loop.time() + args.commit_interval
                try:
                    await _commit_positions(consumer)
                except KafkaError as e:  # e.g. a rebalance in progress: the next round commits
                    log.info("commit skipped: %s", e)
    finally:
        await consumer.stop()  # LeaveGroup: the other member takes over at once
        log.info("left group %s", args.group)


def main(argv: list[str] | None = None) -> int:
    env = os.environ.get
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--bootstrap", default=env("DEMO_BOOTSTRAP", "groupd:9092"))
    p.add_argument("--topic", default=env("DEMO_TOPIC", "demo"))
    p.add_argument("--group", default=env("DEMO_GROUP", "demo"))
    p.add_argument("--client-id", default=env("DEMO_CLIENT_ID", socket.gethostname()))
    p.add_argument("--commit-interval", type=float, default=float(env("DEMO_COMMIT_INTERVAL", "5")),
                   metavar="SECONDS")
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO, stream=sys.stdout,
                        format=f"%(asctime)s {args.client_id} %(message)s")
    logging.getLogger("aiokafka").setLevel(logging.WARNING)
    asyncio.run(run(args))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
