"""The consumer-group records of `__consumer_offsets` (`storage.consumer_records`, spec §10) against
bytes written by hand from Kafka's schemas (group-coordinator/src/main/resources/common/message/
ConsumerGroup*.json): keys are int16 record type + non-flexible strings (int16 length); values are
int16 version 0 + flexible structs: compact strings/arrays are prefixed by an unsigned varint of
length + 1 (0 = null), a uuid is 16 raw bytes, and every struct, element or not, ends with a
tagged-field section (varint count, then tag, size, bytes per field).
"""

from __future__ import annotations

import os
import struct
import uuid

import pytest
from aiokafka.record.default_records import DefaultRecordBatchBuilder
from hypothesis import given, settings
from hypothesis import strategies as st

from groupd.storage import records
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
    assignment_of,
    decode,
    decode_key,
    decode_value,
    encode_key,
    encode_value,
    topic_partitions,
)
from groupd.storage.log import PartitionLog, partition_dir, records_of
from groupd.storage.records import CorruptRecord, OffsetCommitKey, OffsetCommitValue, Record, UnknownRecordType
from groupd.storage.scanner import scan


def hexbytes(*fields: str) -> bytes:
    return bytes.fromhex("".join(fields).replace(" ", ""))


TOPIC = uuid.UUID("00112233-4455-6677-8899-aabbccddeeff")
TOPIC_HEX = "00112233445566778899aabbccddeeff"  # Uuid: most then least significant int64, big-endian
OTHER = uuid.UUID(int=0xA)
OTHER_HEX = "0000000000000000000000000000000a"

# -- keys: int16 type + int16-length strings ------------------------------------------------------

KEYS = [
    (ConsumerGroupMetadataKey("grp"), hexbytes("0003", "0003 677270")),
    (ConsumerGroupPartitionMetadataKey("grp"), hexbytes("0004", "0003 677270")),
    (ConsumerGroupMemberMetadataKey("grp", "m1"), hexbytes("0005", "0003 677270", "0002 6d31")),
    (ConsumerGroupTargetAssignmentMetadataKey("grp"), hexbytes("0006", "0003 677270")),
    (ConsumerGroupTargetAssignmentMemberKey("grp", "m1"), hexbytes("0007", "0003 677270", "0002 6d31")),
    (ConsumerGroupCurrentMemberAssignmentKey("grp", "m1"), hexbytes("0008", "0003 677270", "0002 6d31")),
    (ConsumerGroupRegularExpressionKey("grp", "t.*"), hexbytes("0010", "0003 677270", "0003 742e2a")),
]


@pytest.mark.parametrize("key, expected", KEYS)
def test_keys_are_the_record_type_then_classic_strings(key, expected):
    assert encode_key(key) == expected
    assert decode_key(expected) == key


# -- values: one hand-written vector per type ------------------------------------------------------

GROUP_METADATA = (
    ConsumerGroupMetadataKey("grp"), ConsumerGroupMetadataValue(epoch=5),
    hexbytes(
        "0000",          # value version 0
        "00000005",      # Epoch: int32 5
        "00",            # tagged fields: none (MetadataHash 0 is its default, not written)
    ))

GROUP_METADATA_WITH_HASH = (
    ConsumerGroupMetadataKey("grp"), ConsumerGroupMetadataValue(epoch=5, metadata_hash=0x0102030405060708),
    hexbytes(
        "0000", "00000005",
        "01",                    # one tagged field
        "00", "08",              # tag 0 (MetadataHash, Kafka 4.1), 8 bytes
        "0102030405060708",      # int64
    ))

PARTITION_METADATA = (
    ConsumerGroupPartitionMetadataKey("grp"),
    ConsumerGroupPartitionMetadataValue((TopicMetadata(TOPIC, "t", 2, (PartitionMetadata(0, ("r1",)),)),)),
    hexbytes(
        "0000",
        "02",                    # Topics: compact array, 1 element (varint 1 + 1)
        TOPIC_HEX,               #   TopicId: uuid
        "02 74",                 #   TopicName: compact string "t" (varint 1 + 1)
        "00000002",              #   NumPartitions: int32 2
        "02",                    #   PartitionMetadata: 1 element
        "00000000",              #     Partition: int32 0
        "02", "03 7231",         #     Racks: 1 element, compact string "r1"
        "00",                    #     tagged fields of PartitionMetadata
        "00",                    #   tagged fields of TopicMetadata
        "00",                    # tagged fields of the value
    ))

