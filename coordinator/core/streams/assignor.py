"""The sticky task assignor of streams groups (Kafka's StickyTaskAssignor, `sticky`), over members
grouped into processes (a process is one Kafka Streams instance with one member per stream thread):

- every task of every subtopology is active on exactly one member;
- active tasks are balanced over members (counts differ by at most one) and stay where they were
  (the member's previous target) as far as balance allows; a task whose member left prefers a member
  of the process that held it, then one that held it as a standby, then the least loaded, then the
  one with the fewest tasks of that subtopology (each member's share mixes subtopologies, so the
  stateful ones spread out);
- each task gets `num_standby` standbys, never on the process of its active nor twice on one
  process, preferring a member that held it as active, then one that held it as a standby, while that
  member is below its share of all tasks (active and standby), then the least loaded; when
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
        had_active = {m: as_set(members[m].previous.active) for m in ids}
        had_standby = {m: as_set(members[m].previous.standby) for m in ids}
        # a previous holder keeps a standby only below this many tasks (active + standby), as Kafka's
        # hasUnfulfilledTaskQuota: else a new member would get no standby while the old ones keep theirs
        placeable = len(all_tasks) * (1 + min(num_standby, len(by_process) - 1))
        quota = -(-placeable // len(ids))

        def rank(m: str, task: Task) -> int:
            if load[m] >= quota:
                return 2
            return 0 if task in had_active[m] else 1 if task in had_standby[m] else 2

        def place(m: str, task: Task, taken: set[str]) -> None:
            standby[m].add(task)
            load[m] += 1
            taken.add(members[m].process_id)

        def open_to(taken: set[str]) -> list[str]:
            return [m for p, ms in by_process.items() if p not in taken for m in ms]

        # as Kafka's assignStandby: a pass for the previous holders, from the highest partition down, then one
        # giving what is left to the least loaded
        taken_by: dict[Task, set[str]] = {}
        left: list[tuple[Task, int]] = []
        for task in reversed(all_tasks):
            taken = taken_by[task] = {members[owner[task]].process_id}
            for placed in range(num_standby):
                sticky = [m for m in open_to(taken) if rank(m, task) < 2]
                if not sticky:
                    left.append((task, num_standby - placed))
                    break
                place(min(sticky, key=lambda m: (rank(m, task), load[m], m)), task, taken)
        for task, missing in left:
            for _ in range(missing):
                candidates = open_to(taken_by[task])
                if not candidates:
                    break  # too few processes for the requested standbys
                place(min(candidates, key=lambda m: (load[m], m)), task, taken_by[task])
    return {m: Tasks(of_set(active[m]), of_set(standby[m]), {}) for m in ids}


def _spread(task: Task) -> tuple[int, str]:
    return task[1], task[0]
