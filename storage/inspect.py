"""Reading a data directory without a server: `groupd log dump` (every record decoded, like
kafka-dump-log --offsets-decoder; `__transaction_state`'s with `dump_transactions`, like
--transaction-log-decoder; a data partition's records with `dump_data`) and `groupd log verify`
(every batch's CRC, and the chain of offsets across batches and segments, per partition: the
offsets log's, `__transaction_state`'s and the disk records plane's data partitions). On a
cluster-mode dir each stamp's segments (storage/owned_log.py) are read as a chain of their own;
which of the offsets log's count, up to which offset, is the manifest in etcd, which these tools do
not read (`__transaction_state`'s segments say it themselves)."""

from __future__ import annotations

import base64
import dataclasses
import json
import os
import re
import uuid
from collections.abc import Iterator

from groupd.protocol.consumer import BadConsumerProtocol, decode_assignment, decode_subscription

from .log import partition_dir, records_of
from .owned_log import stamped_segments
from .records import GroupMetadataKey, GroupMetadataValue, OffsetCommitKey, OffsetCommitValue
from .records_plane.segments import METADATA_FILE, counted_chain
from .scanner import OffsetChain, record_count, scan_segments
from .transaction_log import TOPIC as TXN_TOPIC
from .transaction_records import decode_key as decode_txn_key
from .transaction_records import decode_value as decode_txn_value
from .txn_records import TxnMarkerKey, TxnOffsetKey


def partitions(data_dir: str) -> list[int]:
    prefix = "__consumer_offsets-"
    return sorted(int(name[len(prefix):]) for name in os.listdir(data_dir)
                  if name.startswith(prefix) and name[len(prefix):].isdigit())


def _by_stamp(data_dir: str, p: int) -> list[tuple[int, list[tuple[int, str]]]]:
    """(stamp, its segments) of partition `p`, in offset order (a lone node's: stamp 0 alone)."""
    stamped = stamped_segments(partition_dir(data_dir, p))
    return sorted(stamped.items(), key=lambda item: (item[1][0][0], item[0]))


def _bytes(b: bytes) -> str:
    return base64.b64encode(b).decode()


def _plain(value):
    """A record field as JSON: dataclasses as objects, ids as text, bytes as base64."""
    if dataclasses.is_dataclass(value):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, tuple | list):
        return [_plain(v) for v in value]
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, bytes):
        return _bytes(value)
    return value


def _subscription(data: bytes) -> dict | str:
    """A ConsumerProtocolSubscription decoded (topics, owned partitions, user data size), or the
    base64 bytes when they are not one."""
    try:
        s = decode_subscription(data)
    except BadConsumerProtocol:
        return _bytes(data)
    return {"topics": list(s.topics), "owned_partitions": s.owned_partitions, "generation": s.generation,
            "rack_id": s.rack_id, "user_data_bytes": None if s.user_data is None else len(s.user_data)}


def _assignment(data: bytes) -> dict | str:
    try:
        partitions, user_data = decode_assignment(data)
    except BadConsumerProtocol:
        return _bytes(data)
    return {"partitions": partitions, "user_data_bytes": None if user_data is None else len(user_data)}


def _type_name(key) -> str:
    """ConsumerGroupMemberMetadataKey → consumer_group_member_metadata (Kafka's record name)."""
    return re.sub(r"(?<!^)(?=[A-Z])", "_", type(key).__name__.removesuffix("Key")).lower()


def describe(record) -> dict:
    key, value = record.key, record.value
    if isinstance(key, TxnMarkerKey):
        return {"type": "txn_marker", "producer_id": key.producer_id, "producer_epoch": key.producer_epoch,
                "result": "commit" if key.commit else "abort", "coordinator_epoch": key.coordinator_epoch}
    if isinstance(key, TxnOffsetKey):  # an offset of a producer's transaction: pending until its marker
        return {**describe(type(record)(key.key, value)), "producer_id": key.producer_id,
                "producer_epoch": key.producer_epoch}
    if not isinstance(key, OffsetCommitKey | GroupMetadataKey):  # a consumer-group record (types 3-8, 16)
        out = {"type": _type_name(key), **{("group" if k == "group_id" else k): v for k, v in _plain(key).items()}}
        if value is not None:
            out["value"] = _plain(value)
            classic = getattr(value, "classic_member_metadata", None)  # a classic member of a consumer group
            if classic is not None:
                for protocol, plain in zip(classic.supported_protocols,
                                           out["value"]["classic_member_metadata"]["supported_protocols"]):
                    plain["metadata"] = _subscription(protocol.metadata)
        return out
    if isinstance(key, OffsetCommitKey):
        out = {"type": "offset_commit", "group": key.group, "topic": key.topic, "partition": key.partition}
        if isinstance(value, OffsetCommitValue):
            out.update(offset=value.offset, leader_epoch=value.leader_epoch, metadata=value.metadata,
                       commit_timestamp=value.commit_timestamp, expire_timestamp=value.expire_timestamp)
        return out
    out = {"type": "group_metadata", "group": key.group}
    if isinstance(value, GroupMetadataValue):
        consumer = value.protocol_type == "consumer"  # else the bytes are opaque: shown as base64
        out.update(protocol_type=value.protocol_type, generation=value.generation, protocol=value.protocol,
                   leader=value.leader, current_state_timestamp=value.current_state_timestamp,
                   members=[{"member_id": m.member_id, "group_instance_id": m.group_instance_id,
                             "client_id": m.client_id, "client_host": m.client_host,
                             "rebalance_timeout": m.rebalance_timeout, "session_timeout": m.session_timeout,
                             "subscription": _subscription(m.subscription) if consumer else _bytes(m.subscription),
                             "assignment": _assignment(m.assignment) if consumer else _bytes(m.assignment)}
                            for m in value.members])
    return out


