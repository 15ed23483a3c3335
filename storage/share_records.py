"""The share-group (KIP-932) records of `__consumer_offsets`, byte-identical to Kafka's: the same
framing as the consumer-group ones (storage/consumer_records.py, which encodes and decodes them
with its own), types 10–15:

   10 ShareGroupMemberMetadata              13 ShareGroupTargetAssignmentMember
   11 ShareGroupMetadata                    14 ShareGroupCurrentMemberAssignment
   12 ShareGroupTargetAssignmentMetadata    15 ShareGroupStatePartitionMetadata

The share-partition state (ShareSnapshot/ShareUpdate) lives in a log of its own: its types 0 and 1
are offset-commit types here.
"""

from __future__ import annotations

from typing import Union

from .generated_records import (
    ShareGroupCurrentMemberAssignmentKey,
    ShareGroupCurrentMemberAssignmentValue,
    ShareGroupMemberMetadataKey,
    ShareGroupMemberMetadataValue,
    ShareGroupMetadataKey,
    ShareGroupMetadataValue,
    ShareGroupStatePartitionMetadataKey,
    ShareGroupStatePartitionMetadataValue,
    ShareGroupTargetAssignmentMemberKey,
    ShareGroupTargetAssignmentMemberValue,
    ShareGroupTargetAssignmentMetadataKey,
    ShareGroupTargetAssignmentMetadataValue,
    TopicInfo,
    TopicPartitionsInfo,
)

__all__ = ["ShareGroupCurrentMemberAssignmentKey", "ShareGroupCurrentMemberAssignmentValue",
           "ShareGroupMemberMetadataKey", "ShareGroupMemberMetadataValue", "ShareGroupMetadataKey",
           "ShareGroupMetadataValue", "ShareGroupStatePartitionMetadataKey", "ShareGroupStatePartitionMetadataValue",
           "ShareGroupTargetAssignmentMemberKey", "ShareGroupTargetAssignmentMemberValue",
           "ShareGroupTargetAssignmentMetadataKey", "ShareGroupTargetAssignmentMetadataValue", "TopicInfo",
           "TopicPartitionsInfo", "ShareGroupKey"]

ShareGroupKey = Union[ShareGroupMemberMetadataKey, ShareGroupMetadataKey, ShareGroupTargetAssignmentMetadataKey,
                      ShareGroupTargetAssignmentMemberKey, ShareGroupCurrentMemberAssignmentKey,
                      ShareGroupStatePartitionMetadataKey]
