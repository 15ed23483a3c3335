"""The differential machinery: run one scenario against a server, normalise its answers, compare two runs.

A scenario (corpus.py) is a function of a `Side`: it opens named connections, sends requests built from
plain values (the same on both servers, except ids the server handed out, taken from its own earlier
answers) and records each answer under a label. `normalise` turns a kio response into plain data and
replaces what legitimately differs between two servers by what it means:

- member ids → `<prefix>#n`, numbered in order of first appearance in the scenario (so "the same member"
  and "a new member" still compare; the prefix is the client id Kafka puts before the UUID);
- producer ids ≥ 0 → `PID#n`, numbered in order of first appearance (each server hands out its own);
- node ids ≥ 0 → `NODE`, host and port of a broker → `HOST`/`PORT`, cluster ids → `CLUSTER`;
- topic ids → the topic's name (each server gives its own UUIDs);
- throttle times are dropped; error messages compare as present/absent (their text is free-form);
- ListGroups entries of other scenarios' groups are dropped (the servers live longer than a scenario).

`compare` lists every difference as `label path: kafka=… groupd=…`.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import datetime
import enum
import os
import re
import traceback
import uuid
from collections import Counter
from collections.abc import Callable, Mapping
from typing import Any

from groupd.protocol.apis import ApiKey
from tests.support.process import WireClient

MEMBER_FIELDS = {"member_id", "leader", "leader_id_member"}
NODE_FIELDS = {"node_id", "controller_id", "coordinator_id"}
DROPPED = {"throttle_time", "throttle_time_ms"}
_UUID_SUFFIX = re.compile(r"^(.*?)-?[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")


class Side:
    """One server's run of a scenario: its named connections and the answers recorded so far."""

    def __init__(self, name: str, bootstrap: str, scenario: str, topic_ids: Mapping[uuid.UUID, str]) -> None:
        self.name = name  # "kafka" or "groupd"
        self.bootstrap = bootstrap
        self.scenario = scenario
        self.topic_ids = dict(topic_ids)
        self.topic_by_name = {v: k for k, v in topic_ids.items()}
        self.steps: list[tuple[str, Any]] = []
        self._clients: dict[str, WireClient] = {}
        self._members: dict[str, str] = {}
        self._producers: dict[int, str] = {}

    def group(self, name: str = "g") -> str:
        """A group id of this scenario (the same on both servers)."""
        return f"{self.scenario}-{name}"

    def client(self, name: str = "c") -> WireClient:
        if name not in self._clients:
            self._clients[name] = WireClient(self.bootstrap, client_id=name, timeout=60)
        return self._clients[name]

    def call(self, label: str, api: ApiKey, version: int, values: Mapping[str, Any], client: str = "c") -> Any:
        """Send a request on connection `client`, wait for its answer, record it under `label`."""
        return self.send(label, api, version, values, client).result()

    def send(self, label: str, api: ApiKey, version: int, values: Mapping[str, Any], client: str = "c") -> Pending:
        """Send without waiting (JoinGroup parks until the join phase completes): `.result()` records it."""
        c = self.client(client)
        cid, data = c.frame(api, version, values)
        c.send_raw(data)
        return Pending(self, label, c, api, version, cid)

    def record(self, label: str, value: Any) -> None:
        self.steps.append((label, value))

    def close(self) -> None:
        for c in self._clients.values():
            c.close()
        self._clients.clear()

    # -- normalisation ----------------------------------------------------------------------------

    def member(self, mid: str) -> str:
        if mid not in self._members:
            m = _UUID_SUFFIX.match(mid)
            prefix = m.group(1) if m else "?"
            self._members[mid] = f"{prefix}#{len(self._members) + 1}"
        return self._members[mid]

    def normalise(self, value: Any, field: str = "") -> Any:
        if dataclasses.is_dataclass(value):
            out = {}
            for f in dataclasses.fields(value):
                if f.name in DROPPED:
                    continue
                out[f.name] = self.normalise(getattr(value, f.name), f.name)
            name = type(value).__name__
            if name.startswith("ListGroupsResponse"):
                out["groups"] = [g for g in out["groups"] if g["group_id"].startswith(self.scenario + "-")]
            # the order of a batch's answers is Kafka's grouping by offsets partition, not a contract
            for key, by in (("groups", "group_id"), ("results", "group_id"), ("members", "member_id"),
                            ("topics", "name"), ("partitions", "partition_index"), ("topic_partitions", "topic_id"),
                            ("configs", "name")):
                if isinstance(out.get(key), list) and all(isinstance(e, dict) and by in e for e in out[key]):
                    out[key] = sorted(out[key], key=lambda e: str(e[by]))
            return out
        if isinstance(value, dict):
            return {k: self.normalise(v, k) for k, v in value.items()}
        if isinstance(value, (tuple, list)):
            return [self.normalise(v, field) for v in value]
        if isinstance(value, enum.Enum):
            return value.name
        if isinstance(value, datetime.timedelta):
            return int(value.total_seconds() * 1000)
        if isinstance(value, datetime.datetime):
            return "TIMESTAMP"
        if isinstance(value, uuid.UUID):
            return self.topic_ids.get(value, "UUID" if value.int else "ZERO_UUID") if field == "topic_id" else "UUID"
        if field in MEMBER_FIELDS and isinstance(value, str) and value:
            return self.member(value)
        if field == "producer_id" and isinstance(value, int) and value >= 0:
            return self._producers.setdefault(value, f"PID#{len(self._producers) + 1}")
        if field in NODE_FIELDS and isinstance(value, int) and value >= 0:
            return "NODE"
        if field == "host" and value:
            return "HOST"
        if field == "port" and isinstance(value, int) and value >= 0:
            return "PORT"
        if field == "cluster_id" and value:
            return "CLUSTER"
        if field == "error_message":
            return (value if os.environ.get("DIFFERENTIAL_MESSAGES") else "<message>") if value else value
        if isinstance(value, bytes):
            return value.hex()
        return value


