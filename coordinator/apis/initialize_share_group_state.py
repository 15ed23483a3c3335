"""InitializeShareGroupState (83), v0: broker-to-broker (Kafka's group coordinator asks the share
coordinator). In groupd a share-partition's state is kept by its data partition's leader, so the
group's coordinator on another worker or node sends this to that leader for AlterShareGroupOffsets
(share_state_at_leaders.py): each named share-partition starts afresh at StartOffset, its in-flight
records forgotten. The leader takes the next state epoch itself (StateEpoch is not compared, as the
coordinator knows no epoch of state it does not keep). Needs CLUSTER_ACTION; taken from other workers
and nodes, not advertised."""

from __future__ import annotations

from groupd.protocol.apis import ApiKey

from .request import Request
from .share_state_at_leaders import answer_here, error_row, initialize_here

KEY = ApiKey.INITIALIZE_SHARE_GROUP_STATE
VERSIONS = (0, 0)


def handle(node, request: Request):
    group = request.body.group_id
    return answer_here(node, request, lambda topic, p: initialize_here(node, group, topic, p.partition, p.start_offset),
                       error_row)

