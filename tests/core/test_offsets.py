"""Spec §7–§8: OffsetCommit (validation order, per-partition handling, write-then-reply) and
OffsetFetch."""

import pytest

from groupd.coordinator.core.classic.group import EMPTY, STABLE
from groupd.storage.records import OffsetCommitKey, OffsetCommitValue, Record

from .driver import E, completing_group, preparing_group, stable_group

# -- §7.3 group / member validation ------------------------------------------------------------------


def test_commit_without_generation_to_unknown_group_creates_a_simple_group(d):
    assert d.commit("standalone", [("t", 0, 42)]) == {("t", 0): E.none}
    g = d.group("standalone")
    assert (g.state, g.protocol_type, g.members) == (EMPTY, None, {})
    d.assert_replay_matches()


def test_commit_to_unknown_group_with_empty_group_id_is_accepted(d):
    assert d.commit("", [("t", 0, 1)]) == {("t", 0): E.none}


@pytest.mark.parametrize("version, error", [(9, E.group_id_not_found), (8, E.illegal_generation),
                                            (2, E.illegal_generation)])
def test_commit_with_generation_to_unknown_group_depends_on_the_version(d, version, error):
    reply = d.commit("nope", [("t", 0, 1), ("t", 1, 1)], generation=1, member_id="m", version=version)
    assert reply == {("t", 0): error, ("t", 1): error}
    assert "nope" not in d.shard.groups
    assert d.written == []


def test_commit_without_generation_to_empty_group_ignores_member_and_instance(d):
    d.commit("g", [("t", 0, 1)])
    reply = d.commit("g", [("t", 0, 2)], member_id="ghost", instance_id="ghost-instance")
    assert reply == {("t", 0): E.none}
    assert d.fetch("g")[0][2].offset == 2


def test_commit_with_unknown_instance_id_is_unknown_member_id(d):
    ids = stable_group(d, static=True)
    reply = d.commit("g", [("t", 0, 1)], generation=1, member_id=ids["a"], instance_id="x-instance")
    assert reply == {("t", 0): E.unknown_member_id}


def test_commit_with_instance_id_of_another_member_is_fenced_instance_id(d):
    ids = stable_group(d, static=True)
    reply = d.commit("g", [("t", 0, 1)], generation=1, member_id=ids["a"], instance_id="b-instance")
    assert reply == {("t", 0): E.fenced_instance_id}


def test_commit_from_unknown_member_is_unknown_member_id_before_the_generation_check(d):
    stable_group(d)
    reply = d.commit("g", [("t", 0, 1)], generation=7, member_id="stranger")
    assert reply == {("t", 0): E.unknown_member_id}


def test_commit_with_another_generation_is_illegal_generation(d):
    ids = stable_group(d)
    reply = d.commit("g", [("t", 0, 1)], generation=2, member_id=ids["a"])
    assert reply == {("t", 0): E.illegal_generation}


def test_commit_with_negative_generation_and_a_member_id_in_stable_is_illegal_generation(d):
    ids = stable_group(d)
    reply = d.commit("g", [("t", 0, 1)], generation=-1, member_id=ids["a"])
    assert reply == {("t", 0): E.illegal_generation}


def test_commit_with_generation_to_a_simple_group_is_unknown_member_id(d):
    d.commit("g", [("t", 0, 1)])
    assert d.commit("g", [("t", 0, 2)], generation=0, member_id="") == {("t", 0): E.unknown_member_id}


# -- §7.4 per-partition handling -------------------------------------------------------------------

def test_commit_writes_one_record_per_partition_with_commit_timestamp_now(d):
    ids = stable_group(d)
    d.advance(1234)
    before = len(d.written)
    d.commit("g", [("t", 0, 10, 3, "meta"), ("t", 1, 11), ("u", 0, 12, -1, None)], generation=1,
             member_id=ids["a"])
    assert d.written[before:] == [
        Record(OffsetCommitKey("g", "t", 0), OffsetCommitValue(10, 3, "meta", d.now, -1)),
        Record(OffsetCommitKey("g", "t", 1), OffsetCommitValue(11, -1, "", d.now, -1)),
        Record(OffsetCommitKey("g", "u", 0), OffsetCommitValue(12, -1, "", d.now, -1))]


def test_commit_with_explicit_retention_sets_the_expire_timestamp(d):
    d.commit("g", [("t", 0, 1)], retention_ms=86_400_000, version=2)
    assert d.written[-1].value.expire_timestamp == d.now + 86_400_000


def test_an_explicit_retention_past_int64_wraps_as_kafkas_long_sum_does(d):
    d.commit("g", [("t", 0, 1)], retention_ms=2**63 - 1, version=2)
    assert d.written[-1].value.expire_timestamp == d.now + 2**63 - 1 - 2**64


