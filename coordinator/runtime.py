"""The asyncio shell around the sans-IO shards: it routes a group to its shard, runs each
operation, appends the records it returned, applies them once durable, releases the replies that
waited on them, and arms the deadlines the shards hand out.

Order for every write: append → (durable) → apply → reply. Timers are lazy: one armed timer per
key; a later deadline for the same key leaves it armed, and the shard re-arms when it fires early.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import Any

from protocol import ErrorCode

from storage.records import Record

from .partitioning import partition_for
from .shard import GroupSettings, GroupShard, Outcome


def now_ms() -> int:
    return int(time.time() * 1000)


def new_member_id(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4()}"


class MemoryLog:
    """The partition log until the durable one lands: appends complete on the next loop turn."""

    def __init__(self) -> None:
        self.records: list[Record] = []
        self.in_flight = 0
        self._drained: list[asyncio.Future] = []

    def append(self, records: list[Record]) -> asyncio.Future:
        loop = asyncio.get_running_loop()
        fut = loop.create_future()
        self.in_flight += 1

        def done() -> None:
            self.records.extend(records)
            self.in_flight -= 1
            fut.set_result(None)
            if not self.in_flight:
                for waiter in self._drained:
                    if not waiter.done():
                        waiter.set_result(None)
                self._drained.clear()

        loop.call_soon(done)
        return fut

    def drained(self) -> asyncio.Future | None:
        """None when no append is in flight, else a future for when none is."""
        if not self.in_flight:
            return None
        fut = asyncio.get_running_loop().create_future()
        self._drained.append(fut)
        return fut


class GroupCoordinator:
    def __init__(self, settings) -> None:
        self.partitions = settings.offsets_topic_num_partitions
        group_settings = GroupSettings.from_settings(settings)
        self.shards = [GroupShard(p, group_settings, new_member_id) for p in range(self.partitions)]
        self.logs = [MemoryLog() for _ in range(self.partitions)]
        self._timers: dict[tuple, tuple[int, asyncio.TimerHandle]] = {}

    def partition(self, group_id: str) -> int:
        return partition_for(group_id, self.partitions)

    def shard(self, group_id: str) -> GroupShard:
        return self.shards[partition_for(group_id, self.partitions)]

    def close(self) -> None:
        for _, handle in self._timers.values():
            handle.cancel()
        self._timers.clear()

    # -- running operations --------------------------------------------------------------------

    def run(self, p: int, out: Outcome, ticket: asyncio.Future | None = None) -> Any:
        """Carry out an outcome of shard `p`: the reply when it is ready now, else a future of it
        (the ticket, when the operation parked one or its reply waits on a write)."""
        for parked, reply in out.released:
            _resolve(parked, reply)
        if out.timers:
            self._arm(p, out.timers)
        if out.records:
            if ticket is None:
                ticket = asyncio.get_running_loop().create_future()
            self.logs[p].append(out.records).add_done_callback(
                lambda f: self._written(p, out, ticket, f.result()))
            return ticket
        return out.reply if out.reply is not None else ticket

    def _written(self, p: int, out: Outcome, ticket: asyncio.Future, error: ErrorCode | None) -> None:
        if error is None:
            shard = self.shards[p]
            for record in out.records:
                shard.apply(record)
        if out.after_write is not None:
            result = self.run(p, out.after_write(error, now_ms()), ticket)
            if result is not ticket:
                _resolve(ticket, result)
        if out.reply is not None:  # a reply given with the records (no-op if answered above)
            _resolve(ticket, out.reply)

    # -- one entry point per operation ---------------------------------------------------------

    def join(self, req) -> Any:
        p = self.partition(req.group_id)
        ticket = asyncio.get_running_loop().create_future()
        return self.run(p, self.shards[p].join(req, ticket, now_ms()), ticket)

    def sync(self, group_id: str, *args) -> Any:
        p = self.partition(group_id)
        ticket = asyncio.get_running_loop().create_future()
        return self.run(p, self.shards[p].sync(group_id, *args, ticket, now_ms()), ticket)

    def heartbeat(self, group_id: str, generation: int, member_id: str, instance_id: str | None) -> ErrorCode:
        return self.shard(group_id).heartbeat(group_id, generation, member_id, instance_id, now_ms())

    def leave(self, group_id: str, identities) -> Any:
        p = self.partition(group_id)
        return self.run(p, self.shards[p].leave(group_id, identities, now_ms()))

    def commit(self, group_id: str, *args) -> Any:
        p = self.partition(group_id)
        return self.run(p, self.shards[p].commit(group_id, *args, now_ms()))

    def fetch_offsets(self, group_id: str, topics, require_stable: bool) -> Any:
        """Committed offsets; with require_stable, read after the partition's in-flight writes."""
        p = self.partition(group_id)
        drained = self.logs[p].drained() if require_stable else None
        if drained is None:
            return self.shards[p].fetch_offsets(group_id, topics)
        result = asyncio.get_running_loop().create_future()
        drained.add_done_callback(lambda _: _resolve(result, self.shards[p].fetch_offsets(group_id, topics)))
        return result

    def describe(self, group_id: str) -> dict | None:
        return self.shard(group_id).describe(group_id)

    def list_groups(self) -> list:
        return [g for shard in self.shards for g in shard.list_groups()]

    def delete_group(self, group_id: str) -> Any:
        p = self.partition(group_id)
        return self.run(p, self.shards[p].delete_group(group_id))

    def delete_offsets(self, group_id: str, topics) -> Any:
        p = self.partition(group_id)
        return self.run(p, self.shards[p].delete_offsets(group_id, topics))

    # -- timers --------------------------------------------------------------------------------

    def _arm(self, p: int, timers: list[tuple[tuple, int]]) -> None:
        loop = asyncio.get_running_loop()
        now = now_ms()
        for key, deadline in timers:
            armed = self._timers.get(key)
            if armed is not None:
                if armed[0] <= deadline:
                    continue  # fires first and re-arms for the later deadline
                armed[1].cancel()
            handle = loop.call_later(max(deadline - now, 0) / 1000, self._fire, p, key)
            self._timers[key] = (deadline, handle)

    def _fire(self, p: int, key: tuple) -> None:
        self._timers.pop(key, None)
        self.run(p, self.shards[p].on_timer(key, now_ms()))


def _resolve(ticket: Any, reply: Any) -> None:
    if isinstance(ticket, asyncio.Future) and not ticket.done():
        ticket.set_result(reply)
