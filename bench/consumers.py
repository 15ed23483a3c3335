"""Raw-protocol KIP-848 member simulator (not a client library): one consumer group, one TCP
connection per member, ConsumerGroupHeartbeat v1 with client-generated member ids.

    python bench/consumers.py --port 9092 --members 1000 --partitions 1000 --seconds 5

The server must have topic `t` with --partitions partitions. One run, three phases, one JSON line:
  join: every member sends its joining heartbeat (epoch 0, subscription ["t"]) at once, then
    heartbeats at the interval the server hands out, and at once after a reply that changed its
    assignment, echoing the partitions it now owns as a real client acknowledges (it drops revoked
    partitions at once: it has nothing to commit). Measured: first join sent -> the reply after
    which every member is at one epoch with its assignment acknowledged and every partition is
    owned exactly once; then checked against ConsumerGroupDescribe (every member at the group
    epoch = assignment epoch, assignment = target assignment).
  steady: each socket goes to loadgen.Conn (members.closed_loop) with its member's pre-encoded
    steady-state heartbeat (its epoch, nothing changed: null fields), closed loop.
  leave: --leave-pct of the members leave (epoch -1) at once while the others heartbeat on, their
    next heartbeats spread over one interval as in a running group; measured: first leave sent ->
    the others converged as above (and checked the same way).
With --server-pid each phase also reports the server's CPU seconds (join_server_cpu_s,
leave_server_cpu_s): on a shared machine the figure that compares across runs.
"""

import argparse
import asyncio
import collections
import datetime
import random
import time
import uuid

from kafka_requests import request_type
from loadgen import _proc_cpu_s
from members import closed_loop, connect, run_main  # members also puts the repo root on sys.path

from groupd.protocol.codec import RequestHeader, build_request, encode_request

HEARTBEAT, DESCRIBE = 68, 69  # ConsumerGroupHeartbeat v1, ConsumerGroupDescribe v1 (both flexible)
FENCED_MEMBER_EPOCH, UNKNOWN_MEMBER_ID = 110, 25
TOPIC = "t"
TALLY = collections.Counter()  # heartbeat replies by error code
CLIENT = "bench"


def heartbeat_values(group, member_id, epoch, **changed):
    """A heartbeat that changes nothing (null fields, rebalance timeout -1), plus `changed`."""
    return {"group_id": group, "member_id": member_id, "member_epoch": epoch, "instance_id": None,
            "rack_id": None, "rebalance_timeout": datetime.timedelta(milliseconds=-1),
            "subscribed_topic_names": None, "subscribed_topic_regex": None, "server_assignor": None,
            "topic_partitions": None, **changed}


def wire(assignment):
    return [{"topic_id": t, "partitions": sorted(ps)} for t, ps in assignment.items()]


