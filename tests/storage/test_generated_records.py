"""The record codecs generated from Kafka's schemas (storage/codegen.py -> storage/generated_records.py):
the checked-in module is what the generator makes of the checked-in schemas, and every record encodes
to the bytes the hand-written codecs it replaced wrote (their writers are kept below as the oracle),
then decodes to what was encoded."""

from __future__ import annotations

import json
import shutil
import struct
import sys
import types
import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from groupd.storage import codegen
from groupd.storage.consumer_records import (
    ClassicMemberMetadata,
    ClassicProtocol,
    ConsumerGroupCurrentMemberAssignmentKey,
    ConsumerGroupCurrentMemberAssignmentValue,
    ConsumerGroupMemberMetadataKey,
    ConsumerGroupMemberMetadataValue,
    ConsumerGroupMetadataKey,
    ConsumerGroupMetadataValue,
    ConsumerGroupPartitionMetadataKey,
    ConsumerGroupPartitionMetadataValue,
    ConsumerGroupRegularExpressionKey,
    ConsumerGroupRegularExpressionValue,
    ConsumerGroupTargetAssignmentMemberKey,
    ConsumerGroupTargetAssignmentMemberValue,
    ConsumerGroupTargetAssignmentMetadataKey,
    ConsumerGroupTargetAssignmentMetadataValue,
    PartitionMetadata,
    TopicMetadata,
    TopicPartitions,
    decode,
    encode_key,
    encode_value,
)
from groupd.storage.records import (
    GroupMetadataKey,
    GroupMetadataValue,
    MemberMetadata,
    OffsetCommitKey,
    OffsetCommitValue,
    Record,
)
from groupd.storage.wire import uvarint as _uv  # its bytes: the vectors of tests/storage/test_records_codec.py


@pytest.mark.parametrize("out", codegen.OUTPUTS, ids=lambda out: out.module)
def test_the_generated_modules_are_what_the_generator_makes_of_the_schemas(out):
    with open(codegen.path_of(out), encoding="utf-8") as f:
        assert f.read() == codegen.generate(out), "run `python -m groupd.storage.codegen` and commit the result"


def test_the_check_mode_finds_nothing_stale(capsys):
    assert codegen.main(["--check"]) == 0
    assert capsys.readouterr().out == ""


def test_a_key_schema_in_kafka_4s_form_generates_the_same_codec(tmp_path, monkeypatch):
    # Kafka 4.x: "coordinator-key", the record type in apiKey, key version 0 (the old form: validVersions "2")
    shutil.copy(f"{codegen.SCHEMAS}/GroupMetadataValue.json", tmp_path)
    (tmp_path / "GroupMetadataKey.json").write_text("// a comment line, as Kafka's files start\n" + json.dumps({
        "apiKey": 2, "type": "coordinator-key", "name": "GroupMetadataKey", "validVersions": "0",
        "flexibleVersions": "none", "fields": [{"name": "group", "type": "string", "versions": "0"}]}))
    monkeypatch.setattr(codegen, "SCHEMAS", str(tmp_path))
    module = types.ModuleType("storage._generated_for_a_test")
    module.__package__ = "storage"
    monkeypatch.setitem(sys.modules, module.__name__, module)  # where dataclasses look the annotations up
    code = codegen.generate(codegen.Output("x.py", "a test", ("GroupMetadata",)))
    exec(compile(code, "x.py", "exec"), module.__dict__)
    key, value = module.GroupMetadataKey("grp"), module.GroupMetadataValue("", 0, None, None, -1, ())
    assert module.KEY_TYPES == {module.GroupMetadataKey: 2}
    assert module.KEY_WRITERS[module.GroupMetadataKey](key) == encode_key(GroupMetadataKey("grp"))
    expected = encode_value(GroupMetadataValue("", 0, None, None, -1, ()))
    assert module.VALUE_WRITERS[module.GroupMetadataValue](value, 3) == expected


# -- the oracle: the hand-written writers of storage/records.py and storage/consumer_records.py as they
# were before the codecs were generated (commit 2b02a1d), reduced to what they wrote ---------------------

def _s16(s):
    b = s.encode()
    return struct.pack(">h", len(b)) + b


def _ns16(s):
    return b"\xff\xff" if s is None else _s16(s)


def _cs(s):
    b = s.encode()
    return _uv(len(b) + 1) + b


def _ncs(s):
    return b"\x00" if s is None else _cs(s)


def _arr(items, write):
    return _uv(len(items) + 1) + b"".join(write(item) for item in items)


def _tags(*fields):
    return _uv(len(fields)) + b"".join(_uv(tag) + _uv(len(data)) + data for tag, data in fields)