MEMBER_METADATA = (
    ConsumerGroupMemberMetadataKey("grp", "m1"),
    ConsumerGroupMemberMetadataValue(instance_id=None, rack_id="r", client_id="c", client_host="/h",
                                     subscribed_topic_names=("t",), subscribed_topic_regex=None,
                                     rebalance_timeout_ms=300000, server_assignor="range"),
    hexbytes(
        "0000",
        "00",                    # InstanceId: null (compact nullable string: varint 0)
        "02 72",                 # RackId: "r"
        "02 63",                 # ClientId: "c"
        "03 2f68",               # ClientHost: "/h"
        "02", "02 74",           # SubscribedTopicNames: 1 element, "t"
        "00",                    # SubscribedTopicRegex: null
        "000493e0",              # RebalanceTimeoutMs: int32 300000
        "06 72616e6765",         # ServerAssignor: "range"
        "00",                    # tagged fields: none (ClassicMemberMetadata null)
    ))

CLASSIC_MEMBER_METADATA = (
    ConsumerGroupMemberMetadataKey("grp", "m1"),
    ConsumerGroupMemberMetadataValue(None, None, "c", "/h", ("t",), None, 300000, None,
                                     ClassicMemberMetadata(45000, (ClassicProtocol("range", b"\x01\x02"),))),
    hexbytes(
        "0000", "00", "00", "02 63", "03 2f68", "02", "02 74", "00", "000493e0",
        "00",                    # ServerAssignor: null
        "01",                    # one tagged field
        "00",                    #   tag 0: ClassicMemberMetadata
        "11",                    #   size 17 = 1 (presence) + 4 + 1 + 6 + 3 + 1 + 1
        "01",                    #   a nullable struct in a tagged field: varint 1 = present
        "0000afc8",              #   SessionTimeoutMs: int32 45000
        "02",                    #   SupportedProtocols: 1 element
        "06 72616e6765",         #     Name: "range"
        "03 0102",               #     Metadata: compact bytes, 2 bytes
        "00",                    #     tagged fields of ClassicProtocol
        "00",                    #   tagged fields of ClassicMemberMetadata
    ))

TARGET_METADATA = (
    ConsumerGroupTargetAssignmentMetadataKey("grp"), ConsumerGroupTargetAssignmentMetadataValue(7),
    hexbytes("0000", "00000007", "00"))  # AssignmentEpoch: int32 7, no tagged fields

TARGET_MEMBER = (
    ConsumerGroupTargetAssignmentMemberKey("grp", "m1"),
    ConsumerGroupTargetAssignmentMemberValue((TopicPartitions(TOPIC, (0, 2)),)),
    hexbytes(
        "0000",
        "02",                    # TopicPartitions: 1 element
        TOPIC_HEX,               #   TopicId
        "03", "00000000 00000002",  # Partitions: compact array of 2 int32
        "00",                    #   tagged fields of the element
        "00",                    # tagged fields of the value
    ))

CURRENT_ASSIGNMENT = (
    ConsumerGroupCurrentMemberAssignmentKey("grp", "m1"),
    ConsumerGroupCurrentMemberAssignmentValue(4, 3, 1, (TopicPartitions(TOPIC, (1,)),),
                                              (TopicPartitions(OTHER, (0,)),)),
    hexbytes(
        "0000",
        "00000004",              # MemberEpoch
        "00000003",              # PreviousMemberEpoch
        "01",                    # State: int8 1 = UNREVOKED_PARTITIONS
        "02", TOPIC_HEX, "02 00000001", "00",    # AssignedPartitions: [{TOPIC, [1]}]
        "02", OTHER_HEX, "02 00000000", "00",    # PartitionsPendingRevocation: [{OTHER, [0]}]
        "00",
    ))

REGULAR_EXPRESSION = (
    ConsumerGroupRegularExpressionKey("grp", "t.*"),
    ConsumerGroupRegularExpressionValue(("t1", "t2"), 42, 1_700_000_000_000),
    hexbytes(
        "0000",
        "03", "03 7431", "03 7432",   # Topics: 2 elements, "t1", "t2"
        "000000000000002a",           # Version: int64 42
        "0000018bcfe56800",           # Timestamp: int64
        "00",
    ))