class Consumer:
    def __init__(self, group, link):
        self.group, self.link = group, link
        self.member_id = str(uuid.uuid4())  # v1: the client makes up its member id
        self.epoch, self.interval = 0, 1.0
        self.owned = None  # {topic_id: frozenset(partitions)} of the last assignment received
        self.acked = None  # what the server has seen us echo
        self.changed_at = 0.0  # perf_counter of the last reply that changed epoch, assignment or ack

    async def heartbeat(self):
        """One heartbeat; returns True when the reply gave a new assignment (acknowledge it now)."""
        if self.epoch == 0:
            values = heartbeat_values(self.group, self.member_id, 0, subscribed_topic_names=[TOPIC],
                                      rebalance_timeout=datetime.timedelta(seconds=300), topic_partitions=[])
            echoed = {}
        else:
            echoed = self.owned if self.owned != self.acked else None
            values = heartbeat_values(self.group, self.member_id, self.epoch,
                                      topic_partitions=None if echoed is None else wire(echoed))
        r, _ = await self.link.call(HEARTBEAT, 1, values, 30)
        now, err = time.perf_counter(), int(r.error_code)
        TALLY[err] += 1
        if err in (FENCED_MEMBER_EPOCH, UNKNOWN_MEMBER_ID):  # as a client does: rejoin with nothing
            self.epoch, self.owned, self.acked, self.changed_at = 0, None, None, now
        if err:
            return False
        before = (self.epoch, self.owned, self.acked)
        if echoed is not None:
            self.acked = echoed
        self.epoch, self.interval = r.member_epoch, r.heartbeat_interval.total_seconds()
        if r.assignment is not None:
            self.owned = {tp.topic_id: frozenset(tp.partitions) for tp in r.assignment.topic_partitions}
        if (self.epoch, self.owned, self.acked) != before:
            self.changed_at = now
        return self.owned != self.acked

    async def run(self, stop, phase=0.0):
        """Heartbeat until stop: the first after `phase` s (a running member's timer is anywhere in
        its interval), then every interval, at once to acknowledge a new assignment."""
        await asyncio.sleep(phase)
        while not stop.is_set():
            if await self.heartbeat():
                continue
            try:  # bounded: the server's heartbeat interval
                await asyncio.wait_for(stop.wait(), self.interval)
            except asyncio.TimeoutError:
                pass

    def steady_frame(self):
        body = encode_request(RequestHeader(HEARTBEAT, 1, 0, CLIENT),
                              build_request(HEARTBEAT, 1, heartbeat_values(self.group, self.member_id, self.epoch)))
        header = 4 + 8 + 2 + len(CLIENT) + 1  # size, api/version/corr, client id, empty tags
        return request_type(HEARTBEAT, 1, body[header:], flexible=True, client=CLIENT.encode())


def hb_ok(buf, start, end):  # response header v1 tags (1 byte), throttle_time_ms, error_code
    return end - start >= 7 and buf[start + 5] == 0 and buf[start + 6] == 0


def converged(members, partitions):
    """One epoch everywhere, every assignment acknowledged, every partition owned exactly once."""
    if len({m.epoch for m in members}) != 1 or members[0].epoch <= 0 or any(m.owned != m.acked for m in members):
        return False
    owners = collections.Counter((t, p) for m in members for t, ps in (m.owned or {}).items() for p in ps)
    return len(owners) == partitions and max(owners.values()) == 1


async def settle(members, partitions, t0, timeout, running=False):
    """Heartbeat until converged (bounded by timeout); returns seconds from t0 to the last change.
    running: the members were already in the group, their next heartbeats spread over an interval."""
    stop = asyncio.Event()
    tasks = [asyncio.create_task(m.run(stop, random.uniform(0, m.interval) if running else 0.0)) for m in members]
    deadline = time.monotonic() + timeout
    try:
        while not converged(members, partitions):
            if time.monotonic() > deadline:
                raise RuntimeError(f"not converged after {timeout:.0f} s: epochs "
                                   f"{collections.Counter(m.epoch for m in members).most_common(4)}, "
                                   f"replies {dict(TALLY)}")
            for t in tasks:
                if t.done() and t.exception():
                    raise t.exception()
            await asyncio.sleep(0.01)
        return max(m.changed_at for m in members) - t0
    finally:
        stop.set()
        await asyncio.wait(tasks, timeout=35)  # in-flight heartbeats finish
        for t in tasks:
            t.cancel()


