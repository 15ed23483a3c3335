"""DeleteShareGroupState (86), v0: broker-to-broker (Kafka's group coordinator asks the share
coordinator). In groupd a share-partition's state is kept by its data partition's leader, so the
group's coordinator on another worker or node sends this to that leader for DeleteShareGroupOffsets
and DeleteGroups (share_state_at_leaders.py): each named share-partition's state is tombstoned, and
the next ShareFetch starts it where `share.auto.offset.reset` says. Needs CLUSTER_ACTION; taken from
other workers and nodes, not advertised."""

from __future__ import annotations

from groupd.protocol.apis import ApiKey

from .request import Request
from .share_state_at_leaders import answer_here, delete_here, error_row

KEY = ApiKey.DELETE_SHARE_GROUP_STATE
VERSIONS = (0, 0)


def handle(node, request: Request):
    group = request.body.group_id
    return answer_here(node, request, lambda topic, p: delete_here(node, group, topic, p.partition), error_row)

