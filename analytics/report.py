"""`groupd analytics report`: one self-contained HTML page (inline SVG, no script, no external
file) from the five Parquet tables of `groupd analytics run`: the rebalance timeline of each
group (generations of classic groups, epochs of consumer groups), its commit rate, and the status
of each partition with a committed offset.

Reads the tables with pyarrow only (no Spark). The commit rate is counted again here from the
`commits` table, in buckets that fit the span of the data (`rate_bucket_ms`: 100 ms for a short
run, up to a week for a long history), rather than from `commit_rates`' fixed minutes, which draw a
run of a minute as one block. Every mark carries its value in `data-*` attributes (times in epoch
milliseconds), so what is drawn can be checked against the tables.
"""

from __future__ import annotations

import datetime
import html
import os
from collections import defaultdict

from . import TABLES

WIDTH = 960          # drawing width of every chart, px
LABEL = 170          # left margin for group names
LANE = 26            # height of one group's timeline lane
RATE_HEIGHT = 90     # height of one group's commit-rate chart
STATUS_COLOURS = {"OK": "#2e7d32", "STALLED": "#f9a825", "STOPPED": "#c62828", "REWIND": "#6a1b9a",
                  "LAGGING": "#ef6c00"}
# commit-rate bucket sizes, ms; the smallest that draws the span in at most MAX_BUCKETS bars
BUCKETS_MS = (100, 200, 500, 1_000, 2_000, 5_000, 10_000, 15_000, 30_000, 60_000, 120_000, 300_000, 600_000, 900_000,
              1_800_000, 3_600_000, 7_200_000, 21_600_000, 43_200_000, 86_400_000, 604_800_000)
MAX_BUCKETS = 120
GENERATION_COLOURS = ("#1565c0", "#42a5f5")  # alternate, so neighbouring generations stand apart


def rate_bucket_ms(span_ms: int) -> int:
    """The commit-rate bucket for data spanning `span_ms`: at most MAX_BUCKETS bars."""
    return next((b for b in BUCKETS_MS if span_ms / b <= MAX_BUCKETS), BUCKETS_MS[-1])