class ScenarioAborted(Exception):
    """A scenario cannot go on on this server (a connection closed); the rest of its steps are missing."""


def run(scenario: Scenario, side: Side) -> Side:
    """Run `scenario` on `side`; a failure ends it with an `aborted` step saying why."""
    try:
        scenario(side)
    except ScenarioAborted:
        pass
    except Exception as e:  # noqa: BLE001 - recorded and compared: the other server may not fail
        side.record("aborted", f"{type(e).__name__}: {e}")
        if os.environ.get("DIFFERENTIAL_TRACEBACK"):
            traceback.print_exc()
    finally:
        side.close()
    return side


@dataclasses.dataclass
class Pending:
    side: Side
    label: str
    client: WireClient
    api: ApiKey
    version: int
    correlation_id: int

    def result(self) -> Any:
        from groupd.protocol.codec import decode_response

        try:
            frame = self.client.read_frame()
        except ConnectionError:
            self.side.record(self.label, "CLOSED")  # the server closed the connection
            raise ScenarioAborted(f"{self.label}: connection closed") from None
        got, response = decode_response(self.api, self.version, frame)
        assert got == self.correlation_id, (got, self.correlation_id)
        self.side.record(self.label, response)
        return response


def flatten(value: Any, path: str = "") -> dict[str, Any]:
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for k, v in value.items():
            out.update(flatten(v, f"{path}.{k}" if path else k))
        return out or {path: {}}
    if isinstance(value, list):
        out = {f"{path}#len": len(value)}
        for i, v in enumerate(value):
            out.update(flatten(v, f"{path}[{i}]"))
        return out
    return {path: value}


def compare(kafka: Side, groupd: Side) -> list[str]:
    """Every difference between the two runs' normalised answers, `label path: kafka=… groupd=…`."""
    diffs = []
    k_labels = [label for label, _ in kafka.steps]
    g_labels = [label for label, _ in groupd.steps]
    if k_labels != g_labels:
        return [f"steps: kafka={k_labels} groupd={g_labels}"]
    for (label, k), (_, g) in zip(kafka.steps, groupd.steps):
        fk, fg = flatten(kafka.normalise(k)), flatten(groupd.normalise(g))
        for path in sorted(set(fk) | set(fg)):
            a, b = fk.get(path, "<absent>"), fg.get(path, "<absent>")
            if a != b:
                diffs.append(f"{label} {path}: kafka={a!r} groupd={b!r}")
    return diffs


Scenario = Callable[[Side], None]
HERE = os.path.dirname(os.path.abspath(__file__))


def allowlist() -> dict[str, list[tuple[str, str]]]:
    """{scenario: [(finding, difference)]} from allowlist.txt (`F<n> <scenario> <difference>`)."""
    out: dict[str, list[tuple[str, str]]] = {}
    with open(os.path.join(HERE, "allowlist.txt"), encoding="utf-8") as f:
        for line in f:
            line = line.rstrip("\n")
            if not line.strip() or line.startswith("#"):
                continue
            finding, name, diff = line.split(" ", 2)
            out.setdefault(name, []).append((finding, diff))
    return out


def findings() -> set[str]:
    with open(os.path.join(HERE, "FINDINGS.md"), encoding="utf-8") as f:
        return set(re.findall(r"^## (F\d+)\b", f.read(), re.M))


def assert_same_output(name: str, command: str, kafka: Counter, groupd: Counter) -> None:
    """A tool's output lines against each server (Counters of normalised lines) differ only as
    allowlist.txt lists under `name`: a listed difference that no longer happens fails too."""
    assert kafka, f"{name}: no output from Apache Kafka"
    diffs = sorted([f"kafka: {line}" for line in (kafka - groupd).elements()]
                   + [f"groupd: {line}" for line in (groupd - kafka).elements()])
    allowed = [d for _, d in allowlist().get(name, [])]
    unexpected = [d for d in diffs if d not in allowed]
    gone = [d for d in allowed if d not in diffs]
    assert not unexpected and not gone, (
        f"{command}\n"
        "differences from Apache Kafka not in allowlist.txt:\n" + "\n".join(f"  {name} {d}" for d in unexpected)
        + "\nallowlisted differences that no longer happen:\n" + "\n".join(f"  {name} {d}" for d in gone)
        + "\nkafka:\n  " + "\n  ".join(kafka.elements()))


def on_both(run: Callable[[Any], Any], kafka: Any, groupd: Any) -> tuple[Any, Any]:
    """(run(kafka), run(groupd)), the two at the same time: the servers share nothing, and most of a run
    is waiting on a server or a tool's JVM start. The first failure is raised, Kafka's first."""
    with concurrent.futures.ThreadPoolExecutor(max_workers=2, thread_name_prefix="differential") as pool:
        on_kafka, on_groupd = pool.submit(run, kafka), pool.submit(run, groupd)
        return on_kafka.result(), on_groupd.result()
