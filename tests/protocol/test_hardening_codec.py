"""Request bodies whatever their counts, tags and nulls (issue 10, items 1–3): the codec reads what
Kafka reads, rejects what Kafka rejects with MalformedRequest, and never lets kio allocate for
elements that are not there."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
import textwrap
import types
import typing
from pathlib import Path

import kio.serial._serialize as kio_serialize
import pytest

from groupd.protocol.apis import ApiKey
from groupd.protocol.codec import MalformedRequest, decode_request, encode_request, is_flexible, parse_header

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = json.loads((ROOT / "tests/golden/requests.json").read_text())


def golden(flexible_only: bool = False) -> list[dict]:
    return [c for c in GOLDEN if not flexible_only or is_flexible(c["api_key"], c["version"])]


def test_issue_frame_listgroups_types_filter_of_2_32_minus_2_is_malformed():
    frame = bytes.fromhex("0010000500000003000c676f6c64656e2d61646d696e0001ffffffff0f00")
    header, offset = parse_header(frame, True)
    with pytest.raises(MalformedRequest, match="cannot fit"):
        decode_request(16, 5, frame, offset)


_MUTATE_EVERY_OFFSET = textwrap.dedent("""
    import json, re
    from groupd.protocol.codec import MalformedRequest, decode_request, is_flexible, parse_header

    def peak_mb():
        # VmHWM is this process's own peak; ru_maxrss would carry the parent's (pytest's) across exec.
        with open("/proc/self/status") as f:
            return int(re.search(r"VmHWM:\\s+(\\d+) kB", f.read()).group(1)) / 1024

    baseline_mb = peak_mb()
    decoded = rejected = 0
    for case in json.load(open("tests/golden/requests.json")):
        api, version, frame = case["api_key"], case["version"], bytes.fromhex(case["frame"])
        flexible = is_flexible(api, version)
        _, body = parse_header(frame, flexible)
        huge = [bytes.fromhex("ffffffff0f"), bytes.fromhex("f0ffffff07")] if flexible else \\
            [bytes.fromhex("7ffffff0"), bytes.fromhex("00ffffff")]
        for at in range(body, len(frame)):
            for count in huge:
                mutated = frame[:at] + count + frame[at + len(count):]
                try:
                    decode_request(api, version, mutated, body)
                    decoded += 1
                except MalformedRequest:
                    rejected += 1
    print(json.dumps({"decoded": decoded, "rejected": rejected, "grew_mb": peak_mb() - baseline_mb}))