def load(tables_dir: str) -> dict[str, list[dict]]:
    """Each table as a list of rows (dicts), read from `tables_dir/<table>`; `commits` (one row
    per commit, millions on a busy log) only as its count and time range per group:
    {group, commits, first, last}, and counted per group and rate bucket in `rates`:
    {group, start (epoch ms), commits, partitions}, with the bucket size in `bucket_ms`."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    missing = [t for t in TABLES if not os.path.isdir(os.path.join(tables_dir, t))]
    if missing:
        raise FileNotFoundError(f"{tables_dir}: no table {', '.join(missing)} (written by `groupd analytics run`)")
    out = {t: pq.read_table(os.path.join(tables_dir, t)).to_pylist() for t in TABLES if t != "commits"}
    commits = pq.read_table(os.path.join(tables_dir, "commits"), columns=["group", "topic", "partition", "timestamp"])
    ts = commits["timestamp"]
    ms = pc.cast(pc.cast(ts, pa.timestamp("ms", tz=ts.type.tz), safe=False), pa.int64())
    per_group = (pa.table({"group": commits["group"], "ms": ms})
                 .group_by("group").aggregate([("ms", "count"), ("ms", "min"), ("ms", "max")]))
    out["commits"] = [{"group": r["group"], "commits": r["ms_count"], "first": r["ms_min"], "last": r["ms_max"]}
                      for r in per_group.to_pylist()]
    span = (pc.max(ms).as_py() - pc.min(ms).as_py()) if len(ms) else 0
    bucket = out["bucket_ms"] = rate_bucket_ms(span)
    where = pc.binary_join_element_wise(commits["topic"], pc.cast(commits["partition"], pa.string()), "/")
    start = pc.multiply(pc.divide(ms, bucket), bucket)  # integer division: the bucket's start
    rates = (pa.table({"group": commits["group"], "start": start, "where": where})
             .group_by(["group", "start"]).aggregate([("where", "count"), ("where", "count_distinct")]))
    out["rates"] = [{"group": r["group"], "start": r["start"], "commits": r["where_count"],
                     "partitions": r["where_count_distinct"]} for r in rates.to_pylist()]
    return out


def _ms(moment: datetime.datetime | int | None) -> int | None:
    if moment is None or isinstance(moment, int):
        return moment
    return int(moment.timestamp() * 1000)


def duration(ms: int | None) -> str:
    """A duration as people read it: 850 ms, 4.2 s, 3 min 5 s, 2 h 10 min, 3 d 4 h."""
    if ms is None:
        return ""
    if ms < 1000:
        return f"{ms} ms"
    if ms < 60_000:
        return f"{ms / 1000:.1f} s"
    seconds = ms // 1000
    for unit, size, sub, sub_size in (("d", 86_400, "h", 3600), ("h", 3600, "min", 60), ("min", 60, "s", 1)):
        if seconds >= size:
            rest = (seconds % size) // sub_size
            return f"{seconds // size} {unit}" + (f" {rest} {sub}" if rest else "")
    return f"{seconds} s"  # not reached


def _time(ms: int) -> str:
    return datetime.datetime.fromtimestamp(ms / 1000, datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S")


def _e(value) -> str:
    return html.escape(str(value), quote=True)


class _Scale:
    """Epoch milliseconds → x in px over [LABEL, WIDTH - 10]."""

    def __init__(self, start: int, end: int) -> None:
        self.start, self.span = start, max(end - start, 1)

    def __call__(self, ms: int) -> float:
        return round(LABEL + (ms - self.start) / self.span * (WIDTH - 10 - LABEL), 2)


def _axis(scale: _Scale, y: int) -> str:
    ticks = []
    for i, anchor in enumerate(("start", "middle", "middle", "middle", "end")):
        ms = scale.start + scale.span * i // 4
        x = scale(ms)
        label = _time(ms)[11:] if scale.span >= 10_000 else _time(ms)[11:] + f".{ms % 1000:03d}"
        ticks.append(f'<line x1="{x}" y1="{y}" x2="{x}" y2="{y + 4}" stroke="#555"/>'
                     f'<text x="{x}" y="{y + 16}" font-size="10" text-anchor="{anchor}">{label}</text>')
    return f'<line x1="{LABEL}" y1="{y}" x2="{WIDTH - 10}" y2="{y}" stroke="#555"/>' + "".join(ticks)


def timeline(generations: list[dict], end_ms: int) -> str:
    """One lane per group; one bar per generation from its start to its end (or `end_ms` while
    current); a group's deletion is a red mark."""
    if not generations:
        return "<p>No generation reached the log.</p>"
    by_group: dict[str, list[dict]] = defaultdict(list)
    for g in generations:
        by_group[g["group"]].append(g)
    start = min(_ms(g["started_at"]) for g in generations)
    scale = _Scale(start, end_ms)
    parts = []
    for lane, group in enumerate(sorted(by_group)):
        y = 10 + lane * LANE
        parts.append(f'<text x="{LABEL - 8}" y="{y + 15}" font-size="12" text-anchor="end">{_e(group)}</text>')
        rows = sorted(by_group[group], key=lambda g: (g["incarnation"], g["generation"]))
        for i, g in enumerate(rows):
            s, e = _ms(g["started_at"]), _ms(g["ended_at"]) or end_ms
            x0, x1 = scale(s), scale(e)
            kind = "epoch" if g.get("group_type") == "consumer" else "generation"
            title = (f"{group} {kind} {g['generation']}: {g['member_count']} members, "
                     f"{_time(s)} to {_time(e)}" + (f" ({g['ended_by']})" if g["ended_by"] else " (current)"))
            parts.append(f'<rect class="generation" data-group="{_e(group)}" data-generation="{g["generation"]}" '
                         f'data-type="{_e(g.get("group_type") or "classic")}" data-incarnation="{g["incarnation"]}" '
                         f'data-start="{s}" data-end="{e}" '
                         f'data-members="{g["member_count"]}" x="{x0}" y="{y + 3}" width="{max(x1 - x0, 2)}" '
                         f'height="{LANE - 8}" fill="{GENERATION_COLOURS[i % 2]}" stroke="#fff">'
                         f'<title>{_e(title)}</title></rect>')
            if x1 - x0 > 18:
                parts.append(f'<text x="{x0 + 3}" y="{y + 16}" font-size="10" fill="#fff">'
                             f'{g["generation"]}·{g["member_count"]}</text>')
            if g["ended_by"] == "deleted":
                parts.append(f'<rect class="deletion" data-group="{_e(group)}" data-at="{e}" x="{x1 - 1}" '
                             f'y="{y}" width="3" height="{LANE - 2}" fill="#c62828"><title>deleted at '
                             f'{_time(e)}</title></rect>')
    height = 10 + len(by_group) * LANE
    return (f'<svg class="chart" id="timeline" width="{WIDTH}" height="{height + 24}" '
            f'xmlns="http://www.w3.org/2000/svg">{"".join(parts)}{_axis(scale, height + 2)}</svg>')