VALUES = [GROUP_METADATA, GROUP_METADATA_WITH_HASH, PARTITION_METADATA, MEMBER_METADATA, CLASSIC_MEMBER_METADATA,
          TARGET_METADATA, TARGET_MEMBER, CURRENT_ASSIGNMENT, REGULAR_EXPRESSION]


@pytest.mark.parametrize("key, value, expected", VALUES)
def test_values_are_byte_identical_to_kafka(key, value, expected):
    assert encode_value(value) == expected
    assert decode_value(key, expected) == value
    assert decode(encode_key(key), expected) == Record(key, value)


def value_tag_section(value, expected: bytes) -> int:
    """Where the value's own tagged-field section starts in its vector."""
    if isinstance(value, ConsumerGroupMetadataValue) and value.metadata_hash:
        return 2 + 4
    if getattr(value, "classic_member_metadata", None) is not None:
        return len(expected) - (1 + 1 + 1 + 17)  # count, tag, size, the 17 bytes of the struct
    return len(expected) - 1  # an empty section: the final varint 0


@pytest.mark.parametrize("key, value, expected", VALUES)
def test_unknown_tagged_fields_are_skipped(key, value, expected):
    start = value_tag_section(value, expected)
    unknown = hexbytes("09", "03", "aabbcc")  # tag 9, 3 bytes
    data = expected[:start] + bytes([expected[start] + 1]) + expected[start + 1:] + unknown
    assert decode_value(key, data) == value


def test_unknown_tags_inside_array_elements_are_skipped():
    key, value, _ = TARGET_MEMBER
    data = hexbytes("0000", "02", TOPIC_HEX, "03 00000000 00000002", "01 05 02 ffff", "00")
    assert decode_value(key, data) == value


def test_a_later_kafka_current_assignment_with_assignment_epochs_reads():
    # KIP-1251 (Kafka 4.3) adds tag 0 AssignmentEpochs to each TopicPartitions element
    key = ConsumerGroupCurrentMemberAssignmentKey("grp", "m1")
    data = hexbytes("0000", "00000004", "00000003", "00",
                    "02", TOPIC_HEX, "02 00000001", "01 00 05 02 00000004",
                    "01", "00")
    assert decode_value(key, data) == ConsumerGroupCurrentMemberAssignmentValue(4, 3, 0, (TopicPartitions(TOPIC, (1,)),), ())


@pytest.mark.parametrize("key, value, expected", VALUES)
def test_tombstones_are_null_values(key, value, expected):
    assert encode_value(None) is None
    assert decode_value(key, None) is None
    assert decode(encode_key(key), None) == Record(key, None)


@pytest.mark.parametrize("key, value, expected", VALUES)
def test_truncated_values_are_corrupt(key, value, expected):
    for cut in range(2, len(expected)):
        with pytest.raises(CorruptRecord):
            decode_value(key, expected[:cut])


def test_an_unknown_value_version_is_corrupt():
    with pytest.raises(CorruptRecord):
        decode_value(ConsumerGroupMetadataKey("g"), hexbytes("0001", "00000005", "00"))


def test_classic_records_decode_through_the_same_entry_points():
    key = OffsetCommitKey("grp", "t", 0)
    value = OffsetCommitValue(5, -1, "", 1_700_000_000_000)
    assert decode(records.encode_key(key), records.encode_value(value)) == Record(key, value)
    with pytest.raises(UnknownRecordType):
        decode_key(hexbytes("0009", "0003 677270"))  # share-group records stay unknown


def test_assignments_convert_to_and_from_their_record_form():
    assignment = {OTHER: frozenset({3, 1}), TOPIC: frozenset({0}), uuid.UUID(int=99): frozenset()}
    entries = topic_partitions(assignment)
    assert entries == (TopicPartitions(OTHER, (1, 3)), TopicPartitions(TOPIC, (0,)))
    assert assignment_of(entries) == {OTHER: frozenset({1, 3}), TOPIC: frozenset({0})}


# -- round trips over random values --------------------------------------------------------------

