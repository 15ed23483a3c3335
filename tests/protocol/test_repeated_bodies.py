"""The repeated-body table of codec.decode_request (issue 27): a heartbeat body seen before is not
decoded again. What a request gets must be what the reference path (decode_request_uncached) gives
for the same bytes: the same body, or the same MalformedRequest, for the golden captures and for
mutations of them; the table stays bounded."""

from __future__ import annotations

import datetime
import struct

import pytest

from groupd.protocol import codec
from groupd.protocol.apis import ApiKey
from groupd.protocol.codec import MalformedRequest, RequestHeader, build_request, encode_request
from tests.support.fuzz_frames import Mutator, Seed, corpus

SEED = 20261128


def _consumer_frame(version: int, epoch: int, joining: bool) -> bytes:
    values = {"group_id": "g", "member_id": "m-" + str(epoch), "member_epoch": epoch, "instance_id": None,
              "rack_id": None, "rebalance_timeout": datetime.timedelta(milliseconds=300_000 if joining else -1),
              "subscribed_topic_names": ["t"] if joining else None, "server_assignor": None,
              "topic_partitions": [] if joining else None}
    if version >= 1:
        values["subscribed_topic_regex"] = None
    frame = encode_request(RequestHeader(ApiKey.CONSUMER_GROUP_HEARTBEAT, version, 7, "c"),
                           build_request(ApiKey.CONSUMER_GROUP_HEARTBEAT, version, values))
    return frame[4:]  # without the size prefix


def _seeds() -> list[Seed]:
    seeds = [s for s in corpus() if struct.unpack_from(">h", s.frame)[0] in codec.REPEATED_BODIES]
    for version in (0, 1):
        for epoch, joining in ((0, True), (5, False)):
            frame = _consumer_frame(version, epoch, joining)
            seeds.append(Seed(frame, codec.parse_header(frame, True)[1]))
    return seeds


def _outcome(decode, api_key: int, version: int, frame: bytes, offset: int):
    try:
        return decode(api_key, version, frame, offset)
    except MalformedRequest as e:
        return ("malformed", str(e))


@pytest.fixture(autouse=True)
def empty_table():
    codec._repeats.clear()
    yield
    codec._repeats.clear()


def test_golden_heartbeats_decode_as_the_reference_and_once():
    seeds = _seeds()
    assert {struct.unpack_from(">h", s.frame)[0] for s in seeds} == set(codec.REPEATED_BODIES)
    for s in seeds:
        api_key, version, _ = codec.peek_header(s.frame)
        first = codec.decode_request(api_key, version, s.frame, s.body)
        assert first == codec.decode_request_uncached(api_key, version, s.frame, s.body)
        again = bytes(s.frame)  # another request with the same bytes (a new correlation id changes none of the body)
        assert codec.decode_request(api_key, version, again, s.body) is first


def test_mutated_heartbeats_get_the_reference_outcome():
    seeds = _seeds()
    mutator = Mutator(SEED, seeds)
    checked = malformed = 0
    for _ in range(6000):
        data = mutator.frame()[4:]
        if len(data) < 8:
            continue
        api_key, version = struct.unpack_from(">hh", data)
        if api_key not in codec.REPEATED_BODIES:
            continue
        lo, hi = (0, 4) if api_key == ApiKey.HEARTBEAT else (0, 1)
        if not lo <= version <= hi:
            continue
        try:
            _, offset = codec.parse_header(data, codec.is_flexible(api_key, version))
        except MalformedRequest:
            continue
        want = _outcome(codec.decode_request_uncached, api_key, version, data, offset)
        for _ in range(2):  # the first may fill the table, the second may read it
            assert _outcome(codec.decode_request, api_key, version, data, offset) == want
        checked += 1
        malformed += isinstance(want, tuple)
    assert checked > 1000 and 0 < malformed < checked  # both kinds were exercised


def test_the_table_is_bounded_and_skips_large_bodies():
    for epoch in range(codec.REPEATS_KEPT + 10):
        frame = _consumer_frame(1, epoch + 1, False)
        codec.decode_request(ApiKey.CONSUMER_GROUP_HEARTBEAT, 1, frame, codec.parse_header(frame, True)[1])
        assert len(codec._repeats) <= codec.REPEATS_KEPT
    codec._repeats.clear()
    values = {"group_id": "g" * codec.REPEAT_MAX_BYTES, "generation_id": 1, "member_id": "m", "group_instance_id": None}
    frame = encode_request(RequestHeader(ApiKey.HEARTBEAT, 4, 1, "c"), build_request(ApiKey.HEARTBEAT, 4, values))[4:]
    body = codec.decode_request(ApiKey.HEARTBEAT, 4, frame, codec.parse_header(frame, True)[1])
    assert body.group_id == "g" * codec.REPEAT_MAX_BYTES and not codec._repeats
