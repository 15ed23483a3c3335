"""How the operator commands print: plain tables of what they gathered."""

from __future__ import annotations

from typing import Any


def table(header: list[str], rows: list[list[Any]]) -> str:
    cells = [header] + [["-" if c is None else str(c) for c in row] for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(header))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in cells)


def _partitions(assignment: dict[str, list[int]] | None, size: int) -> str:
    if assignment is None:
        return f"({size} bytes)"
    return " ".join(f"{t}:{','.join(map(str, sorted(ps)))}" for t, ps in sorted(assignment.items())) or "-"


def _tasks(tasks: dict[str, list[int]]) -> str:
    """Task ids as Kafka Streams prints them: <subtopology>_<partition>."""
    return " ".join(f"{s}_{p}" for s, ps in sorted(tasks.items()) for p in ps) or "-"


def describe_text(d: dict) -> str:
    members = d["members"]
    plural = "s" if len(members) != 1 else ""
    if d["type"] == "consumer":
        out = [f"group {d['group']}: consumer group {d['state']}, group epoch {d['group_epoch']}, assignment "
               f"epoch {d['assignment_epoch']}, assignor {d['protocol']}, {len(members)} member{plural}"]
        if members:
            out += ["", table(["MEMBER-ID", "CLIENT-ID", "HOST", "INSTANCE-ID", "EPOCH", "ASSIGNMENT", "TARGET"],
                               [[m["member_id"], m["client_id"], m["client_host"], m["group_instance_id"],
                                 m["member_epoch"], _partitions(m["assignment"], 0),
                                 _partitions(m["target_assignment"], 0)] for m in members])]
    elif d["type"] == "share":
        out = [f"group {d['group']}: share group {d['state']}, group epoch {d['group_epoch']}, assignment "
               f"epoch {d['assignment_epoch']}, assignor {d['protocol']}, {len(members)} member{plural}"]
        if members:
            out += ["", table(["MEMBER-ID", "CLIENT-ID", "HOST", "EPOCH", "SUBSCRIBED", "ASSIGNMENT"],
                               [[m["member_id"], m["client_id"], m["client_host"], m["member_epoch"],
                                 ",".join(m["subscribed_topics"]) or "-", _partitions(m["assignment"], 0)]
                                for m in members])]
        out += ["", table(["TOPIC", "PARTITION", "START-OFFSET", "LOG-END-OFFSET", "LAG"],  # kafka-share-groups'
                          [[o["topic"], o["partition"], o["offset"], o["log_end_offset"], o["lag"]]
                           for o in d["offsets"]])
                if d["offsets"] else "no share-partitions"]
        return "\n".join(out)
    elif d["type"] == "streams":
        out = [f"group {d['group']}: streams group {d['state']}, group epoch {d['group_epoch']}, assignment "
               f"epoch {d['assignment_epoch']}, topology epoch {d['topology_epoch']} ({d['subtopologies']} "
               f"subtopologies), assignor {d['protocol']}, {len(members)} member{plural}"]
        if members:
            out += ["", table(["MEMBER-ID", "PROCESS", "CLIENT-ID", "HOST", "EPOCH", "ACTIVE", "STANDBY"],
                               [[m["member_id"], m["process_id"], m["client_id"], m["client_host"],
                                 m["member_epoch"], _tasks(m["active_tasks"]), _tasks(m["standby_tasks"])]
                                for m in members])]
    else:
        out = [f"group {d['group']}: {d['state']}, protocol type {d['protocol_type'] or '-'}, "
               f"protocol {d['protocol'] or '-'}, {len(members)} member{plural}"]
    if members and d["type"] == "classic":
        out += ["", table(["MEMBER-ID", "CLIENT-ID", "HOST", "INSTANCE-ID", "ASSIGNMENT"],
                           [[m["member_id"], m["client_id"], m["client_host"], m["group_instance_id"],
                             _partitions(m["assignment"], m["assignment_bytes"])] for m in members])]
    out += ["", table(["TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "CONSUMER-ID", "HOST",
                       "CLIENT-ID"],  # kafka-consumer-groups --describe's columns
                      [[o["topic"], o["partition"], o["offset"], o["log_end_offset"], o["lag"], o["member_id"],
                        o["client_host"], o["client_id"]]
                       for o in d["offsets"]])
            if d["offsets"] else "no committed offsets"]
    return "\n".join(out)


def reset_text(r: dict) -> str:
    rows = table(["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"],
                 [[r["group"], o["topic"], o["partition"], o["offset"]] for o in r["offsets"]])
    if not r["execute"]:
        return rows + "\n(dry run: nothing committed; add --execute to commit)"
    return rows + f"\ncommitted {len(r['offsets'])} offset{'s' if len(r['offsets']) != 1 else ''}" + (
        f" (group {r['group']} is new)" if r["created"] else "")