names = st.text(max_size=8)
uuids = st.uuids()
tps = st.builds(TopicPartitions, uuids, st.lists(st.integers(-2**31, 2**31 - 1), max_size=4).map(tuple))
values = st.one_of(
    st.builds(lambda e, h: (ConsumerGroupMetadataKey("g"), ConsumerGroupMetadataValue(e, h)),
              st.integers(-2**31, 2**31 - 1), st.integers(-2**63, 2**63 - 1)),
    st.builds(lambda ts: (ConsumerGroupPartitionMetadataKey("g"), ConsumerGroupPartitionMetadataValue(ts)),
              st.lists(st.builds(TopicMetadata, uuids, names, st.integers(0, 1000),
                                 st.lists(st.builds(PartitionMetadata, st.integers(0, 99),
                                                    st.lists(names, max_size=3).map(tuple)), max_size=3).map(tuple)),
                       max_size=3).map(tuple)),
    st.builds(lambda *f: (ConsumerGroupMemberMetadataKey("g", "m"), ConsumerGroupMemberMetadataValue(*f)),
              st.none() | names, st.none() | names, names, names, st.lists(names, max_size=3).map(tuple),
              st.none() | names, st.integers(-2**31, 2**31 - 1), st.none() | names,
              st.none() | st.builds(ClassicMemberMetadata, st.integers(-2**31, 2**31 - 1),
                                    st.lists(st.builds(ClassicProtocol, names, st.binary(max_size=300)),
                                             max_size=3).map(tuple))),
    st.builds(lambda e: (ConsumerGroupTargetAssignmentMetadataKey("g"), ConsumerGroupTargetAssignmentMetadataValue(e)),
              st.integers(-2**31, 2**31 - 1)),
    st.builds(lambda t: (ConsumerGroupTargetAssignmentMemberKey("g", "m"), ConsumerGroupTargetAssignmentMemberValue(t)),
              st.lists(tps, max_size=3).map(tuple)),
    st.builds(lambda e, p, s, a, r: (ConsumerGroupCurrentMemberAssignmentKey("g", "m"),
                                     ConsumerGroupCurrentMemberAssignmentValue(e, p, s, a, r)),
              st.integers(-2**31, 2**31 - 1), st.integers(-2**31, 2**31 - 1), st.integers(-128, 127),
              st.lists(tps, max_size=3).map(tuple), st.lists(tps, max_size=3).map(tuple)),
    st.builds(lambda t, v, ts: (ConsumerGroupRegularExpressionKey("g", ".*"),
                                ConsumerGroupRegularExpressionValue(t, v, ts)),
              st.lists(names, max_size=3).map(tuple), st.integers(-2**63, 2**63 - 1), st.integers(-2**63, 2**63 - 1)),
)


@settings(max_examples=300, deadline=None)
@given(record=values)
def test_every_value_round_trips(record):
    key, value = record
    assert decode(encode_key(key), encode_value(value)) == Record(key, value)


# -- the classic loader goes on skipping them ------------------------------------------------------

def test_the_loader_reads_and_applies_consumer_group_records(tmp_path):
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=0, producer_id=-1,
                                        producer_epoch=-1, base_sequence=-1, batch_size=1 << 30)
    offset_key, offset_value = OffsetCommitKey("grp", "t", 0), OffsetCommitValue(5, -1, "", 1_700_000_000_000)
    builder.append(0, timestamp=0, key=encode_key(offset_key), value=encode_value(offset_value), headers=[])
    for delta, (key, value, _) in enumerate(VALUES, start=1):
        builder.append(delta, timestamp=0, key=encode_key(key), value=encode_value(value), headers=[])
    batch = bytes(builder.build())
    expected = [Record(offset_key, offset_value)] + [Record(key, value) for key, value, _ in VALUES]
    assert [record for _, record, _ in records_of(scan(batch).batches[0].batch)] == expected

    os.makedirs(partition_dir(str(tmp_path), 0))
    with open(os.path.join(partition_dir(str(tmp_path), 0), f"{0:020d}.log"), "wb") as f:
        f.write(batch)
    applied = []
    result = PartitionLog(str(tmp_path), 0, segment_bytes=1 << 20).load(applied.append)
    assert applied == expected
    assert (result.records, result.skipped) == (1 + len(VALUES), 0)


def test_struct_sizes_in_the_vectors_add_up():
    # the tagged ClassicMemberMetadata's size byte is what follows it, counted
    data = CLASSIC_MEMBER_METADATA[2]
    start = data.index(bytes.fromhex("01 00 11".replace(" ", ""))) + 3
    assert len(data) - start == 0x11
    assert struct.unpack(">i", data[start + 1:start + 5])[0] == 45000
