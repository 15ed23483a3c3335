"""Produce's response written straight to bytes (coordinator/apis/produce_response.py) against kio's
encoding of the same values, every version the server offers: successes, every field produce.py sets
(LogAppendTime, record errors, messages, non-ASCII text), several topics and partitions, none."""

import datetime
import random

import pytest

from groupd.coordinator.apis import produce
from groupd.coordinator.apis.produce_response import encode
from groupd.protocol import ErrorCode, codec
from groupd.protocol.apis import ApiKey


def _partition(rng: random.Random) -> dict:
    kind = rng.randrange(4)
    if kind == 0:  # a success, as the hot path answers it
        return produce._partition(rng.randrange(1 << 31), ErrorCode.none, rng.randrange(1 << 62), rng.randrange(1 << 40))
    if kind == 1:  # LogAppendTime
        return produce._partition(rng.randrange(64), ErrorCode.none, rng.randrange(1 << 40), 0,
                                  log_append_time=rng.randrange(1 << 42))
    if kind == 2:  # refused records, as the validator answers them
        errors = tuple((rng.randrange(1000), rng.choice(["bad key", "é" * rng.randrange(300), None]))
                       for _ in range(rng.randrange(4)))
        return produce._partition(rng.randrange(64), ErrorCode.invalid_record, -1, rng.randrange(100),
                                  message=rng.choice([None, "", "One or more records ✗"]), record_errors=errors)
    return produce._partition(rng.randrange(64), rng.choice(list(ErrorCode)), message=rng.choice([None, "x" * 200]))


@pytest.mark.parametrize("version", range(produce.VERSIONS[0], produce.VERSIONS[1] + 1))
def test_produce_response_written_directly_is_byte_identical_to_kio(version):
    rng = random.Random(version)
    for _ in range(200):
        responses = [{"name": rng.choice(["t", "topic-ü", "x" * 249]),
                      "partition_responses": [_partition(rng) for _ in range(rng.randrange(4))]}
                     for _ in range(rng.randrange(4))]
        kio = codec.build_response(ApiKey.PRODUCE, version, {"responses": responses})
        ours = encode(version, responses)
        assert codec.encode_response(ApiKey.PRODUCE, 7, ours) == codec.encode_response(ApiKey.PRODUCE, 7, kio)


def test_log_append_time_round_trips_as_milliseconds():
    when = 1_764_000_000_123
    entry = produce._partition(0, ErrorCode.none, 5, 0, log_append_time=when)
    assert isinstance(entry["log_append_time"], datetime.datetime)
    ours = encode(9, [{"name": "t", "partition_responses": [entry]}])
    _, body = codec.decode_response(ApiKey.PRODUCE, 9, codec.encode_response(ApiKey.PRODUCE, 1, ours)[4:])
    got = body.responses[0].partition_responses[0].log_append_time
    assert round(got.timestamp() * 1000) == when