def test_commit_with_default_retention_has_no_expire_timestamp(d):
    d.commit("g", [("t", 0, 1)], retention_ms=-1, version=2)
    assert d.written[-1].value.expire_timestamp == -1


def test_metadata_of_4096_utf16_code_units_is_accepted_even_when_longer_in_utf8(d):
    metadata = "é" * 4096  # 8192 UTF-8 bytes
    assert d.commit("g", [("t", 0, 1, -1, metadata)]) == {("t", 0): E.none}
    assert d.fetch("g")[0][2].metadata == metadata


def test_metadata_longer_than_4096_utf16_code_units_is_too_large_for_that_partition_only(d):
    metadata = "😀" * 2049  # 2049 characters, 4098 UTF-16 code units
    reply = d.commit("g", [("t", 0, 1, -1, metadata), ("t", 1, 1, -1, "ok")])
    assert reply == {("t", 0): E.offset_metadata_too_large, ("t", 1): E.none}
    assert [(k.topic, k.partition) for k in (r.key for r in d.written) if isinstance(k, OffsetCommitKey)] == [("t", 1)]


def test_commit_with_only_too_large_metadata_writes_nothing(d):
    d.commit("g", [("t", 0, 1)])
    written = len(d.written)
    reply = d.commit("g", [("t", 0, 2, -1, "x" * 4097)])
    assert reply == {("t", 0): E.offset_metadata_too_large}
    assert len(d.written) == written


def test_commit_reply_waits_for_the_write_and_the_offset_is_then_visible(d):
    d.commit("g", [("t", 0, 1)])
    d.hold_writes()
    assert d.commit("g", [("t", 0, 2)]) is None
    assert d.fetch("g")[0][2].offset == 1
    d.finish_writes()
    assert d.answers[-1][1] == {("t", 0): E.none}
    assert d.fetch("g")[0][2].offset == 2


def test_failed_commit_write_gives_every_accepted_partition_the_error(d):
    d.commit("g", [("t", 0, 1)])
    d.fail_next_write(E.not_coordinator)
    reply = d.commit("g", [("t", 0, 2), ("t", 1, 2, -1, "x" * 4097)])
    assert reply == {("t", 0): E.not_coordinator, ("t", 1): E.offset_metadata_too_large}
    assert d.fetch("g")[0][2].offset == 1


def test_failed_first_commit_does_not_leave_a_simple_group_behind(d):
    d.fail_next_write(E.coordinator_not_available)
    d.commit("g", [("t", 0, 1)])
    assert "g" not in d.shard.groups


# -- §8 OffsetFetch --------------------------------------------------------------------------------

def test_fetch_of_partitions_without_commits_answers_nothing_committed(d):
    d.commit("g", [("t", 0, 5)])
    assert d.fetch("g", [("t", [0, 1]), ("u", [0])]) == [
        ("t", 0, d.shard.offsets["g"][("t", 0)]), ("t", 1, None), ("u", 0, None)]


def test_fetch_of_unknown_group_is_not_an_error(d):
    assert d.fetch("nope", [("t", [0])]) == [("t", 0, None)]
    assert d.fetch("nope") == []


def test_fetch_of_all_partitions_returns_every_committed_offset(d):
    d.commit("g", [("t", 0, 5), ("t", 1, 6), ("u", 3, 7)])
    assert sorted((t, p, v.offset) for t, p, v in d.fetch("g")) == [("t", 0, 5), ("t", 1, 6), ("u", 3, 7)]


def test_fetch_returns_epoch_metadata_and_timestamps_as_committed(d):
    d.commit("g", [("t", 0, 5, 9, "m")], retention_ms=1000, version=2)
    [(_, _, value)] = d.fetch("g", [("t", [0])])
    assert value == OffsetCommitValue(5, 9, "m", d.now, d.now + 1000)


def test_offsets_of_one_group_are_not_visible_to_another(d):
    d.commit("g", [("t", 0, 5)])
    assert d.fetch("h", [("t", [0])]) == [("t", 0, None)]


def test_commit_in_preparing_and_stable_survive_replay(d):
    ids = preparing_group(d)
    d.commit("g", [("t", 0, 5)], generation=1, member_id=ids["b"])
    d.join("g", ids["b"], ticket="rejoin-b", client_id="b")
    d.sync("g", ids["a"], 2, ticket="sync-a-2", assignments={})
    assert d.group().state is STABLE
    d.commit("g", [("t", 1, 6)], generation=2, member_id=ids["a"])
    d.assert_replay_matches()


def test_commit_in_completing_rebalance_writes_nothing(d):
    ids = completing_group(d)
    written = len(d.written)
    d.commit("g", [("t", 0, 5)], generation=1, member_id=ids["a"])
    assert len(d.written) == written