def _tp(e):
    return e.topic_id.bytes + _uv(len(e.partitions) + 1) + struct.pack(f">{len(e.partitions)}i", *e.partitions) \
        + _tags()


def _classic(m):
    protocols = _arr(m.supported_protocols, lambda p: _cs(p.name) + _uv(len(p.metadata) + 1) + p.metadata + _tags())
    return _uv(1) + struct.pack(">i", m.session_timeout_ms) + protocols + _tags()


_OLD_KEY_TYPES = {OffsetCommitKey: 1, GroupMetadataKey: 2, ConsumerGroupMetadataKey: 3,
                  ConsumerGroupPartitionMetadataKey: 4, ConsumerGroupMemberMetadataKey: 5,
                  ConsumerGroupTargetAssignmentMetadataKey: 6, ConsumerGroupTargetAssignmentMemberKey: 7,
                  ConsumerGroupCurrentMemberAssignmentKey: 8, ConsumerGroupRegularExpressionKey: 16}


def old_encode_key(key) -> bytes:
    if isinstance(key, OffsetCommitKey):
        return struct.pack(">h", 1) + _s16(key.group) + _s16(key.topic) + struct.pack(">i", key.partition)
    if isinstance(key, GroupMetadataKey):
        return struct.pack(">h", 2) + _s16(key.group)
    fields = [key.group_id] + [getattr(key, f) for f in ("member_id", "regular_expression") if hasattr(key, f)]
    return struct.pack(">h", _OLD_KEY_TYPES[type(key)]) + b"".join(_s16(f) for f in fields)


def old_encode_value(value) -> bytes:  # noqa: C901 - one branch a record type, as it was
    if isinstance(value, OffsetCommitValue):
        offset, epoch, metadata, commit, expire = value.fields()
        m = metadata.encode()
        if expire != -1:
            return struct.pack(">hqh", 1, offset, len(m)) + m + struct.pack(">qq", commit, expire)
        return struct.pack(">hqih", 3, offset, epoch, len(m)) + m + struct.pack(">q", commit)
    if isinstance(value, GroupMetadataValue):
        parts = [struct.pack(">h", 3), _s16(value.protocol_type), struct.pack(">i", value.generation),
                 _ns16(value.protocol), _ns16(value.leader), struct.pack(">q", value.current_state_timestamp),
                 struct.pack(">i", len(value.members))]
        for m in value.members:
            parts += [_s16(m.member_id), _ns16(m.group_instance_id), _s16(m.client_id), _s16(m.client_host),
                      struct.pack(">ii", m.rebalance_timeout, m.session_timeout),
                      struct.pack(">i", len(m.subscription)) + m.subscription,
                      struct.pack(">i", len(m.assignment)) + m.assignment]
        return b"".join(parts)
    head = struct.pack(">h", 0)
    if isinstance(value, ConsumerGroupMetadataValue):
        hashed = [(0, struct.pack(">q", value.metadata_hash))] if value.metadata_hash != 0 else []
        return head + struct.pack(">i", value.epoch) + _tags(*hashed)
    if isinstance(value, ConsumerGroupPartitionMetadataValue):
        def partition(m):
            return struct.pack(">i", m.partition) + _arr(m.racks, _cs) + _tags()

        def topic(t):
            return (t.topic_id.bytes + _cs(t.topic_name) + struct.pack(">i", t.num_partitions)
                    + _arr(t.partition_metadata, partition) + _tags())
        return head + _arr(value.topics, topic) + _tags()
    if isinstance(value, ConsumerGroupMemberMetadataValue):
        classic = value.classic_member_metadata
        tagged = [(0, _classic(classic))] if classic is not None else []
        return (head + _ncs(value.instance_id) + _ncs(value.rack_id) + _cs(value.client_id) + _cs(value.client_host)
                + _arr(value.subscribed_topic_names, _cs) + _ncs(value.subscribed_topic_regex)
                + struct.pack(">i", value.rebalance_timeout_ms) + _ncs(value.server_assignor) + _tags(*tagged))
    if isinstance(value, ConsumerGroupTargetAssignmentMetadataValue):
        return head + struct.pack(">i", value.assignment_epoch) + _tags()
    if isinstance(value, ConsumerGroupTargetAssignmentMemberValue):
        return head + _arr(value.topic_partitions, _tp) + _tags()
    if isinstance(value, ConsumerGroupCurrentMemberAssignmentValue):
        return (head + struct.pack(">iib", value.member_epoch, value.previous_member_epoch, value.state)
                + _arr(value.assigned_partitions, _tp) + _arr(value.partitions_pending_revocation, _tp) + _tags())
    assert isinstance(value, ConsumerGroupRegularExpressionValue)
    return head + _arr(value.topics, _cs) + struct.pack(">qq", value.version, value.timestamp) + _tags()


