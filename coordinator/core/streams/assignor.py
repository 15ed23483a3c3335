"""The sticky task assignor of streams groups (Kafka's StickyTaskAssignor, `sticky`), over members
grouped into processes (a process is one Kafka Streams instance with one member per stream thread):

- every task of every subtopology is active on exactly one member;
- active tasks are balanced over members (counts differ by at most one) and stay where they were
  (the member's previous target) as far as balance allows; a task whose member left prefers a member
  of the process that held it, then one that held it as a standby, then the least loaded, then the
  one with the fewest tasks of that subtopology (each member's share mixes subtopologies, so the
  stateful ones spread out);
- each task gets `num_standby` standbys, never on the process of its active nor twice on one
  process, preferring the processes that already held it as a standby, then the least loaded; when
  there are too few processes the remaining standbys are not assigned (Kafka logs the same).

Deterministic: ties break on member id. Pure and sans-IO.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Mapping

from .tasks import Tasks, as_set, of_set

NAME = "sticky"
NUM_STANDBY_REPLICAS = "num.standby.replicas"  # the assignment config it reads (LastAssignmentConfigs)
Task = tuple[str, int]


@dataclasses.dataclass(frozen=True, slots=True)
class MemberSpec:
    process_id: str
    previous: Tasks  # its target before this assignment


def assign(members: Mapping[str, MemberSpec], tasks_per_subtopology: Mapping[str, int],
           num_standby: int) -> dict[str, Tasks]:
    """member id → its new target. `tasks_per_subtopology`: subtopology id → number of tasks."""
    if not members:
        return {}
    # partition first: a member's share mixes subtopologies (each process gets some of the stateful ones)
    all_tasks = sorted(((s, p) for s, n in tasks_per_subtopology.items() for p in range(n)), key=_spread)
    ids = sorted(members)
    active: dict[str, set[Task]] = {m: set() for m in ids}
    per_subtopology: dict[str, Counter] = {m: Counter() for m in ids}  # member → subtopology → its tasks
    owner: dict[Task, str] = {}

    floor, extra = divmod(len(all_tasks), len(ids))  # `extra` members may hold floor + 1

    def room(m: str) -> bool:
        n = len(active[m])
        return n < floor or (n == floor and extra_left[0] > 0)

    extra_left = [extra]

    def give(m: str, task: Task) -> None:
        if len(active[m]) == floor:
            extra_left[0] -= 1
        active[m].add(task)
        per_subtopology[m][task[0]] += 1
        owner[task] = m

    valid = set(all_tasks)
    # 1. stickiness: each member keeps what it had, while balance allows
    for m in ids:
        for task in sorted(as_set(members[m].previous.active), key=_spread):
            if task in valid and task not in owner and room(m):
                give(m, task)
    # 2. the rest, each to the least loaded member with room: its old process first, then a standby holder
    previous_process = {t: members[m].process_id for m in ids for t in as_set(members[m].previous.active)}
    previous_standby: dict[Task, set[str]] = {}
    for m in ids:
        for t in as_set(members[m].previous.standby):
            previous_standby.setdefault(t, set()).add(members[m].process_id)
    for task in all_tasks:
        if task in owner:
            continue
        candidates = [m for m in ids if room(m)]
        best = min(candidates, key=lambda m: (members[m].process_id != previous_process.get(task),
                                              members[m].process_id not in previous_standby.get(task, ()),
                                              len(active[m]), per_subtopology[m][task[0]], m))
        give(best, task)

    # 3. standbys: never on the active's process, one per process
    standby: dict[str, set[Task]] = {m: set() for m in ids}
    if num_standby > 0:
        by_process: dict[str, list[str]] = {}
        for m in ids:
            by_process.setdefault(members[m].process_id, []).append(m)
        load = {m: len(active[m]) for m in ids}
        had_standby = {m: as_set(members[m].previous.standby) for m in ids}
        for task in all_tasks:
            taken = {members[owner[task]].process_id}
            for _ in range(num_standby):
                candidates = [m for p, ms in by_process.items() if p not in taken for m in ms]
                if not candidates:
                    break  # too few processes for the requested standbys
                best = min(candidates, key=lambda m: (task not in had_standby[m], load[m], m))
                standby[best].add(task)
                load[best] += 1
                taken.add(members[best].process_id)
    return {m: Tasks(of_set(active[m]), of_set(standby[m]), {}) for m in ids}


def _spread(task: Task) -> tuple[int, str]:
    return task[1], task[0]
