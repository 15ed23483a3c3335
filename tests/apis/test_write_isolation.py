"""One bad record never fails its neighbours (issue 10 item 6): a commit whose group id is too long
for the offsets log fails alone, with Kafka's INVALID_COMMIT_OFFSET_SIZE, while a commit written
in the same batch succeeds. A real server, two pipelined requests on one connection."""

from __future__ import annotations

from groupd.protocol import ErrorCode
from groupd.protocol.apis import ApiKey
from groupd.protocol.codec import decode_response
from tests.support.process import WireClient


def commit_request(c: WireClient, group: str, offset: int) -> tuple[int, bytes]:
    return c.frame(ApiKey.OFFSET_COMMIT, 8, {
        "group_id": group, "generation_id_or_member_epoch": -1, "member_id": "", "group_instance_id": None,
        "topics": [{"name": "t", "partitions": [{"partition_index": 0, "committed_offset": offset,
                                                 "committed_leader_epoch": -1, "committed_metadata": ""}]}]})


def fetched(c: WireClient, group: str) -> dict[int, int]:
    reply = c.request(ApiKey.OFFSET_FETCH, 8, {"groups": [{"group_id": group, "topics": None}],
                                               "require_stable": True})
    return {p.partition_index: p.committed_offset for t in reply.groups[0].topics for p in t.partitions}


def test_a_too_long_group_id_fails_its_commit_alone(start_groupd):
    # one offsets partition: both groups' records go to the same log, in the same write
    server = start_groupd("topics=t:1", "offsets.topic.num.partitions=1")
    too_long = "g" * 40_000  # a string field of the record holds at most 32,767 bytes
    with WireClient(server.bootstrap) as c:
        frames = [commit_request(c, "neighbour", 7), commit_request(c, too_long, 9)]
        c.send_raw(b"".join(data for _, data in frames))  # pipelined: one loop turn, one batch
        replies = {}
        for _ in frames:
            cid, reply = decode_response(ApiKey.OFFSET_COMMIT, 8, c.read_frame())
            replies[cid] = reply.topics[0].partitions[0].error_code
        assert [replies[cid] for cid, _ in frames] == [ErrorCode.none, ErrorCode.invalid_commit_offset_size]
        assert fetched(c, "neighbour") == {0: 7}
        assert fetched(c, too_long) == {}
    assert "cannot be encoded" in server.log()
