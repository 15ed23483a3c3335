"""The `__consumer_offsets` record codec (`storage.records`) against bytes written by hand from the
field tables of spec §12.2–12.5: what groupd writes must be byte-identical to what Kafka writes, and
every value version Kafka ever wrote (0–4, v4 flexible) must decode.

Every expected byte string below is spelled out field by field, in table order, so a reader can
check it against the spec without running anything.
"""

from __future__ import annotations

import struct

import pytest

from groupd.storage.log import build_batch, encode, records_of
from groupd.storage.records import (
    CorruptRecord,
    GroupMetadataKey,
    GroupMetadataValue,
    MemberMetadata,
    OffsetCommitKey,
    OffsetCommitValue,
    Record,
    UnknownRecordType,
    decode,
    decode_key,
    decode_value,
    encode_key,
    encode_value,
)
from groupd.storage.scanner import scan


def hexbytes(*fields: str) -> bytes:
    """Concatenate hex fields ("0001", "0003 677270", ...); spaces are for the reader."""
    return bytes.fromhex("".join(fields).replace(" ", ""))


TS = 1_700_000_000_000  # 0x0000018bcfe56800
EXPIRE = 1_700_000_060_000  # 0x0000018bcfe65260

# -- keys (spec §12.3, §12.5) ----------------------------------------------------------------------

OFFSET_KEY = OffsetCommitKey("grp", "topic", 5)
OFFSET_KEY_BYTES = hexbytes(
    "0001",                  # record type 1 = OffsetCommitKey (what writers use)
    "0003", "677270",        # group: int16 length 3, "grp"
    "0005", "746f706963",    # topic: int16 length 5, "topic"
    "00000005",              # partition: int32 5
)

GROUP_KEY = GroupMetadataKey("grp")
GROUP_KEY_BYTES = hexbytes(
    "0002",                  # record type 2 = GroupMetadataKey
    "0003", "677270",        # group: "grp"
)


def test_offset_commit_key_is_type_1_group_topic_partition():
    assert encode_key(OFFSET_KEY) == OFFSET_KEY_BYTES
    assert decode_key(OFFSET_KEY_BYTES) == OFFSET_KEY


def test_offset_commit_key_type_0_has_the_same_layout():
    assert decode_key(b"\x00\x00" + OFFSET_KEY_BYTES[2:]) == OFFSET_KEY


def test_group_metadata_key_is_type_2_group():
    assert encode_key(GROUP_KEY) == GROUP_KEY_BYTES
    assert decode_key(GROUP_KEY_BYTES) == GROUP_KEY


def test_key_strings_are_utf8_with_byte_lengths():
    key = OffsetCommitKey("grüp", "t", 0)
    assert encode_key(key) == hexbytes(
        "0001",
        "0005", "67 72 c3bc 70",  # "grüp": 5 UTF-8 bytes (ü = c3 bc)
        "0001", "74",
        "00000000")
    assert decode_key(encode_key(key)) == key


@pytest.mark.parametrize("key_type", [3, 4, 8, 9, 15, 42, -1])
def test_unknown_key_type_raises_unknown_record_type(key_type):
    data = struct.pack(">h", key_type) + hexbytes("0003 677270")
    with pytest.raises(UnknownRecordType) as info:
        decode_key(data)
    assert info.value.key_type == key_type
    with pytest.raises(UnknownRecordType):
        decode(data, None)


# -- OffsetCommitValue (spec §12.4) --------------------------------------------------------------

def test_offset_commit_value_is_written_as_v3():
    value = OffsetCommitValue(offset=1234, leader_epoch=9, metadata="meta", commit_timestamp=TS)
    assert encode_value(value) == hexbytes(
        "0003",                  # value version 3
        "00000000000004d2",      # offset: int64 1234
        "00000009",              # leaderEpoch: int32 9
        "0004", "6d657461",      # metadata: "meta"
        "0000018bcfe56800",      # commitTimestamp
    )


def test_offset_commit_value_without_leader_epoch_writes_minus_one():
    value = OffsetCommitValue(offset=0, leader_epoch=-1, metadata="", commit_timestamp=TS)
    assert encode_value(value) == hexbytes(
        "0003",
        "0000000000000000",      # offset 0
        "ffffffff",              # leaderEpoch -1 = absent
        "0000",                  # metadata "" (never null in the record)
        "0000018bcfe56800",
    )