def commit_rate_chart(group: str, rates: list[dict], bucket: int, scale: _Scale) -> str:
    """Commits of one group per `bucket` ms, one bar per bucket with commits, on the time scale
    every group's chart shares."""
    top = max(r["commits"] for r in rates)
    unit = (RATE_HEIGHT - 20) / top  # px per commit
    parts = [f'<text x="{LABEL - 8}" y="{RATE_HEIGHT / 2}" font-size="12" text-anchor="end">{_e(group)}</text>',
             f'<text x="{LABEL - 8}" y="14" font-size="10" text-anchor="end">{top} per {duration(bucket)}</text>']
    base = RATE_HEIGHT - 4
    for r in sorted(rates, key=lambda r: r["start"]):
        m = r["start"]
        x0, x1 = scale(m), scale(m + bucket)
        h = round(r["commits"] * unit, 3)
        parts.append(f'<rect class="rate" data-group="{_e(group)}" data-start="{m}" data-bucket-ms="{bucket}" '
                     f'data-commits="{r["commits"]}" data-partitions="{r["partitions"]}" x="{x0}" '
                     f'y="{round(base - h, 3)}" width="{max(x1 - x0 - 1, 1)}" height="{h}" fill="#00838f">'
                     f'<title>{_time(m)} + {duration(bucket)}: {r["commits"]} commits, {r["partitions"]} '
                     f'partitions</title></rect>')
    return (f'<svg class="chart rates" width="{WIDTH}" height="{RATE_HEIGHT + 20}" '
            f'xmlns="http://www.w3.org/2000/svg">{"".join(parts)}{_axis(scale, base)}</svg>')


def rate_charts(rates: list[dict], bucket: int) -> str:
    if not rates:
        return "<p>No commits.</p>"
    by_group: dict[str, list[dict]] = defaultdict(list)
    for r in rates:
        by_group[r["group"]].append(r)
    scale = _Scale(min(r["start"] for r in rates), max(r["start"] for r in rates) + bucket)
    return "".join(commit_rate_chart(g, by_group[g], bucket, scale) for g in sorted(by_group))


def status_table(status: list[dict]) -> str:
    if not status:
        return "<p>No partition has a committed offset.</p>"
    counts: dict[str, int] = defaultdict(int)
    for r in status:
        counts[r["status"]] += 1
    summary = " ".join(f'<span class="badge" style="background:{STATUS_COLOURS.get(s, "#555")}">{_e(s)} {n}</span>'
                       for s, n in sorted(counts.items()))
    rows = []
    for r in sorted(status, key=lambda r: (r["group"], r["topic"], r["partition"])):
        colour = STATUS_COLOURS.get(r["status"], "#555")
        lag, end = r.get("lag"), r.get("log_end")
        rows.append(f'<tr><td>{_e(r["group"])}</td><td>{_e(r["topic"])}</td><td>{r["partition"]}</td>'
                    f'<td class="status" data-group="{_e(r["group"])}" data-topic="{_e(r["topic"])}" '
                    f'data-partition="{r["partition"]}" data-status="{_e(r["status"])}" '
                    f'data-lag="{"" if lag is None else lag}" data-idle-ms="{r["idle_ms"]}" '
                    f'style="background:{colour}">{_e(r["status"])}</td><td>{r["committed_offset"]}</td>'
                    f'<td>{"" if end is None else f"{end:,}"}</td>'
                    f'<td class="lag">{"" if lag is None else f"{lag:,}"}</td>'
                    f'<td>{r["offset_advance"]}</td><td>{r["window_commits"]}</td>'
                    f'<td class="idle">{duration(r["idle_ms"])}</td></tr>')
    return (f"<p>{summary}</p><table><tr><th>group</th><th>topic</th><th>partition</th><th>status</th>"
            "<th>committed offset</th><th>log end</th><th>lag</th><th>advance over the window</th>"
            f"<th>commits in the window</th><th>idle</th></tr>{''.join(rows)}</table>")