# -- the corpus --------------------------------------------------------------------------------------

text = st.text(max_size=12)
names = st.text(max_size=300) | st.sampled_from(["", "grp", "grüppe", "t" * 200])  # past one varint byte
maybe = st.none() | text
i8, i32, i64 = (st.integers(-2 ** (b - 1), 2 ** (b - 1) - 1) for b in (8, 32, 64))
blobs = st.binary(max_size=300)


def tuples(elements, size=3):
    return st.lists(elements, max_size=size).map(tuple)


tps = st.builds(TopicPartitions, st.uuids(), tuples(i32, 200))
# utf-8 metadata up to an int16 length; with an expire timestamp (v1) or without (v3, the value's own body)
offset_values = st.builds(OffsetCommitValue, i64, i32, text | st.text(min_size=100, max_size=2000), i64,
                          st.just(-1) | i64)
members = st.builds(MemberMetadata, names, maybe, text, text, i32, i32, blobs, blobs)

records = st.one_of(
    st.tuples(st.builds(OffsetCommitKey, names, names, i32), offset_values),
    st.tuples(st.builds(GroupMetadataKey, names),
              st.builds(GroupMetadataValue, text, i32, maybe, maybe, i64, tuples(members))),
    st.tuples(st.builds(ConsumerGroupMetadataKey, names), st.builds(ConsumerGroupMetadataValue, i32, st.just(0) | i64)),
    st.tuples(st.builds(ConsumerGroupPartitionMetadataKey, names), st.builds(
        ConsumerGroupPartitionMetadataValue, tuples(st.builds(TopicMetadata, st.uuids(), names, i32, tuples(
            st.builds(PartitionMetadata, i32, tuples(text))))))),
    st.tuples(st.builds(ConsumerGroupMemberMetadataKey, names, text), st.builds(
        ConsumerGroupMemberMetadataValue, maybe, maybe, text, text, tuples(names, 40), maybe, i32, maybe,
        st.none() | st.builds(ClassicMemberMetadata, i32, tuples(st.builds(ClassicProtocol, text, blobs))))),
    st.tuples(st.builds(ConsumerGroupTargetAssignmentMetadataKey, names),
              st.builds(ConsumerGroupTargetAssignmentMetadataValue, i32)),
    st.tuples(st.builds(ConsumerGroupTargetAssignmentMemberKey, names, text),
              st.builds(ConsumerGroupTargetAssignmentMemberValue, tuples(tps))),
    st.tuples(st.builds(ConsumerGroupCurrentMemberAssignmentKey, names, text),
              st.builds(ConsumerGroupCurrentMemberAssignmentValue, i32, i32, i8, tuples(tps), tuples(tps))),
    st.tuples(st.builds(ConsumerGroupRegularExpressionKey, names, names),
              st.builds(ConsumerGroupRegularExpressionValue, tuples(names, 50), i64, i64)),
)


@settings(max_examples=1500, deadline=None)
@given(record=records)
def test_every_record_encodes_to_the_bytes_the_hand_written_codecs_wrote(record):
    key, value = record
    assert encode_key(key) == old_encode_key(key)
    assert encode_value(value) == old_encode_value(value)
    if isinstance(value, OffsetCommitValue) and value.expire_timestamp != -1:  # v1 has no leader epoch
        value = OffsetCommitValue(*value.fields()[:1], -1, *value.fields()[2:])
    assert decode(encode_key(key), encode_value(value)) == Record(key, value)


def test_a_tombstone_of_every_record_type_is_a_null_value():
    keys = [OffsetCommitKey("g", "t", 0), GroupMetadataKey("g")] + [
        cls(*(["g"] * len(cls.__dataclass_fields__))) for cls in _OLD_KEY_TYPES if cls.__name__.startswith("Consumer")]
    for key in keys:
        assert encode_value(None) is None
        assert decode(encode_key(key), None) == Record(key, None)


def test_a_nullable_struct_in_a_tagged_field_reads_its_int8_null_marker():
    data = encode_value(ConsumerGroupMemberMetadataValue(None, None, "c", "h", (), None))
    with_null = data[:-1] + bytes.fromhex("01 00 01 ff")  # tag 0, one byte: -1, the struct is null
    assert decode(encode_key(ConsumerGroupMemberMetadataKey("g", "m")), with_null).value.classic_member_metadata is None


def test_the_generated_classes_take_the_schema_defaults():
    assert GroupMetadataValue("consumer", 1) == GroupMetadataValue("consumer", 1, None, None, -1, ())
    assert TopicPartitions(uuid.UUID(int=1)).partitions == ()
    assert ConsumerGroupMemberMetadataValue(None, None, "c", "h").rebalance_timeout_ms == -1