def test_offset_commit_value_with_expire_timestamp_is_written_as_v1():
    value = OffsetCommitValue(offset=1234, leader_epoch=9, metadata="meta", commit_timestamp=TS,
                              expire_timestamp=EXPIRE)
    assert encode_value(value) == hexbytes(
        "0001",                  # value version 1: the only one with an expire timestamp
        "00000000000004d2",      # offset
        "0004", "6d657461",      # metadata (v1 has no leaderEpoch: it is dropped)
        "0000018bcfe56800",      # commitTimestamp
        "0000018bcfe65260",      # expireTimestamp
    )


OFFSET_VALUES = {
    # version: (hand-built bytes, what they decode to)
    0: (hexbytes("0000", "00000000000004d2", "0004 6d657461", "0000018bcfe56800"),
        OffsetCommitValue(1234, -1, "meta", TS, -1)),
    1: (hexbytes("0001", "00000000000004d2", "0004 6d657461", "0000018bcfe56800", "0000018bcfe65260"),
        OffsetCommitValue(1234, -1, "meta", TS, EXPIRE)),
    2: (hexbytes("0002", "00000000000004d2", "0004 6d657461", "0000018bcfe56800"),
        OffsetCommitValue(1234, -1, "meta", TS, -1)),
    3: (hexbytes("0003", "00000000000004d2", "00000009", "0004 6d657461", "0000018bcfe56800"),
        OffsetCommitValue(1234, 9, "meta", TS, -1)),
    4: (hexbytes("0004",
                 "00000000000004d2",      # offset
                 "00000009",              # leaderEpoch
                 "05", "6d657461",        # metadata: compact string, uvarint length+1 = 5
                 "0000018bcfe56800",      # commitTimestamp
                 "00"),                   # tagged fields: none
        OffsetCommitValue(1234, 9, "meta", TS, -1)),
}


@pytest.mark.parametrize("version", sorted(OFFSET_VALUES))
def test_offset_commit_value_decodes_every_version(version):
    data, expected = OFFSET_VALUES[version]
    assert decode_value(OFFSET_KEY, data) == expected
    assert decode(OFFSET_KEY_BYTES, data) == Record(OFFSET_KEY, expected)


def test_flexible_offset_commit_value_skips_unknown_tagged_fields_and_long_compact_strings():
    metadata = "x" * 200  # compact length 201 = uvarint c9 01
    data = hexbytes("0004", "0000000000000007", "ffffffff",
                    "c901", metadata.encode().hex(),
                    "0000018bcfe56800",
                    "02",                      # two tagged fields
                    "00", "03", "616263",      # tag 0, size 3, "abc"
                    "05", "01", "ff")          # tag 5, size 1
    assert decode_value(OFFSET_KEY, data) == OffsetCommitValue(7, -1, metadata, TS, -1)


def test_offset_commit_value_roundtrips_utf8_metadata():
    value = OffsetCommitValue(3, 1, "mëta\x00", TS)
    assert encode_value(value)[14:22] == hexbytes("0006", "6d c3ab 7461 00")  # 6 UTF-8 bytes
    assert decode_value(OFFSET_KEY, encode_value(value)) == value


# -- GroupMetadataValue (spec §12.5) ---------------------------------------------------------------

TWO_MEMBERS = GroupMetadataValue(
    protocol_type="consumer", generation=7, protocol="range", leader="m1", current_state_timestamp=TS,
    members=(
        MemberMetadata("m1", None, "c1", "/h1", rebalance_timeout=30000, session_timeout=10000,
                       subscription=b"\x00\x01", assignment=b""),
        MemberMetadata("m2", "i2", "c2", "/h2", rebalance_timeout=300000, session_timeout=45000,
                       subscription=b"sub", assignment=b"asg"),
    ))

TWO_MEMBERS_V3 = hexbytes(
    "0003",                        # value version 3 (what Kafka 4 writes)
    "0008", "636f6e73756d6572",    # protocolType "consumer"
    "00000007",                    # generation 7
    "0005", "72616e6765",          # protocol "range" (nullable string, present)
    "0002", "6d31",                # leader "m1"
    "0000018bcfe56800",            # currentStateTimestamp
    "00000002",                    # members: int32 count 2
    # member 1: dynamic
    "0002", "6d31",                # memberId "m1"
    "ffff",                        # groupInstanceId null
    "0002", "6331",                # clientId "c1"
    "0003", "2f6831",              # clientHost "/h1"
    "00007530",                    # rebalanceTimeout 30000
    "00002710",                    # sessionTimeout 10000
    "00000002", "0001",            # subscription: int32 length 2
    "00000000",                    # assignment: empty
    # member 2: static
    "0002", "6d32",                # memberId "m2"
    "0002", "6932",                # groupInstanceId "i2"
    "0002", "6332",                # clientId "c2"
    "0003", "2f6832",              # clientHost "/h2"
    "000493e0",                    # rebalanceTimeout 300000
    "0000afc8",                    # sessionTimeout 45000
    "00000003", "737562",          # subscription "sub"
    "00000003", "617367",          # assignment "asg"
)