def dump(data_dir: str, partition: int | None = None, group: str | None = None) -> Iterator[str]:
    """One JSON line per record: its place in the log (`log_partition`, `log_offset`), the batch
    timestamp, and the decoded key/value (`"tombstone": true` for a null value); a line with
    `"error"` where bytes were skipped (corrupt, or a torn tail). With `group`, only that group's
    records (and no damage lines). In cluster mode each line has the `stamp` of its segment."""
    for p, stamp, segments in ((p, stamp, segments) for p in ([partition] if partition is not None
                                                              else partitions(data_dir))
                               for stamp, segments in _by_stamp(data_dir, p)):
        for base, path, data, found, last in scan_segments(segments):
            skipped = sorted(found.damage + ([found.tail] if found.tail else []), key=lambda d: d.position)
            if group is not None:
                skipped = []
            for b in found.batches:
                while skipped and skipped[0].position < b.position:
                    yield _skipped(p, skipped.pop(0))
                for offset, record, raw_key in records_of(b.batch):
                    if group is not None and (record is None or _group_of(record.key) != group):
                        continue
                    line = {"log_partition": p, "log_offset": offset, "timestamp": b.batch.max_timestamp}
                    if stamp:
                        line["stamp"] = stamp
                    if record is None:
                        line.update(type="unknown", key=_bytes(bytes(raw_key)))
                    else:
                        line.update(describe(record), tombstone=record.value is None)
                    yield json.dumps(line)
            for damage in skipped:
                yield _skipped(p, damage)


def transaction_partitions(data_dir: str) -> list[int]:
    prefix = TXN_TOPIC + "-"
    return sorted(int(name[len(prefix):]) for name in os.listdir(data_dir)
                  if name.startswith(prefix) and name[len(prefix):].isdigit())


def dump_transactions(data_dir: str, partition: int | None = None) -> Iterator[str]:
    """One JSON line per `__transaction_state` record (kafka-dump-log --transaction-log-decoder):
    its place, the batch timestamp, the transactional id and its stored state. In cluster mode each
    line has the `stamp` of its segment and whether it `counted`: a stamp's records count below the
    first offset of any later stamp (storage/transaction_log.py), the rest are a deposed owner's
    late writes, which no load reads."""
    for p in [partition] if partition is not None else transaction_partitions(data_dir):
        chains = sorted(stamped_segments(os.path.join(data_dir, f"{TXN_TOPIC}-{p}")).items())
        for i, (stamp, segments) in enumerate(chains):
            bound = min([segs[0][0] for _, segs in chains[i + 1:]], default=None)
            for _base, _path, _data, found, _last in scan_segments(segments):
                skipped = sorted(found.damage + ([found.tail] if found.tail else []), key=lambda d: d.position)
                for b in found.batches:
                    while skipped and skipped[0].position < b.position:
                        yield _skipped(f"{TXN_TOPIC}-{p}", skipped.pop(0))
                    for r in b.batch:
                        line = {"log_partition": p, "log_offset": r.offset, "timestamp": b.batch.max_timestamp}
                        if stamp or len(chains) > 1:
                            line.update(stamp=stamp, counted=bound is None or r.offset < bound)
                        line.update(_txn_record(r))
                        yield json.dumps(line)
                for damage in skipped:
                    yield _skipped(f"{TXN_TOPIC}-{p}", damage)


def _txn_record(r) -> dict:
    try:
        txn_id = decode_txn_key(bytes(r.key))
        value = decode_txn_value(None if r.value is None else bytes(r.value))
    except Exception:  # noqa: BLE001  (a newer Kafka's record type: shown as bytes)
        return {"type": "unknown", "key": None if r.key is None else _bytes(bytes(r.key))}
    out = {"type": "transaction", "transactional_id": txn_id, "tombstone": value is None}
    if value is not None:
        out.update(producer_id=value.producer_id, producer_epoch=value.producer_epoch,
                   previous_producer_id=value.previous_producer_id, timeout_ms=value.timeout_ms,
                   state=value.state.label, partitions=sorted([t, q] for t, q in value.partitions),
                   last_update_ms=value.last_update_ms, start_ms=value.start_ms)
    return out


