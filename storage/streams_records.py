"""The streams-group (KIP-1071) records of `__consumer_offsets`, byte-identical to Kafka's: the same
framing as the consumer-group ones (storage/consumer_records.py, which encodes and decodes them
with its own), types 17 and 19–23 (Kafka 4.3 has no type 18: its StreamsGroupPartitionMetadata went before 4.2):

   17 StreamsGroupMetadata                  21 StreamsGroupTargetAssignmentMember
   19 StreamsGroupMemberMetadata            22 StreamsGroupCurrentMemberAssignment
   20 StreamsGroupTargetAssignmentMetadata  23 StreamsGroupTopology
"""

from __future__ import annotations

from typing import Union

from .generated_streams_records import (
    CopartitionGroup,
    CurrentTaskIds,
    LastAssignmentConfig,
    StreamsEndpoint,
    StreamsGroupCurrentMemberAssignmentKey,
    StreamsGroupCurrentMemberAssignmentValue,
    StreamsGroupMemberMetadataKey,
    StreamsGroupMemberMetadataValue,
    StreamsGroupMetadataKey,
    StreamsGroupMetadataValue,
    StreamsGroupTargetAssignmentMemberKey,
    StreamsGroupTargetAssignmentMemberValue,
    StreamsGroupTargetAssignmentMetadataKey,
    StreamsGroupTargetAssignmentMetadataValue,
    StreamsGroupTopologyKey,
    StreamsGroupTopologyValue,
    StreamsKeyValue,
    StreamsTopicInfo,
    Subtopology,
    TaskIds,
    TopicConfig,
)

__all__ = ["CopartitionGroup", "CurrentTaskIds", "LastAssignmentConfig", "StreamsEndpoint",
           "StreamsGroupCurrentMemberAssignmentKey", "StreamsGroupCurrentMemberAssignmentValue",
           "StreamsGroupMemberMetadataKey", "StreamsGroupMemberMetadataValue", "StreamsGroupMetadataKey",
           "StreamsGroupMetadataValue", "StreamsGroupTargetAssignmentMemberKey",
           "StreamsGroupTargetAssignmentMemberValue", "StreamsGroupTargetAssignmentMetadataKey",
           "StreamsGroupTargetAssignmentMetadataValue", "StreamsGroupTopologyKey", "StreamsGroupTopologyValue",
           "StreamsKeyValue", "StreamsTopicInfo", "Subtopology", "TaskIds", "TopicConfig", "StreamsGroupKey"]

StreamsGroupKey = Union[StreamsGroupMetadataKey, StreamsGroupTopologyKey, StreamsGroupMemberMetadataKey,
                        StreamsGroupTargetAssignmentMetadataKey, StreamsGroupTargetAssignmentMemberKey,
                        StreamsGroupCurrentMemberAssignmentKey]
