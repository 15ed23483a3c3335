"""The plan of `groupd offsets reset` (coordinator/tools/offset_reset.py): scopes, times, plan files and
the clamp to [earliest, latest], as kafka-consumer-groups --reset-offsets reads and makes them."""

from datetime import datetime, timedelta, timezone

import pytest

from groupd.coordinator.tools.offset_reset import (
    PlanError,
    Scope,
    clamp,
    parse_datetime,
    parse_duration,
    parse_topics,
    read_csv,
    to_csv,
)


def test_a_topic_argument_is_a_whole_topic_or_listed_partitions():
    assert parse_topics(["a", "b:0,2", "c:1", "a", "b:2"]) == Scope(("a",), (("b", 0), ("b", 2), ("c", 1)))


@pytest.mark.parametrize("arg", ["t:", "t:x", "t:1,", ":1", "t:1:2", "t:-1"])
def test_a_bad_topic_argument_is_refused_by_name(arg):
    with pytest.raises(PlanError, match="invalid (topic argument|partition)"):
        parse_topics([arg])


def test_datetime_with_a_zone_is_that_instant_and_without_one_local_time():
    assert parse_datetime("2026-11-23T08:00:00.250Z") == int(
        datetime(2026, 11, 23, 8, 0, 0, 250000, tzinfo=timezone.utc).timestamp() * 1000)
    assert parse_datetime("2026-11-23T09:00:00+01:00") == parse_datetime("2026-11-23T08:00:00Z")
    assert parse_datetime("2026-11-23T08:00:00") == int(datetime(2026, 11, 23, 8).timestamp() * 1000)
    with pytest.raises(PlanError, match="--to-datetime 'yesterday' is not an ISO 8601 date-time"):
        parse_datetime("yesterday")


@pytest.mark.parametrize("text, expected", [
    ("P1D", timedelta(days=1)), ("PT30M", timedelta(minutes=30)), ("P1DT2H3M4S", timedelta(days=1, hours=2, minutes=3, seconds=4)),
    ("PT1.5S", timedelta(seconds=1.5)), ("pt2h", timedelta(hours=2)), ("-PT1H", timedelta(hours=-1)),
])
def test_duration_is_javas_iso_8601_form(text, expected):
    assert parse_duration(text) == expected


@pytest.mark.parametrize("text", ["P", "PT", "1H", "P1H", "PT1D", "P1DT", "two hours"])
def test_a_bad_duration_is_refused(text):
    with pytest.raises(PlanError, match="is not an ISO 8601 duration"):
        parse_duration(text)


def test_export_is_read_back_by_from_file():
    plan = {("t", 1): 7, ("t", 0): 5, ("u", 3): 0}
    text = to_csv(plan)
    assert text == "t,0,5\nt,1,7\nu,3,0\n"
    assert read_csv(text, "g") == plan


def test_a_plan_file_with_groups_gives_the_lines_of_the_group_asked_for():
    assert read_csv("g,t,0,5\nh,t,0,9\ng,t,1,6\n", "g") == {("t", 0): 5, ("t", 1): 6}
    with pytest.raises(PlanError, match="no offsets for group 'x'"):
        read_csv("g,t,0,5\n", "x")
    with pytest.raises(PlanError, match="line 2 of the plan file is not topic,partition,offset"):
        read_csv("t,0,5\nt,zero,5\n", "g")


def test_clamp_keeps_offsets_within_the_log_with_kafkas_warning():
    warnings = []
    earliest, latest = {("t", 0): 3, ("t", 1): 3, ("t", 2): 3}, {("t", 0): 10, ("t", 1): 10, ("t", 2): 10}
    assert clamp({("t", 0): 12, ("t", 1): 1, ("t", 2): 5}, earliest, latest, warnings.append) == {
        ("t", 0): 10, ("t", 1): 3, ("t", 2): 5}
    assert warnings == [
        "New offset (12) is higher than latest offset for topic partition t-0. Value will be set to 10",
        "New offset (1) is lower than earliest offset for topic partition t-1. Value will be set to 3"]