""")


def test_huge_counts_anywhere_in_any_golden_body_never_abort_or_allocate():
    # In a child process: on kio's unchecked path this aborts in Rust, which no except can catch.
    done = subprocess.run([sys.executable, "-c", _MUTATE_EVERY_OFFSET], cwd=ROOT, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(done.stdout)
    assert result["rejected"] > 1000  # the mutations did hit counts and lengths
    assert result["grew_mb"] < 64, result  # 18k decodes of frames under 1 KiB; one 2^32 count is GiBs


# -- KIP-482: unknown tagged fields are ignored at every level -------------------------------------


class _ExtraTag:
    """While active, kio's writer puts one unknown tagged field (tag 1000, 3 bytes) in front of
    every tag buffer it writes: the top-level struct's and every nested struct's."""

    def __init__(self, monkeypatch) -> None:
        self.buffers = 0
        original = kio_serialize.write_unsigned_varint

        def write_count(buffer, value):
            self.buffers += 1
            original(buffer, value + 1)
            buffer.write(bytes.fromhex("e80703616263"))  # tag 1000 (varint e8 07), size 3, "abc"

        monkeypatch.setattr(kio_serialize, "write_unsigned_varint", write_count)


@pytest.mark.parametrize("case", golden(flexible_only=True), ids=lambda c: f"{c['api']}-v{c['version']}")
def test_unknown_tagged_fields_are_ignored_at_every_level(case, monkeypatch):
    api, version, frame = case["api_key"], case["version"], bytes.fromhex(case["frame"])
    header, offset = parse_header(frame, True)
    body = decode_request(api, version, frame, offset)
    extra = _ExtraTag(monkeypatch)
    tagged = encode_request(header, body)[4:]
    monkeypatch.undo()
    assert extra.buffers >= 1 and len(tagged) == len(frame) + 6 * extra.buffers
    tagged_header, tagged_offset = parse_header(tagged, True)
    assert decode_request(api, version, tagged, tagged_offset) == body


def test_unknown_tags_in_nested_structs_of_a_commit_are_ignored(monkeypatch):
    case = next(c for c in GOLDEN if c["api_key"] == ApiKey.OFFSET_COMMIT and c["version"] == 8)
    frame = bytes.fromhex(case["frame"])
    header, offset = parse_header(frame, True)
    body = decode_request(8, 8, frame, offset)
    extra = _ExtraTag(monkeypatch)
    tagged = encode_request(header, body)[4:]
    monkeypatch.undo()
    assert extra.buffers >= 3  # request, topic, partition
    assert decode_request(8, 8, tagged, parse_header(tagged, True)[1]) == body


# -- nulls the schema forbids ----------------------------------------------------------------------


def _nulls_where_forbidden(value, path="body") -> list[str]:
    """Paths of fields holding None although their kio type is not optional."""
    found = []
    if dataclasses.is_dataclass(value):
        hints = typing.get_type_hints(type(value))
        for f in dataclasses.fields(value):
            v, hint = getattr(value, f.name), hints[f.name]
            optional = typing.get_origin(hint) in (typing.Union, types.UnionType) and \
                type(None) in typing.get_args(hint)
            if v is None and not optional:
                found.append(f"{path}.{f.name}")
            found += _nulls_where_forbidden(v, f"{path}.{f.name}")
    elif isinstance(value, tuple):
        for i, v in enumerate(value):
            found += _nulls_where_forbidden(v, f"{path}[{i}]")
    return found


@pytest.mark.parametrize("case", golden(), ids=lambda c: f"{c['api']}-v{c['version']}-{c['client_id']}")
def test_a_null_the_schema_forbids_is_malformed_never_a_none(case):
    api, version, frame = case["api_key"], case["version"], bytes.fromhex(case["frame"])
    flexible = is_flexible(api, version)
    _, offset = parse_header(frame, flexible)
    nulls = [b"\x00"] if flexible else [b"\xff\xff", b"\xff\xff\xff\xff"]
    for at in range(offset, len(frame)):
        for null in nulls:
            mutated = frame[:at] + null + frame[at + len(null):]
            try:
                body = decode_request(api, version, mutated, offset)
            except MalformedRequest:
                continue
            assert _nulls_where_forbidden(body) == [], f"null written at byte {at}"


def test_metadata_v10_with_a_null_topic_name_answers_invalid_request():
    from groupd.coordinator.apis import metadata
    from groupd.protocol import ErrorCode
    from groupd.protocol.codec import build_request, encode_response

    body = build_request(3, 10, {"topics": [{"name": None, "topic_id": None}],
                                 "allow_auto_topic_creation": True,
                                 "include_cluster_authorized_operations": False,
                                 "include_topic_authorized_operations": False})
    request = types.SimpleNamespace(body=body, version=10)
    reply = metadata.handle(types.SimpleNamespace(), request)
    assert [t.error_code for t in reply.topics] == [ErrorCode.invalid_request]
    assert encode_response(3, 7, reply)  # v10's response has no nullable name: it must encode


def _walk_outcome(walk, frame: bytes, offset: int):
    from groupd.protocol.bounds import BadBody

    strips: list = []
    try:
        return walk(frame, offset, len(frame), strips), strips
    except BadBody as e:
        return str(e), e.null


def test_the_compiled_walk_decides_every_mutated_golden_body_as_the_step_tree_does():
    """The walk compiled for speed (one function per request version) against the plan it was
    compiled from: same end position and tag edits, or the same rejection, on every golden body cut
    short or with any byte replaced by a one-byte length, a null, a long varint or a huge count."""
    from groupd.protocol.bounds import _entity_step, _Source
    from groupd.protocol.codec import request_class

    replacements = [b"\x00", b"\x01", b"\x7f", b"\x80", b"\xff\xff", b"\xff\xff\xff\xff\x0f"]
    compared = 0
    for case in golden():
        api, version, frame = case["api_key"], case["version"], bytes.fromhex(case["frame"])
        _, body = parse_header(frame, is_flexible(api, version))
        tree = _entity_step(request_class(api, version))[0]
        compiled = _Source().compile(tree)
        frames = [frame[:cut] for cut in range(body, len(frame))]
        frames += [frame[:at] + r + frame[at + len(r):] for at in range(body, len(frame)) for r in replacements]
        for mutated in [frame, *frames]:
            assert _walk_outcome(compiled, mutated, body) == _walk_outcome(tree, mutated, body), (api, version, mutated.hex())
            compared += 1
    assert compared > 10_000


def test_a_walk_compiles_for_every_request_version_served():
    from groupd.coordinator.apis import SUPPORTED_VERSIONS
    from groupd.protocol.bounds import body_checker
    from groupd.protocol.codec import request_class

    for api, (lo, hi) in SUPPORTED_VERSIONS.items():
        for version in range(lo, hi + 1):
            check, _ = body_checker(request_class(api, version))
            assert callable(check)
