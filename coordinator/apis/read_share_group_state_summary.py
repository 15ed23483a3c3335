"""ReadShareGroupStateSummary (87), v0–v1: broker-to-broker (Kafka's group coordinator asks the share
coordinator). In groupd a share-partition's state is kept by its data partition's leader, so the
group's coordinator on another worker or node sends this to that leader for DescribeShareGroupOffsets
(share_state_at_leaders.py): each share-partition's state epoch, start offset (−1 without state) and,
v1, the delivery-complete count (records at or past the start offset acknowledged or archived), from
memory or the share-state log as the leader last wrote it. LeaderEpoch is the data partition's.
Needs CLUSTER_ACTION; taken from other workers and nodes, not advertised."""

from __future__ import annotations

from groupd.protocol.apis import ApiKey

from .request import Request
from .share_state_at_leaders import UNINITIALIZED, answer_here, summary_here

KEY = ApiKey.READ_SHARE_GROUP_STATE_SUMMARY
VERSIONS = (0, 1)


def handle(node, request: Request):
    group = request.body.group_id

    def row(topic, p, result) -> dict:
        error, start, done, epoch = result[0], UNINITIALIZED, -1, 0
        if len(result) > 1:
            _, start, done, _end, epoch = result
        return {"partition": p.partition, "error_code": error, "error_message": None, "state_epoch": epoch,
                "leader_epoch": -1 if topic is None else node.cluster.leader_epoch(topic.name, p.partition),
                "start_offset": start, "delivery_complete_count": done}

    return answer_here(node, request, lambda topic, p: summary_here(node, group, topic, p.partition), row)
