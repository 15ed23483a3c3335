"""The supervisor's scrape: every worker's exposition merged into one. A series the workers share
(same name and labels) is summed: counters, histogram buckets and counts, and gauges of state that
each worker holds a disjoint part of (groups, members, connections); a few are the largest of the
workers' values (LARGEST). The process's own series
(`process_*`, `python_*`) describe one process each and get a `worker` label instead."""

from __future__ import annotations

from .prometheus import content_type, floatToGoString

CONTENT_TYPE = content_type()
PER_PROCESS = ("process_", "python_")
# what several workers may report for the same series, where the largest is the answer: a partition's
# log end (its leader's and the others' copy of it), the largest lag of any group
LARGEST = {"groupd_partition_latest_offset", "groupd_consumergroups_max_lag"}


def merge(expositions: list[tuple[int, str]]) -> bytes:
    """[(worker index, text exposition)] → one exposition, families in first-seen order."""
    headers: dict[str, list[str]] = {}  # family → its # HELP / # TYPE lines
    samples: dict[str, dict[str, float]] = {}  # family → series (name{labels}) → value
    for worker, text in expositions:
        family = ""
        for line in text.splitlines():
            if line.startswith("# "):
                parts = line.split(" ", 3)
                if len(parts) >= 3 and parts[1] in ("HELP", "TYPE"):
                    family = parts[2]
                    lines = headers.setdefault(family, [])
                    if len(lines) < 2 and line not in lines:
                        lines.append(line)
                    samples.setdefault(family, {})
                continue
            if not line:
                continue
            series, _, value = line.rpartition(" ")
            if family.startswith(PER_PROCESS):
                series = _labelled(series, f'worker="{worker}"')
            values = samples.setdefault(family, {})
            if family in LARGEST:
                values[series] = max(values.get(series, float(value)), float(value))
            else:
                values[series] = values.get(series, 0.0) + float(value)
    out = []
    for family, lines in headers.items():
        out.extend(lines)
        out.extend(f"{series} {floatToGoString(value)}" for series, value in samples[family].items())
    return ("\n".join(out) + "\n").encode()


def _labelled(series: str, label: str) -> str:
    name, brace, rest = series.partition("{")
    if not brace:
        return f"{name}{{{label}}}"
    return f"{name}{{{label},{rest}" if rest != "}" else f"{name}{{{label}}}"
