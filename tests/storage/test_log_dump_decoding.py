"""`groupd log dump` decodes what the records carry (storage/inspect.describe): the ConsumerProtocol
bytes of classic `consumer` groups, and the KIP-848 consumer-group records field by field."""

import base64
import json
import uuid

from groupd.protocol.consumer import encode_assignment, encode_subscription
from groupd.storage.consumer_records import (
    ClassicMemberMetadata,
    ClassicProtocol,
    ConsumerGroupCurrentMemberAssignmentKey,
    ConsumerGroupCurrentMemberAssignmentValue,
    ConsumerGroupMemberMetadataKey,
    ConsumerGroupMemberMetadataValue,
    TopicPartitions,
)
from groupd.storage.inspect import describe
from groupd.storage.records import GroupMetadataKey, GroupMetadataValue, MemberMetadata, Record


def group_metadata(protocol_type: str, subscription: bytes, assignment: bytes) -> Record:
    member = MemberMetadata("m-1", None, "client-1", "/127.0.0.1", 30000, 10000, subscription, assignment)
    return Record(GroupMetadataKey("g"), GroupMetadataValue(protocol_type, 3, "range", "m-1", 1700000000000, (member,)))


def test_consumer_protocol_bytes_of_a_classic_group_are_decoded():
    sub = encode_subscription(["t", "u"], b"abc", owned={"t": [1]})
    (member,) = describe(group_metadata("consumer", sub, encode_assignment({"t": [0, 1]}, b"xy")))["members"]
    assert member["subscription"] == {"topics": ["t", "u"], "owned_partitions": {"t": [1]}, "generation": -1,
                                      "rack_id": None, "user_data_bytes": 3}
    assert member["assignment"] == {"partitions": {"t": [0, 1]}, "user_data_bytes": 2}


def test_other_protocol_types_and_bad_bytes_stay_base64():
    (connect,) = describe(group_metadata("connect", b"\x00\x01", b"\x02"))["members"]
    assert (connect["subscription"], connect["assignment"]) == (base64.b64encode(b"\x00\x01").decode(), "Ag==")
    (bad,) = describe(group_metadata("consumer", b"\x00", b"\x00\x00\x00"))["members"]
    assert (bad["subscription"], bad["assignment"]) == ("AA==", "AAAA")


def test_consumer_group_records_are_decoded_field_by_field():
    topic = uuid.UUID(int=7)
    current = describe(Record(ConsumerGroupCurrentMemberAssignmentKey("g", "m-1"), ConsumerGroupCurrentMemberAssignmentValue(
        5, 4, 0, (TopicPartitions(topic, (0, 2)),), ())))
    assert current == {"type": "consumer_group_current_member_assignment", "group": "g", "member_id": "m-1",
                       "value": {"member_epoch": 5, "previous_member_epoch": 4, "state": 0,
                                 "assigned_partitions": [{"topic_id": str(topic), "partitions": [0, 2]}],
                                 "partitions_pending_revocation": []}}
    classic = ClassicMemberMetadata(45000, (ClassicProtocol("range", encode_subscription(["t"])),))
    member = describe(Record(ConsumerGroupMemberMetadataKey("g", "m-2"), ConsumerGroupMemberMetadataValue(
        None, None, "client", "/10.0.0.1", ("t",), None, 30000, None, classic)))
    assert member["value"]["subscribed_topic_names"] == ["t"]
    assert member["value"]["classic_member_metadata"]["supported_protocols"] == [
        {"name": "range", "metadata": {"topics": ["t"], "owned_partitions": {}, "generation": -1, "rack_id": None,
                                       "user_data_bytes": 0}}]
    assert describe(Record(ConsumerGroupMemberMetadataKey("g", "m-2"), None)) == {
        "type": "consumer_group_member_metadata", "group": "g", "member_id": "m-2"}
    json.dumps(member)  # every field is JSON
