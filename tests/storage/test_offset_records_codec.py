"""The offset-commit records as the loader reads them: the precompiled fast paths of
storage/records.py decode what the field-by-field reader does, and hand malformed bytes back to it."""

import struct

import pytest

from groupd.storage.consumer_records import decode, decode_key
from groupd.storage.records import (
    CorruptRecord,
    GroupMetadataKey,
    OffsetCommitKey,
    OffsetCommitValue,
    Record,
    _Reader,
    decode_value,
    encode_key,
    encode_value,
)


def s16(s: str) -> bytes:
    b = s.encode()
    return struct.pack(">h", len(b)) + b


KEY = OffsetCommitKey("grüppe", "topic-ä", 7)


@pytest.mark.parametrize("key_type", [0, 1])
def test_offset_key_of_either_type(key_type):
    data = struct.pack(">h", key_type) + s16(KEY.group) + s16(KEY.topic) + struct.pack(">i", KEY.partition)
    assert decode_key(data) == KEY


@pytest.mark.parametrize("value", [OffsetCommitValue(42, 3, "meta", 1_700_000_000_000),
                                   OffsetCommitValue(42, -1, "", 1_700_000_000_000),
                                   OffsetCommitValue(2**40, -1, "m", 5, 99)])  # v1: expire timestamp
def test_written_values_read_back(value):
    assert decode(encode_key(KEY), encode_value(value)) == Record(KEY, value)


FIELDS = [(42, 3, "meta", 1_700_000_000_000, -1), (42, -1, "", 1_700_000_000_000, -1), (2**40, -1, "m", 5, 99),
          (-1, -1, "ü" * 40_000, 7, -1), (0, 0, "", 0, 0), (7, 1, "", 9, -1)]


@pytest.mark.parametrize("fields", FIELDS)
def test_an_offset_value_holds_each_field(fields):
    value = OffsetCommitValue(*fields)
    assert (value.offset, value.leader_epoch, value.metadata, value.commit_timestamp,
            value.expire_timestamp) == fields == value.fields()
    assert value.timestamps() == (fields[3], fields[4])


def test_offset_values_are_equal_exactly_when_every_field_is():
    values = [OffsetCommitValue(*f) for f in FIELDS] + [OffsetCommitValue(42, 3, "meta", 1_700_000_000_000, 1)]
    assert [a == b for a in values for b in values] == [i == j for i in range(len(values)) for j in range(len(values))]
    assert hash(OffsetCommitValue(*FIELDS[0])) == hash(OffsetCommitValue(*FIELDS[0]))


def test_a_v3_value_read_from_the_log_is_what_its_fields_build():
    value = OffsetCommitValue(42, 3, "meta", 1_700_000_000_000)
    assert bytes(decode_value(KEY, encode_value(value))) == bytes(value)


@pytest.mark.parametrize("metadata", ["\udc80", "m" * 40_000])
def test_metadata_the_log_cannot_hold_is_kept_in_memory_and_refused_by_the_encoder(metadata):
    value = OffsetCommitValue(1, -1, metadata, 2)
    assert value.metadata == metadata
    with pytest.raises((UnicodeEncodeError, struct.error)):  # the log writer answers these (log_writer.py)
        encode_value(value)


@pytest.mark.parametrize("data,expected", [
    (struct.pack(">hq", 0, 9) + s16("m") + struct.pack(">q", 11), OffsetCommitValue(9, -1, "m", 11)),
    (struct.pack(">hq", 2, 9) + s16("") + struct.pack(">q", 11), OffsetCommitValue(9, -1, "", 11)),
    (struct.pack(">hqi", 4, 9, 2) + b"\x02m" + struct.pack(">q", 11) + b"\x00", OffsetCommitValue(9, 2, "m", 11)),
])
def test_versions_kafka_4_does_not_write(data, expected):
    assert decode_value(KEY, data) == expected


@pytest.mark.parametrize("data", [
    struct.pack(">hqih", 3, 1, 0, 10) + b"short" + struct.pack(">q", 1),  # metadata runs past the end
    struct.pack(">hqih", 3, 1, 0, -1) + struct.pack(">q", 1),  # null metadata
    struct.pack(">hqh", 1, 1, 0) + struct.pack(">q", 1),  # v1 without its expire timestamp
    struct.pack(">hq", 3, 1),
])
def test_malformed_values_are_corrupt(data):
    with pytest.raises(CorruptRecord):
        decode_value(KEY, data)


