"""The Python clients' side of the real-client harness, with the same CLI and JSON-lines contract
as tests/clients/java/ClientTool.java and tests/clients/node/client_tool.mjs:

    python client_tool.py confluent|kafka-python|aiokafka MODE BOOTSTRAP [key=value ...]

MODE: assign topic=T seconds=S
      subscribe topic=T group=G seconds=S [instance=ID] [assignor=NAME] [session.ms=N] [commit=true]
                [commit_offset=N]   (seconds=0: until stdin closes or SIGTERM)
                confluent with group.protocol=consumer (KIP-848): no session/heartbeat settings (the
                server owns them), incremental assignment; a topic starting with ^ is a regex;
                commit_offset=N commits N for every partition it is assigned (OffsetCommit v9)
                kafka-python: leader_round_delay_ms=N ends each JoinGroup/SyncGroup round it led N ms
                late (as a slow coordinator on a loaded machine does)
      commit group=G topic=T partition=P offset=N [metadata=STR]
      fetch group=G topic=T
Keys with a dot go to the client config (dots become underscores for kafka-python/aiokafka; for
aiokafka, ssl.cafile/ssl.certfile/ssl.keyfile become the ssl_context it requires).
Events: ready, assigned {partitions, assignment, generation, member_id}, revoked, error, committed,
offsets, summary. Exit 0 iff no error event. CLIENT_TOOL_DEBUG=1 in the environment logs the
client library at DEBUG, with thread names, to stderr (the harness keeps it in a file).
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import signal
import sys
import threading
import time

LIB, MODE, BOOTSTRAP = sys.argv[1], sys.argv[2], sys.argv[3]
OPTS = dict(arg.split("=", 1) for arg in sys.argv[4:])
errors = 0
stop = threading.Event()


def emit(event: str, **fields) -> None:
    print(json.dumps({"event": event, **fields}), flush=True)


def error(e: object) -> None:
    global errors
    errors += 1
    emit("error", type=type(e).__name__, message=str(e))


def names(tps) -> list[str]:
    return sorted(f"{tp.topic}-{tp.partition}" for tp in tps)


def passthrough(underscores: bool) -> dict:
    return {(k.replace(".", "_") if underscores else k): _value(v) for k, v in OPTS.items() if "." in k and k != "session.ms"}


def _value(v: str):
    return int(v) if v.lstrip("-").isdigit() else v


def deadline() -> float:
    seconds = float(OPTS.get("seconds", 0))
    return time.monotonic() + seconds if seconds else float("inf")


def watch_stdin() -> None:
    if float(OPTS.get("seconds", 0)) == 0:
        def read() -> None:
            while sys.stdin.read(1):
                pass
            stop.set()
        threading.Thread(target=read, daemon=True).start()


signal.signal(signal.SIGTERM, lambda *_: stop.set())


closing = threading.Event()  # set once the client is being closed


class _ErrorEvents(logging.Handler):
    """Some failures only reach a log (kafka-python's heartbeat thread logs being fenced). Logs
    after the close has begun are the library's own teardown (kafka-python's heartbeat thread
    can log "Unhandled Heartbeat loop error" as its client goes away), not the group's."""

    def emit(self, record: logging.LogRecord) -> None:
        if not closing.is_set():
            error(RuntimeError(f"{record.name}: {record.getMessage()}"))


logging.basicConfig(level=logging.DEBUG if os.environ.get("CLIENT_TOOL_DEBUG") else logging.WARNING,
                    format="%(asctime)s %(threadName)s %(name)s %(levelname)s %(message)s", stream=sys.stderr)
for _name in ("kafka", "aiokafka"):
    logging.getLogger(_name).addHandler(_ErrorEvents(level=logging.ERROR))


# ---------------------------------------------------------------------------------------------