STYLE = """
body { font-family: sans-serif; margin: 24px; color: #222; }
h1 { font-size: 22px; } h2 { font-size: 17px; margin-top: 28px; border-bottom: 1px solid #ccc; }
table { border-collapse: collapse; font-size: 12px; }
td, th { border: 1px solid #ddd; padding: 3px 8px; text-align: left; }
td.status { color: #fff; font-weight: bold; }
.badge { color: #fff; padding: 2px 8px; border-radius: 4px; font-size: 12px; margin-right: 6px; }
.chart { display: block; margin: 6px 0; }
.note { color: #666; font-size: 12px; }
"""


def render(tables: dict[str, list[dict]]) -> str:
    """The report's HTML from the tables (as `load` returns them)."""
    commits, gens = tables["commits"], tables["generations"]
    times = [_ms(r[k]) for r in commits for k in ("first", "last")] + [_ms(g["last_update"]) for g in gens]
    times += [_ms(g["ended_at"]) for g in gens if g["ended_at"] is not None]
    end = max(times) if times else 0
    groups = sorted({r["group"] for t in ("commits", "generations", "latest_offsets") for r in tables[t]})
    bucket = tables["bucket_ms"]
    latest: dict[str, int] = defaultdict(int)
    for r in tables["latest_offsets"]:
        latest[r["group"]] += 1
    generations: dict[str, int] = defaultdict(int)
    for g in gens:
        generations[g["group"]] += 1
    committed = {r["group"]: r["commits"] for r in commits}
    span = f"{_time(min(times))} to {_time(end)} UTC" if times else "no records"
    overview = "".join(f"<tr><td>{_e(g)}</td><td>{committed.get(g, 0)}</td><td>{generations[g]}</td>"
                       f"<td>{latest[g]}</td></tr>" for g in groups)
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>groupd offsets log report</title>
<style>{STYLE}</style></head><body>
<h1>groupd offsets log report</h1>
<p>{len(groups)} groups, {sum(committed.values())} commits, {len(gens)} generations; {span}.</p>
<table><tr><th>group</th><th>commits</th><th>generations / epochs</th><th>committed partitions now</th></tr>
{overview}</table>
<h2>Rebalance timeline</h2>
<p class="note">One bar per generation of a classic group or epoch of a consumer group (label:
generation·members), from its start to the next one; red: the group was deleted.</p>
{timeline(gens, end)}
<h2>Commit rate</h2>
<p class="note">Offset commits per {duration(bucket)} (a bar per {duration(bucket)} with commits), on one
time scale for every group.</p>
{rate_charts(tables["rates"], bucket)}
<h2>Partition status</h2>
<p class="note">Burrow's rules over each partition's last commits and, when the run was given log-end
offsets (<code>--log-ends</code>), its lag (see docs/analytics.md).</p>
{status_table(tables["partition_status"])}
</body></html>
"""


def write(tables_dir: str, out: str) -> dict[str, int]:
    """Render the report of `tables_dir` to `out`; returns what it shows: groups, generations,
    commit-rate minutes and partitions."""
    tables = load(tables_dir)
    page = render(tables)
    tmp = out + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(page)
    os.replace(tmp, out)
    return {"groups": len({r["group"] for t in ("commits", "generations", "latest_offsets") for r in tables[t]}),
            "generations": len(tables["generations"]), "commit-rate bars": len(tables["rates"]),
            "partitions": len(tables["partition_status"])}