@pytest.mark.parametrize("data", [
    struct.pack(">h", 1) + s16("g") + struct.pack(">h", 50) + b"t" + struct.pack(">i", 0),  # topic runs past
    struct.pack(">hh", 1, -1) + s16("t") + struct.pack(">i", 0),  # null group
    struct.pack(">h", 1) + s16("g") + s16("t"),  # no partition
])
def test_malformed_keys_are_corrupt(data):
    with pytest.raises(CorruptRecord):
        decode_key(data)


def test_group_metadata_key_still_decodes():
    assert decode_key(struct.pack(">h", 2) + s16("g")) == GroupMetadataKey("g")


def test_reader_agrees_with_fast_key_path():
    data = encode_key(KEY)
    r = _Reader(data)
    assert r.i16() == 1 and OffsetCommitKey(r.str(), r.str(), r.i32()) == decode_key(data)


def test_a_log_loads_to_the_same_state_as_through_the_field_by_field_reader(tmp_path, monkeypatch):
    from groupd.coordinator.core.partition import GroupSettings, GroupShard
    from groupd.storage import records
    from groupd.storage.log import PartitionLog
    from groupd.storage.records import GroupMetadataValue

    written = [Record(OffsetCommitKey(f"g{g}", t, p), OffsetCommitValue(g * 100 + p, p - 1, "m" * (p % 2), 7 + g))
               for g in range(3) for t in ("a", "bé") for p in range(4)]
    written += [Record(OffsetCommitKey("g1", "a", 2), OffsetCommitValue(5, -1, "", 8, 99)),  # v1, over an older one
                Record(OffsetCommitKey("g2", "a", 0), None),
                Record(GroupMetadataKey("g0"), GroupMetadataValue("consumer", 3, "range", None, 9, ())),
                Record(GroupMetadataKey("g2"), None)]
    plog = PartitionLog(str(tmp_path), 0, 1024)
    plog.load(lambda record: None)
    for i in range(0, len(written), 5):
        plog.append(written[i:i + 5], fsync=False)
    plog.close()

    def load() -> GroupShard:
        shard = GroupShard(0, GroupSettings(), lambda client: "member")
        PartitionLog(str(tmp_path), 0, 1024).load(shard.apply)
        return shard

    fast = load()
    monkeypatch.setattr(records, "_offset_key", lambda data: None)
    monkeypatch.setattr(records, "_offset_value", lambda data: None)
    monkeypatch.setattr(records, "_v3_value", lambda data: None)
    reads = []

    class CountingReader(records._Reader):
        __slots__ = ()

        def __init__(self, *args, **kwargs) -> None:
            reads.append(1)
            super().__init__(*args, **kwargs)

    monkeypatch.setattr(records, "_Reader", CountingReader)
    slow = load()
    assert len(reads) >= 2 * (len(written) - 2)  # every key, and every value but the tombstones, read field by field
    assert fast.offsets == slow.offsets and fast.offsets["g1"][("a", 2)] == OffsetCommitValue(5, -1, "", 8, 99)
    assert {g: (group.generation, group.state_name) for g, group in fast.groups.items()} == \
        {g: (group.generation, group.state_name) for g, group in slow.groups.items()}


def test_a_key_cache_decodes_each_key_as_the_reader_does():
    from groupd.storage.records import KeyCache
    keys = [encode_key(OffsetCommitKey(g, t, p)) for g, t, p in [
        ("g", "t", 0), ("g", "t", 1), ("h", "t", 1), ("g", "u", 1), ("gg", "t", 2), ("g", "tt", 2), ("g", "t", 3)]]
    past = encode_key(OffsetCommitKey("g", "t", 5))  # then bytes past the partition, which the reader ignores
    keys[2:2] = [past + b"\x00\x00\x00\x09", past + b"\x00\x00\x00\x07", past]
    cache = KeyCache()
    assert [decode(k, None, cache).key for k in keys] == [decode_key(k) for k in keys]


@pytest.mark.parametrize("fields", [f for f in FIELDS if f[4] == -1 and len(f[2].encode()) <= 32767])
def test_a_value_without_expire_timestamp_encodes_as_the_v3_record_the_field_by_field_writer_builds(fields):
    offset, epoch, metadata, commit, _ = fields
    m = metadata.encode()
    assert encode_value(OffsetCommitValue(*fields)) == struct.pack(">hqih", 3, offset, epoch, len(m)) + m + \
        struct.pack(">q", commit)
