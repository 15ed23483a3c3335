"""The plan of `groupd offsets reset`, as kafka-consumer-groups --reset-offsets makes it: which
partitions (`--topic T[:P,...]`, `--all-topics`, or a CSV file) get which new offset. Plain data
in, plain data out: the log offsets it needs are looked up by the caller (admin.py)."""

from __future__ import annotations

import csv
import dataclasses
import io
import re
from collections.abc import Callable, Iterable, Mapping
from datetime import datetime, timedelta

Partition = tuple[str, int]  # (topic, partition)


class PlanError(ValueError):
    """The plan cannot be made; the message is for the operator."""


@dataclasses.dataclass(frozen=True, slots=True)
class Scope:
    """`--topic` arguments: whole topics (every partition) and listed partitions."""

    topics: tuple[str, ...]
    partitions: tuple[Partition, ...]


def parse_topics(args: Iterable[str]) -> Scope:
    """`T` (every partition of T) or `T:P,P,...`, as Kafka's tool reads `--topic`."""
    topics, partitions = [], []
    for arg in args:
        if ":" not in arg:
            topics.append(arg)
            continue
        topic, _, listed = arg.partition(":")
        if not topic or ":" in listed:
            raise PlanError(f"invalid topic argument {arg!r}: expected TOPIC or TOPIC:PARTITION,...")
        for p in listed.split(","):
            if not p.strip().isdigit():
                raise PlanError(f"invalid partition {p!r} in topic argument {arg!r}")
            partitions.append((topic, int(p)))
    return Scope(tuple(dict.fromkeys(topics)), tuple(dict.fromkeys(partitions)))


def parse_datetime(text: str) -> int:
    """ISO 8601 (`2026-11-23T08:00:00`, `...T08:00:00.250Z`, `...+01:00`) → epoch ms; without a zone
    it is local time, as Kafka's tool reads it."""
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise PlanError(f"--to-datetime {text!r} is not an ISO 8601 date-time (YYYY-MM-DDTHH:mm:SS.sss[±HH:MM|Z])") from None
    return int(moment.timestamp() * 1000)


_DURATION = re.compile(r"([-+]?)P(?:([-+]?\d+)D)?(?:T(?:([-+]?\d+)H)?(?:([-+]?\d+)M)?(?:([-+]?\d+(?:[.,]\d+)?)S)?)?",
                       re.IGNORECASE)


def parse_duration(text: str) -> timedelta:
    """Java's Duration.parse subset Kafka's tool documents: `PnDTnHnMn.nS` (`P1D`, `PT30M`, `PT1.5S`)."""
    m = _DURATION.fullmatch(text.strip())
    if m is None or not any(m.groups()[1:]) or text.upper().endswith("T"):
        raise PlanError(f"--by-duration {text!r} is not an ISO 8601 duration (PnDTnHnMnS, e.g. P1DT2H or PT30M)")
    sign, days, hours, minutes, seconds = m.groups()
    d = timedelta(days=int(days or 0), hours=int(hours or 0), minutes=int(minutes or 0),
                  seconds=float((seconds or "0").replace(",", ".")))
    return -d if sign == "-" else d


def read_csv(text: str, group: str) -> dict[Partition, int]:
    """A plan file: `topic,partition,offset` lines (what `--export` prints), or Kafka's several-group
    form `group,topic,partition,offset` (only `group`'s lines are used)."""
    plan: dict[Partition, int] = {}
    for n, row in enumerate(csv.reader(io.StringIO(text)), 1):
        if not row or not "".join(row).strip():
            continue
        if len(row) == 4:
            if row[0] != group:
                continue
            row = row[1:]
        if len(row) != 3 or not row[1].strip().isdigit() or not row[2].strip().lstrip("-").isdigit():
            raise PlanError(f"line {n} of the plan file is not topic,partition,offset: {','.join(row)!r}")
        plan[(row[0], int(row[1]))] = int(row[2])
    if not plan:
        raise PlanError(f"the plan file has no offsets for group {group!r}")
    return plan


def to_csv(plan: Mapping[Partition, int]) -> str:
    out = io.StringIO()
    csv.writer(out, lineterminator="\n").writerows([t, p, o] for (t, p), o in sorted(plan.items()))
    return out.getvalue()


def clamp(requested: Mapping[Partition, int], earliest: Mapping[Partition, int], latest: Mapping[Partition, int],
          warn: Callable[[str], None]) -> dict[Partition, int]:
    """Each offset within [earliest, latest] of its partition, with Kafka's warning when moved."""
    out = {}
    for tp, offset in requested.items():
        name = f"{tp[0]}-{tp[1]}"
        if offset > latest[tp]:
            warn(f"New offset ({offset}) is higher than latest offset for topic partition {name}. "
                 f"Value will be set to {latest[tp]}")
            offset = latest[tp]
        elif offset < earliest[tp]:
            warn(f"New offset ({offset}) is lower than earliest offset for topic partition {name}. "
                 f"Value will be set to {earliest[tp]}")
            offset = earliest[tp]
        out[tp] = offset
    return out