async def check_describe(link, members, partitions):
    """The server's view agrees: group and assignment epoch = every member's, each member's
    assignment is its target and what the simulator owns, every partition exactly once."""
    r, _ = await link.call(DESCRIBE, 1, {"group_ids": [members[0].group], "include_authorized_operations": False}, 30)
    g = r.groups[0]
    epoch, mine = members[0].epoch, {m.member_id: m for m in members}

    def parts(a):
        return {tp.topic_id: frozenset(tp.partitions) for tp in a.topic_partitions if tp.partitions}

    problems = []
    if int(g.error_code) or (g.group_epoch, g.assignment_epoch) != (epoch, epoch) or g.group_state != "Stable":
        problems.append(f"group error={int(g.error_code)} state={g.group_state} epochs={g.group_epoch}/"
                        f"{g.assignment_epoch}, members at {epoch}")
    if sorted(x.member_id for x in g.members) != sorted(mine):
        problems.append(f"{len(g.members)} members described, {len(mine)} simulated")
    owners = collections.Counter()
    for x in g.members:
        a = parts(x.assignment)
        owners.update((t, p) for t, ps in a.items() for p in ps)
        if x.member_epoch != epoch or a != parts(x.target_assignment) or (x.member_id in mine and a != mine[x.member_id].owned):
            problems.append(f"member {x.member_id} epoch {x.member_epoch}: assignment differs")
    if len(owners) != partitions or max(owners.values(), default=0) != 1:
        problems.append(f"{len(owners)} partitions owned, most by one owner {max(owners.values(), default=0)}")
    if problems:
        raise RuntimeError("ConsumerGroupDescribe disagrees: " + "; ".join(problems[:3]))
    return epoch


async def run(args):
    links = await connect(args.members, args.port)
    group = f"bench-848-{uuid.uuid4().hex[:8]}"
    members = [Consumer(group, link) for link in links]
    t0, cpu0 = time.perf_counter(), _server_cpu(args)
    join_s = await settle(members, args.partitions, t0, args.setup_timeout)
    join_cpu = _cpu_since(args, cpu0)
    join_epoch = await check_describe(links[0], members, args.partitions)
    join_replies = dict(TALLY)
    TALLY.clear()

    steady = await closed_loop(links, [m.steady_frame() for m in members], hb_ok, args)

    TALLY.clear()
    leavers = members[:args.members * args.leave_pct // 100]
    stay = members[len(leavers):]
    t0, cpu0 = time.perf_counter(), _server_cpu(args)
    staying = asyncio.create_task(settle(stay, args.partitions, t0, args.setup_timeout, running=True))
    left = await asyncio.gather(*(m.link.call(HEARTBEAT, 1, heartbeat_values(group, m.member_id, -1), 30)
                                  for m in leavers))
    leave_errors = sum(int(r.error_code) != 0 for r, _ in left)
    leave_s = await staying
    leave_cpu = _cpu_since(args, cpu0)
    leave_epoch = await check_describe(links[-1], stay, args.partitions)
    for link in links:
        link.transport.close()
    return {"members": args.members, "partitions": args.partitions, "join_ms": round(1000 * join_s, 1),
            "join_epoch": join_epoch, "join_replies": join_replies, "join_server_cpu_s": join_cpu, **steady, "leavers": len(leavers), "leave_errors": leave_errors,
            "leave_ms": round(1000 * leave_s, 1), "leave_epoch": leave_epoch, "leave_replies": dict(TALLY),
            "leave_server_cpu_s": leave_cpu}


def _server_cpu(args):
    return _proc_cpu_s(args.server_pid) if args.server_pid else None


def _cpu_since(args, before):
    """The server's CPU seconds since `before` (a phase ends once its members stopped: up to one
    interval after convergence); None without --server-pid."""
    after = _server_cpu(args)
    return None if before is None or after is None else round(after - before, 2)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--members", type=int, default=1000)
    ap.add_argument("--partitions", type=int, default=1000, help="of topic t on the server")
    ap.add_argument("--leave-pct", type=int, default=10)
    ap.add_argument("--depth", type=int, default=1, help="steady: requests in flight per member")
    ap.add_argument("--seconds", type=float, default=5.0, help="steady: measured window")
    ap.add_argument("--warmup", type=float, default=1.0)
    ap.add_argument("--setup-timeout", type=float, default=120.0, help="per convergence, s")
    ap.add_argument("--server-pid", type=int)
    run_main(run, ap.parse_args())


if __name__ == "__main__":
    main()
