"""Reading a data directory without a server: `groupd log dump` (every record decoded, like
kafka-dump-log --offsets-decoder) and `groupd log verify` (every batch's CRC, per partition)."""

from __future__ import annotations

import base64
import json
import os
import struct
from collections.abc import Iterator

from .log import list_segments, partition_dir, records_of, scan
from .records import GroupMetadataKey, GroupMetadataValue, OffsetCommitKey, OffsetCommitValue

_RECORD_COUNT = struct.Struct(">i")  # bytes 57..61 of a v2 batch header


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
    timestamp, and the decoded key/value (`"tombstone": true` for a null value)."""
    for p in [partition] if partition is not None else partitions(data_dir):
        for base, path in list_segments(partition_dir(data_dir, p)):
            with open(path, "rb") as f:
                batches, end, problem = scan(f.read())
            for b in batches:
                for offset, record, raw_key in records_of(b.batch):
                    line = {"log_partition": p, "log_offset": offset, "timestamp": b.batch.max_timestamp}
                    if record is None:
                        line.update(type="unknown", key=_bytes(bytes(raw_key)))
                    else:
                        line.update(describe(record), tombstone=record.value is None)
                    yield json.dumps(line)
            if problem is not None:
                yield json.dumps({"log_partition": p, "segment": os.path.basename(path), "error": problem,
                                  "byte": end})


def verify(data_dir: str) -> tuple[list[str], bool]:
    """A report line per partition with data, and whether every batch checked out."""
    lines, ok = [], True
    for p in partitions(data_dir):
        segments = list_segments(partition_dir(data_dir, p))
        batches = records = size = 0
        problems = []
        for i, (base, path) in enumerate(segments):
            with open(path, "rb") as f:
                data = f.read()
            found, end, problem = scan(data)
            batches += len(found)
            # the header's record count: compacted batches have gaps in their offsets
            records += sum(_RECORD_COUNT.unpack_from(data, b.position + 57)[0] for b in found)
            size += len(data)
            if problem is not None:
                where = "torn tail (truncated at next start)" if i == len(segments) - 1 else "CORRUPT closed segment"
                problems.append(f"{os.path.basename(path)} byte {end}: {problem} [{where}]")
        if segments and (batches or problems):
            status = "OK" if not problems else "ERROR"
            ok = ok and not problems
            lines.append(f"partition {p:>3}: {status} segments={len(segments)} batches={batches} "
                         f"records={records} bytes={size}" + "".join(f"\n    {x}" for x in problems))
    return lines, ok