def test_group_metadata_value_with_two_members_is_written_as_v3():
    assert encode_value(TWO_MEMBERS) == TWO_MEMBERS_V3
    assert decode_value(GROUP_KEY, TWO_MEMBERS_V3) == TWO_MEMBERS


def test_group_metadata_value_of_a_new_empty_group_has_null_protocol_and_leader():
    value = GroupMetadataValue("", 0, None, None, TS, ())
    expected = hexbytes(
        "0003",
        "0000",                    # protocolType "" = none
        "00000000",                # generation 0
        "ffff",                    # protocol null
        "ffff",                    # leader null
        "0000018bcfe56800",        # currentStateTimestamp
        "00000000",                # members: none
    )
    assert encode_value(value) == expected
    assert decode_value(GROUP_KEY, expected) == value


def test_group_metadata_value_of_a_generation_that_ended_empty():
    value = GroupMetadataValue("consumer", 3, None, None, -1, ())
    expected = hexbytes("0003", "0008 636f6e73756d6572", "00000003", "ffff", "ffff",
                        "ffffffffffffffff",  # currentStateTimestamp -1 = unknown
                        "00000000")
    assert encode_value(value) == expected
    assert decode_value(GROUP_KEY, expected) == value


GROUP_VALUES = {
    0: (hexbytes("0000",
                 "0008 636f6e73756d6572", "00000007", "0005 72616e6765", "0002 6d31",
                 # v0: no currentStateTimestamp
                 "00000001",
                 "0002 6d31",              # memberId (v0: no groupInstanceId)
                 "0002 6331", "0003 2f6831",
                 # v0: no rebalanceTimeout
                 "00002710",               # sessionTimeout
                 "00000002 0001", "00000001 41"),
        GroupMetadataValue("consumer", 7, "range", "m1", -1, (
            MemberMetadata("m1", None, "c1", "/h1", -1, 10000, b"\x00\x01", b"A"),))),
    1: (hexbytes("0001",
                 "0008 636f6e73756d6572", "00000007", "0005 72616e6765", "0002 6d31",
                 "00000001",
                 "0002 6d31", "0002 6331", "0003 2f6831",
                 "00007530",               # v1: rebalanceTimeout
                 "00002710",
                 "00000002 0001", "00000001 41"),
        GroupMetadataValue("consumer", 7, "range", "m1", -1, (
            MemberMetadata("m1", None, "c1", "/h1", 30000, 10000, b"\x00\x01", b"A"),))),
    2: (hexbytes("0002",
                 "0008 636f6e73756d6572", "00000007", "0005 72616e6765", "0002 6d31",
                 "0000018bcfe56800",       # v2: currentStateTimestamp
                 "00000001",
                 "0002 6d31", "0002 6331", "0003 2f6831", "00007530", "00002710",
                 "00000002 0001", "00000001 41"),
        GroupMetadataValue("consumer", 7, "range", "m1", TS, (
            MemberMetadata("m1", None, "c1", "/h1", 30000, 10000, b"\x00\x01", b"A"),))),
    3: (TWO_MEMBERS_V3, TWO_MEMBERS),
    4: (hexbytes("0004",
                 "09", "636f6e73756d6572",  # protocolType: compact string, 8+1
                 "00000007",                # generation
                 "06", "72616e6765",        # protocol: compact nullable string "range"
                 "00",                      # leader: compact null (length 0)
                 "0000018bcfe56800",        # currentStateTimestamp
                 "03",                      # members: compact array, 2+1
                 "03 6d31",                 # memberId "m1"
                 "00",                      # groupInstanceId null
                 "03 6331", "04 2f6831",    # clientId, clientHost
                 "00007530", "00002710",
                 "03 0001",                 # subscription: compact bytes, 2+1
                 "01",                      # assignment: compact bytes, empty
                 "00",                      # member tagged fields: none
                 "03 6d32", "03 6932", "03 6332", "04 2f6832", "000493e0", "0000afc8",
                 "04 737562", "04 617367",
                 "01 00 02 ffff",           # member tagged fields: one, tag 0, 2 bytes
                 "00"),                     # value tagged fields: none
        GroupMetadataValue("consumer", 7, "range", None, TS, (
            MemberMetadata("m1", None, "c1", "/h1", 30000, 10000, b"\x00\x01", b""),
            MemberMetadata("m2", "i2", "c2", "/h2", 300000, 45000, b"sub", b"asg")))),
}