def _group_of(key) -> str:
    offsets_log_key = OffsetCommitKey | GroupMetadataKey | TxnOffsetKey | TxnMarkerKey
    return key.group if isinstance(key, offsets_log_key) else key.group_id


def _skipped(p: int | str, damage) -> str:
    return json.dumps({"log_partition": p, "segment": os.path.basename(damage.path), "error": damage.reason,
                       "byte": damage.position, "bytes": damage.size})


def verify(data_dir: str) -> tuple[list[str], bool]:
    """A report line per partition with data (the offsets log's, then the data partitions'), and
    whether every batch checked out."""
    lines, ok = [], True
    for p in partitions(data_dir):
        stamps = _by_stamp(data_dir, p)
        cluster = (f" stamps={','.join(str(stamp) for stamp, _ in stamps)} (cluster mode: which count, up to "
                   f"which offset, is /groupd/manifests/{p} in etcd)" if any(stamp for stamp, _ in stamps) else "")
        line = _verify_partition(f"partition {p:>3}", stamps, cluster)
        if line is not None:
            lines.append(line)
            ok = ok and line.startswith(f"partition {p:>3}: OK")
    txn_dirs = [(TXN_TOPIC, p, os.path.join(data_dir, f"{TXN_TOPIC}-{p}")) for p in transaction_partitions(data_dir)]
    for topic, p, directory in txn_dirs + data_partitions(data_dir):
        stamps = sorted(stamped_segments(directory).items())  # cluster mode: each owner's, a chain each
        line = _verify_partition(f"partition {topic}-{p}", stamps, "")
        if line is not None:
            lines.append(line)
            ok = ok and ": OK " in line.split("\n")[0]
    return lines, ok


def _verify_partition(label: str, stamps: list, suffix: str) -> str | None:
    segments = [segment for _, of_stamp in stamps for segment in of_stamp]
    batches = records = size = 0
    problems = []
    for _, of_stamp in stamps:
        chain = OffsetChain()  # each stamp's segments chain on their own
        for base, path, data, found, last in scan_segments(of_stamp):
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
    if not segments or not (batches or problems):
        return None
    status = "OK" if not problems else "ERROR"
    return (f"{label}: {status} segments={len(segments)} batches={batches} records={records} bytes={size}{suffix}"
            + "".join(f"\n    {x}" for x in problems))


def data_partitions(data_dir: str) -> list[tuple[str, int, str]]:
    """(topic, partition, directory) of every data partition of the disk records plane (a directory
    `<topic>-<p>` holding `partition.metadata`)."""
    out = []
    for name in sorted(os.listdir(data_dir)):
        directory = os.path.join(data_dir, name)
        topic, _, p = name.rpartition("-")
        if topic and p.isdigit() and not name.startswith("__") and \
                os.path.exists(os.path.join(directory, METADATA_FILE)):
            out.append((topic, int(p), directory))
    return out


def dump_data(directory: str, topic: str, partition: int) -> Iterator[str]:
    """One JSON line per record of a data partition: offset, timestamp, key, value and headers (bytes
    as base64, null as null), the batch's producer id and sequence; a line with `"error"` where bytes
    were skipped (corrupt, or a torn tail)."""
    for base, path, data, found, last in scan_segments([(b, p) for b, p, _, _ in counted_chain(directory)]):
        skipped = sorted(found.damage + ([found.tail] if found.tail else []), key=lambda d: d.position)
        for b in found.batches:
            while skipped and skipped[0].position < b.position:
                yield _skipped(f"{topic}-{partition}", skipped.pop(0))
            batch = b.batch
            try:
                for r in batch:
                    yield json.dumps({"topic": topic, "partition": partition, "offset": r.offset,
                                      "timestamp": r.timestamp,
                                      "key": None if r.key is None else _bytes(bytes(r.key)),
                                      "value": None if r.value is None else _bytes(bytes(r.value)),
                                      "headers": [[k, None if v is None else _bytes(bytes(v))] for k, v in r.headers],
                                      "producer_id": batch.producer_id, "base_sequence": batch.base_sequence})
            except Exception as e:  # a codec this process lacks: the batch as a whole
                yield json.dumps({"topic": topic, "partition": partition, "offset": batch.base_offset,
                                  "batch_records": batch.last_offset_delta + 1, "error": f"not decoded: {e}"})
        for damage in skipped:
            yield _skipped(f"{topic}-{partition}", damage)