def run_confluent() -> list[str]:
    from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, TopicPartition

    session = int(OPTS.get("session.ms", 10000))
    consumer_protocol = OPTS.get("group.protocol") == "consumer"
    conf = {"bootstrap.servers": BOOTSTRAP, "group.id": OPTS.get("group", "client-tool"),
            "client.id": f"confluent-{MODE}", "enable.auto.commit": False, "auto.offset.reset": "earliest",
            "error_cb": error}
    if not consumer_protocol:  # librdkafka rejects these with group.protocol=consumer
        conf.update({"session.timeout.ms": session, "heartbeat.interval.ms": max(session // 10, 100)})
    conf.update(passthrough(False))
    if "instance" in OPTS:
        conf["group.instance.id"] = OPTS["instance"]
    if "assignor" in OPTS:
        conf["partition.assignment.strategy"] = OPTS["assignor"]
    c = Consumer(conf)
    assignment: set = set()
    to_commit: list = []
    try:
        if MODE in ("assign", "subscribe"):
            if MODE == "assign":
                parts = c.list_topics(OPTS["topic"], timeout=10).topics[OPTS["topic"]].partitions
                tps = [TopicPartition(OPTS["topic"], p, OFFSET_BEGINNING) for p in parts]
                c.assign(tps)
                assignment = set(names(tps))
                emit("assigned", partitions=names(tps), assignment=names(tps))
            else:
                cooperative = OPTS.get("assignor") == "cooperative-sticky" or consumer_protocol

                def on_assign(consumer, tps):
                    if cooperative:
                        consumer.incremental_assign(tps)
                        assignment.update(names(tps))
                    else:
                        assignment.clear()
                        assignment.update(names(tps))
                    # librdkafka keeps the generation inside opaque group metadata: not reported
                    emit("assigned", partitions=names(tps), assignment=sorted(assignment),
                         generation=None, member_id=consumer.memberid())
                    if "commit_offset" in OPTS:
                        to_commit.extend(tps)

                def on_revoke(consumer, tps):
                    assignment.difference_update(names(tps))
                    if cooperative:
                        consumer.incremental_unassign(tps)
                    emit("revoked", partitions=names(tps))

                c.subscribe([OPTS["topic"]], on_assign=on_assign, on_revoke=on_revoke, on_lost=on_revoke)
            watch_stdin()
            emit("ready")
            end = deadline()
            while not stop.is_set() and time.monotonic() < end:
                m = c.poll(0.2)
                if m is not None and m.error():
                    error(m.error())
                if to_commit:
                    offsets = [TopicPartition(tp.topic, tp.partition, int(OPTS["commit_offset"])) for tp in to_commit
                               if f"{tp.topic}-{tp.partition}" in assignment]
                    to_commit.clear()
                    try:
                        c.commit(offsets=offsets, asynchronous=False)
                    except KafkaException as e:  # e.g. STALE_MEMBER_EPOCH mid-rebalance: not an error, retried
                        emit("commit_retry", message=str(e))
                        to_commit.extend(offsets)
                        continue
                    emit("committed", offsets={f"{tp.topic}-{tp.partition}": {"offset": tp.offset} for tp in offsets})
        elif MODE == "commit":
            tp = TopicPartition(OPTS["topic"], int(OPTS["partition"]), int(OPTS["offset"]),
                                **({"metadata": OPTS["metadata"]} if "metadata" in OPTS else {}))
            c.commit(offsets=[tp], asynchronous=False)
            emit("committed", offsets={f"{tp.topic}-{tp.partition}": {"offset": tp.offset, "metadata": tp.metadata}})
        elif MODE == "fetch":
            parts = c.list_topics(OPTS["topic"], timeout=10).topics[OPTS["topic"]].partitions
            got = c.committed([TopicPartition(OPTS["topic"], p) for p in parts], timeout=10)
            emit("offsets", offsets={f"{tp.topic}-{tp.partition}": {"offset": tp.offset, "metadata": tp.metadata}
                                     for tp in got if tp.offset >= 0})
    except KafkaException as e:
        error(e)
    finally:
        closing.set()
        c.close()
    return sorted(assignment)


# ---------------------------------------------------------------------------------------------


def _python_assignor(lib: str):
    name = OPTS.get("assignor")
    if name is None:
        return None
    if lib == "kafka-python":
        from kafka.coordinator.assignors.cooperative_sticky import CooperativeStickyAssignor
        from kafka.coordinator.assignors.range import RangePartitionAssignor
        from kafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor
        from kafka.coordinator.assignors.sticky.sticky_assignor import StickyPartitionAssignor
        return {"range": RangePartitionAssignor, "roundrobin": RoundRobinPartitionAssignor,
                "sticky": StickyPartitionAssignor, "cooperative-sticky": CooperativeStickyAssignor}[name]
    from aiokafka.coordinator.assignors.range import RangePartitionAssignor
    from aiokafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor
    from aiokafka.coordinator.assignors.sticky.sticky_assignor import StickyPartitionAssignor
    return {"range": RangePartitionAssignor, "roundrobin": RoundRobinPartitionAssignor,
            "sticky": StickyPartitionAssignor}[name]


def _python_conf(lib: str) -> dict:
    """kafka-python and aiokafka take the same consumer settings."""
    session = int(OPTS.get("session.ms", 10000))
    conf = dict(bootstrap_servers=BOOTSTRAP, client_id=f"{lib}-{MODE}", enable_auto_commit=False,
                auto_offset_reset="earliest", group_id=OPTS.get("group"), session_timeout_ms=session,
                heartbeat_interval_ms=max(session // 10, 100))
    conf.update(passthrough(True))
    if lib == "aiokafka" and any(k in conf for k in ("ssl_cafile", "ssl_certfile", "ssl_keyfile")):
        from aiokafka.helpers import create_ssl_context  # aiokafka takes no file names, only a context

        conf["ssl_context"] = create_ssl_context(cafile=conf.pop("ssl_cafile", None),
                                                 certfile=conf.pop("ssl_certfile", None),
                                                 keyfile=conf.pop("ssl_keyfile", None))
    if "instance" in OPTS:
        conf["group_instance_id"] = OPTS["instance"]
    assignor = _python_assignor(lib)
    if assignor:
        conf["partition_assignment_strategy"] = [assignor]
    return conf


def _keep_awaiting_a_metadata_rejoin() -> None:
    """kafka-python 3.0.12 can lose a leader's re-join: when the leader re-joins because the
    subscribed topics' metadata changed since its last assignment (e.g. it assigned before it knew
    the topic), only need_rejoin() says so; `rejoin_needed` stays False. The new assignment, made
    mid-round, clears that condition, so a poll() that timed out waiting for the JoinGroup/SyncGroup
    round and polls again sees need_rejoin() False and never collects the round: no assignment,
    heartbeats stay off, the coordinator expires the member. Java's rejoinNeededOrPending()
    requests the rejoin for these reasons, which holds until a round completes; so does this."""
    from kafka.coordinator.consumer import ConsumerCoordinator

    need_rejoin = ConsumerCoordinator.need_rejoin

    def need_rejoin_until_joined(self) -> bool:
        if not need_rejoin(self):
            return False
        self.request_rejoin()
        return True

    ConsumerCoordinator.need_rejoin = need_rejoin_until_joined


def _delay_led_rounds(delay_ms: int) -> None:
    """leader_round_delay_ms: a round this member led ends `delay_ms` late, without blocking the
    client's IO loop (the window _keep_awaiting_a_metadata_rejoin closes, made wide)."""
    from kafka.coordinator.base import BaseCoordinator

    round_ = BaseCoordinator._do_join_and_sync_async

    async def delayed(self):
        assignment = await round_(self)
        if getattr(self, "_is_leader", False):
            await self._manager._net.sleep(delay_ms / 1000)
        return assignment

    BaseCoordinator._do_join_and_sync_async = delayed


def run_kafka_python() -> list[str]:
    from kafka import ConsumerRebalanceListener, KafkaConsumer, OffsetAndMetadata, TopicPartition
    from kafka.errors import KafkaError

    _keep_awaiting_a_metadata_rejoin()
    if "leader_round_delay_ms" in OPTS:
        _delay_led_rounds(int(OPTS["leader_round_delay_ms"]))
    conf = _python_conf("kafka-python")
    c = KafkaConsumer(**conf)
    assignment: set = set()
    try:
        if MODE in ("assign", "subscribe"):
            if MODE == "assign":
                tps = [TopicPartition(OPTS["topic"], p) for p in sorted(c.partitions_for_topic(OPTS["topic"]))]
                c.assign(tps)
                c.seek_to_beginning()
                assignment.update(names(tps))
                emit("assigned", partitions=names(tps), assignment=names(tps))
            else:
                class Listener(ConsumerRebalanceListener):
                    def on_partitions_revoked(self, revoked):
                        assignment.difference_update(names(revoked))
                        emit("revoked", partitions=names(revoked))

                    def on_partitions_assigned(self, assigned):
                        assignment.update(names(assigned))
                        gen = c._coordinator._generation
                        emit("assigned", partitions=names(assigned), assignment=sorted(assignment),
                             generation=gen.generation_id, member_id=gen.member_id)

                c.subscribe([OPTS["topic"]], listener=Listener())
            watch_stdin()
            emit("ready")
            end = deadline()
            while not stop.is_set() and time.monotonic() < end:
                try:
                    c.poll(timeout_ms=200)
                except KafkaError as e:
                    error(e)
        elif MODE == "commit":
            tp = TopicPartition(OPTS["topic"], int(OPTS["partition"]))
            c.assign([tp])
            c.commit({tp: OffsetAndMetadata(int(OPTS["offset"]), OPTS.get("metadata", ""), -1)})
            emit("committed", offsets={f"{tp.topic}-{tp.partition}": {"offset": int(OPTS["offset"]),
                                                                       "metadata": OPTS.get("metadata", "")}})
        elif MODE == "fetch":
            tps = [TopicPartition(OPTS["topic"], p) for p in sorted(c.partitions_for_topic(OPTS["topic"]))]
            got = {tp: c.committed(tp, metadata=True) for tp in tps}
            emit("offsets", offsets={f"{tp.topic}-{tp.partition}": {"offset": om.offset, "metadata": om.metadata}
                                     for tp, om in got.items() if om is not None})
    except KafkaError as e:
        error(e)
    finally:
        closing.set()
        c.close()
    return sorted(assignment)


# ---------------------------------------------------------------------------------------------


async def run_aiokafka() -> list[str]:
    from aiokafka import AIOKafkaConsumer, ConsumerRebalanceListener, TopicPartition
    from aiokafka.errors import KafkaError
    from aiokafka.structs import OffsetAndMetadata

    conf = _python_conf("aiokafka")
    c = AIOKafkaConsumer(**conf)
    assignment: set = set()
    await c.start()
    try:
        topic_partitions = (await c._client.fetch_all_metadata()).partitions_for_topic
        if MODE in ("assign", "subscribe"):
            if MODE == "assign":
                tps = [TopicPartition(OPTS["topic"], p) for p in sorted(topic_partitions(OPTS["topic"]) or [])]
                c.assign(tps)
                await c.seek_to_beginning()
                assignment.update(names(tps))
                emit("assigned", partitions=names(tps), assignment=names(tps))
            else:
                class Listener(ConsumerRebalanceListener):
                    def on_partitions_revoked(self, revoked):
                        assignment.difference_update(names(revoked))
                        emit("revoked", partitions=names(revoked))

                    def on_partitions_assigned(self, assigned):
                        assignment.update(names(assigned))
                        coordinator = c._coordinator
                        emit("assigned", partitions=names(assigned), assignment=sorted(assignment),
                             generation=coordinator.generation, member_id=coordinator.member_id)

                c.subscribe([OPTS["topic"]], listener=Listener())
            watch_stdin()
            emit("ready")
            end = deadline()
            while not stop.is_set() and time.monotonic() < end:
                try:
                    await c.getmany(timeout_ms=200)
                except KafkaError as e:
                    error(e)
        elif MODE == "commit":
            tp = TopicPartition(OPTS["topic"], int(OPTS["partition"]))
            c.assign([tp])
            await c.commit({tp: OffsetAndMetadata(int(OPTS["offset"]), OPTS.get("metadata", ""))})
            emit("committed", offsets={f"{tp.topic}-{tp.partition}": {"offset": int(OPTS["offset"]),
                                                                       "metadata": OPTS.get("metadata", "")}})
        elif MODE == "fetch":
            tps = [TopicPartition(OPTS["topic"], p) for p in sorted(topic_partitions(OPTS["topic"]) or [])]
            out = {}
            for tp in tps:
                committed = await c._coordinator.fetch_committed_offsets([tp])
                if tp in committed:
                    out[f"{tp.topic}-{tp.partition}"] = {"offset": committed[tp].offset,
                                                         "metadata": committed[tp].metadata}
            emit("offsets", offsets=out)
    except KafkaError as e:
        error(e)
    finally:
        closing.set()
        await c.stop()
    return sorted(assignment)


if __name__ == "__main__":
    try:
        if LIB == "confluent":
            final = run_confluent()
        elif LIB == "kafka-python":
            final = run_kafka_python()
        elif LIB == "aiokafka":
            final = asyncio.run(run_aiokafka())
        else:
            raise SystemExit(f"unknown library {LIB}")
    except Exception as e:  # report, do not hide
        error(e)
        final = []
    emit("summary", errors=errors, assignment=final)
    sys.exit(1 if errors else 0)
