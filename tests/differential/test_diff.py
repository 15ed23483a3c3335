"""The differential machinery itself, without servers: normalisation keeps what must compare and
`compare` reports a difference wherever one is (so the corpus test can fail)."""

from __future__ import annotations

import uuid

from groupd.protocol import ErrorCode
from groupd.protocol.apis import ApiKey
from groupd.protocol.codec import build_response

from .diff import Side, compare

T = uuid.UUID(int=7)


def side(name: str, *steps) -> Side:
    s = Side(name, "127.0.0.1:1", "sc", {T: "dt1"})
    for label, value in steps:
        s.record(label, value)
    return s


def join(member: str, leader: str, error=ErrorCode.none, generation: int = 1):
    return build_response(ApiKey.JOIN_GROUP, 9, {
        "error_code": error, "generation_id": generation, "protocol_type": "consumer", "protocol_name": "range",
        "leader": leader, "skip_assignment": False, "member_id": member, "members": []})


def test_member_ids_compare_by_identity_and_client_prefix():
    k1, k2 = "c-" + str(uuid.uuid4()), "c-" + str(uuid.uuid4())
    g1, g2 = "c-" + str(uuid.uuid4()), "c-" + str(uuid.uuid4())
    assert compare(side("kafka", ("j", join(k1, k1)), ("j2", join(k2, k1))),
                   side("groupd", ("j", join(g1, g1)), ("j2", join(g2, g1)))) == []
    # groupd hands the second member the first one's id: a difference
    assert compare(side("kafka", ("j", join(k1, k1)), ("j2", join(k2, k1))),
                   side("groupd", ("j", join(g1, g1)), ("j2", join(g1, g1)))) == [
        "j2 member_id: kafka='c#2' groupd='c#1'"]
    # another client id prefix is a difference too
    assert compare(side("kafka", ("j", join(k1, k1))), side("groupd", ("j", join("x-" + g1[2:], "x-" + g1[2:])))) != []


def test_errors_generations_and_missing_steps_are_differences():
    m = "c-" + str(uuid.uuid4())
    assert compare(side("kafka", ("j", join(m, m))), side("groupd", ("j", join(m, m, ErrorCode.rebalance_in_progress))))
    assert compare(side("kafka", ("j", join(m, m))), side("groupd", ("j", join(m, m, generation=2))))
    assert compare(side("kafka", ("j", join(m, m)), ("h", "x")), side("groupd", ("j", join(m, m)))) != []


def test_what_legitimately_differs_is_normalised():
    def found(node: int, host: str, port: int):
        return build_response(ApiKey.FIND_COORDINATOR, 3, {"error_code": ErrorCode.none, "error_message": "NONE",
                                                           "node_id": node, "host": host, "port": port})
    assert compare(side("kafka", ("f", found(1, "127.0.0.1", 9092))), side("groupd", ("f", found(0, "::1", 1)))) == []
    assert compare(side("kafka", ("f", found(1, "h", 1))), side("groupd", ("f", found(-1, "h", 1)))) != []