@pytest.mark.parametrize("version", sorted(GROUP_VALUES))
def test_group_metadata_value_decodes_every_version(version):
    data, expected = GROUP_VALUES[version]
    assert decode_value(GROUP_KEY, data) == expected
    assert decode(GROUP_KEY_BYTES, data) == Record(GROUP_KEY, expected)


def test_flexible_group_metadata_value_with_no_members_and_null_protocol():
    data = hexbytes("0004", "01",        # protocolType "" (compact length 0+1)
                    "00000000", "00", "00", "ffffffffffffffff",
                    "01",                # members: compact array of 0
                    "00")
    assert decode_value(GROUP_KEY, data) == GroupMetadataValue("", 0, None, None, -1, ())


@pytest.mark.parametrize("version", [-1, 5, 9])
def test_unknown_value_version_is_corrupt(version):
    with pytest.raises(CorruptRecord):
        decode_value(OFFSET_KEY, struct.pack(">h", version) + OFFSET_VALUES[3][0][2:])


def test_truncated_value_is_corrupt_not_an_index_error():
    data, _ = OFFSET_VALUES[3]
    for cut in (1, 5, 13, len(data) - 1):
        with pytest.raises(CorruptRecord):
            decode_value(OFFSET_KEY, data[:cut])


# -- tombstones ----------------------------------------------------------------------------------

@pytest.mark.parametrize("key, key_bytes", [(OFFSET_KEY, OFFSET_KEY_BYTES), (GROUP_KEY, GROUP_KEY_BYTES)])
def test_tombstone_is_a_null_value(key, key_bytes):
    assert encode_value(None) is None
    assert decode_value(key, None) is None
    assert decode(key_bytes, None) == Record(key, None)


def test_tombstones_survive_a_record_batch():
    records = [Record(OFFSET_KEY, OffsetCommitValue(1, -1, "", TS)), Record(OFFSET_KEY, None),
               Record(GROUP_KEY, None)]
    batch = build_batch(encode(records), base_offset=100, timestamp_ms=TS)
    found = scan(batch)
    assert (len(found.batches), found.batches[0].size, found.tail, found.damage) == (1, len(batch), None, [])
    decoded = [(offset, record) for offset, record, _ in records_of(found.batches[0].batch)]
    assert decoded == [(100, records[0]), (101, records[1]), (102, records[2])]
    raw = [r for r in scan(batch).batches[0].batch]
    assert [r.value for r in raw][1:] == [None, None]  # null values on the wire, not empty bytes


# -- the batch envelope: Kafka record batch v2 with CRC32C -----------------------------------------

def _crc32c(data: bytes) -> int:
    crc = 0xFFFFFFFF
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF


def test_batch_header_is_magic_2_with_crc32c_over_attributes_onward():
    records = [Record(OFFSET_KEY, OffsetCommitValue(1234, 9, "meta", TS)), Record(GROUP_KEY, TWO_MEMBERS)]
    batch = build_batch(encode(records), base_offset=0x1122334455, timestamp_ms=TS)
    base_offset, length, leader_epoch, magic, crc = struct.unpack_from(">qiibI", batch, 0)
    assert base_offset == 0x1122334455
    assert length == len(batch) - 12             # batchLength counts from partitionLeaderEpoch
    assert magic == 2
    assert crc == _crc32c(batch[21:])            # CRC-32C (Castagnoli) from attributes to the end
    attributes, last_delta, first_ts, max_ts, producer_id, producer_epoch, base_seq, count = \
        struct.unpack_from(">hiqqqhii", batch, 21)
    assert attributes == 0                       # no compression, CREATE_TIME, not transactional
    assert (last_delta, count) == (1, 2)
    assert first_ts == max_ts == TS
    assert (producer_id, producer_epoch, base_seq) == (-1, -1, -1)
    # and the records in it carry exactly the codec's key and value bytes
    raw = list(scan(batch).batches[0].batch)
    assert [(bytes(r.key), bytes(r.value)) for r in raw] == [
        (OFFSET_KEY_BYTES, OFFSET_VALUES[3][0]), (GROUP_KEY_BYTES, TWO_MEMBERS_V3)]
