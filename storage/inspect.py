"""Reading a data directory without a server: `groupd log dump` (every record decoded, like
kafka-dump-log --offsets-decoder) and `groupd log verify` (every batch's CRC, and the chain of
offsets across batches and segments, per partition)."""

from __future__ import annotations

import base64
import json
import os
from collections.abc import Iterator

from .log import list_segments, partition_dir, records_of
from .records import GroupMetadataKey, GroupMetadataValue, OffsetCommitKey, OffsetCommitValue
from .scanner import OffsetChain, record_count, scan_segments


def partitions(data_dir: str) -> list[int]:
    prefix = "__consumer_offsets-"
    return sorted(int(name[len(prefix):]) for name in os.listdir(data_dir)
                  if name.startswith(prefix) and name[len(prefix):].isdigit())


def _bytes(b: bytes) -> str:
    return base64.b64encode(b).decode()


def describe(record) -> dict:
    key, value = record.key, record.value
    if not isinstance(key, OffsetCommitKey | GroupMetadataKey):  # a consumer-group record (types 3-8, 16)
        return {"type": type(key).__name__, "key": repr(key), "value": repr(value)}
    if isinstance(key, OffsetCommitKey):
        out = {"type": "offset_commit", "group": key.group, "topic": key.topic, "partition": key.partition}
        if isinstance(value, OffsetCommitValue):
            out.update(offset=value.offset, leader_epoch=value.leader_epoch, metadata=value.metadata,
                       commit_timestamp=value.commit_timestamp, expire_timestamp=value.expire_timestamp)
        return out
    out = {"type": "group_metadata", "group": key.group}
    if isinstance(value, GroupMetadataValue):
        out.update(protocol_type=value.protocol_type, generation=value.generation, protocol=value.protocol,
                   leader=value.leader, current_state_timestamp=value.current_state_timestamp,
                   members=[{"member_id": m.member_id, "group_instance_id": m.group_instance_id,
                             "client_id": m.client_id, "client_host": m.client_host,
                             "rebalance_timeout": m.rebalance_timeout, "session_timeout": m.session_timeout,
                             "subscription": _bytes(m.subscription), "assignment": _bytes(m.assignment)}
                            for m in value.members])
    return out


def dump(data_dir: str, partition: int | None = None) -> Iterator[str]:
    """One JSON line per record: its place in the log (`log_partition`, `log_offset`), the batch
    timestamp, and the decoded key/value (`"tombstone": true` for a null value); a line with
    `"error"` where bytes were skipped (corrupt, or a torn tail)."""
    for p in [partition] if partition is not None else partitions(data_dir):
        for base, path, data, found, last in scan_segments(list_segments(partition_dir(data_dir, p))):
            skipped = sorted(found.damage + ([found.tail] if found.tail else []), key=lambda d: d.position)
            for b in found.batches:
                while skipped and skipped[0].position < b.position:
                    yield _skipped(p, skipped.pop(0))
                for offset, record, raw_key in records_of(b.batch):
                    line = {"log_partition": p, "log_offset": offset, "timestamp": b.batch.max_timestamp}
                    if record is None:
                        line.update(type="unknown", key=_bytes(bytes(raw_key)))
                    else:
                        line.update(describe(record), tombstone=record.value is None)
                    yield json.dumps(line)
            for damage in skipped:
                yield _skipped(p, damage)


def _skipped(p: int, damage) -> str:
    return json.dumps({"log_partition": p, "segment": os.path.basename(damage.path), "error": damage.reason,
                       "byte": damage.position, "bytes": damage.size})


def verify(data_dir: str) -> tuple[list[str], bool]:
    """A report line per partition with data, and whether every batch checked out."""
    lines, ok = [], True
    for p in partitions(data_dir):
        segments = list_segments(partition_dir(data_dir, p))
        batches = records = size = 0
        problems, chain = [], OffsetChain()
        for base, path, data, found, last in scan_segments(segments):
            name = os.path.basename(path)
            batches += len(found.batches)
            records += sum(record_count(data, b) for b in found.batches)
            size += len(data)
            for d in found.corruption(last):
                where = "active segment" if last else "closed segment"
                frames = "?" if d.batches is None else d.batches
                problems.append(f"{name} byte {d.position}: {d.reason} [CORRUPT {where}: {d.size} bytes, "
                                f"{frames} batches skipped]")
            torn = found.torn_tail(last)
            if torn is not None:
                problems.append(f"{name} byte {torn.position}: {torn.reason} [torn tail (truncated at next start)]")
            problems += chain.add(base, path, found)
        if segments and (batches or problems):
            status = "OK" if not problems else "ERROR"
            ok = ok and not problems
            lines.append(f"partition {p:>3}: {status} segments={len(segments)} batches={batches} "
                         f"records={records} bytes={size}" + "".join(f"\n    {x}" for x in problems))
    return lines, ok
