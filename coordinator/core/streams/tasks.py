"""A streams member's tasks: active, standby and warm-up, each subtopology id → partitions (task
ids are (subtopology, partition)), and their conversions to and from the records' TaskIds. Pure."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping

from groupd.storage.streams_records import CurrentTaskIds, TaskIds

TaskMap = Mapping[str, frozenset[int]]


def task_map(entries: Iterable | None) -> dict[str, frozenset[int]]:
    """TaskIds (records or requests, anything with subtopology_id and partitions) as a map."""
    out: dict[str, set[int]] = {}
    for e in entries or ():
        out.setdefault(e.subtopology_id, set()).update(e.partitions)
    return {s: frozenset(ps) for s, ps in out.items() if ps}


def task_ids(tasks: TaskMap, current: bool = False, epochs: Mapping[tuple[str, int], int] | None = None) -> tuple:
    """The records' TaskIds; `current`: the current assignment's, with `epochs` (active tasks only:
    the epoch each was assigned at) as their AssignmentEpochs."""
    if not current:
        return tuple(TaskIds(s, tuple(sorted(ps))) for s, ps in sorted(tasks.items()) if ps)
    out = []
    for s, ps in sorted(tasks.items()):
        if ps:
            parts = tuple(sorted(ps))
            out.append(CurrentTaskIds(s, parts, () if epochs is None else tuple(epochs[(s, p)] for p in parts)))
    return tuple(out)


def as_set(tasks: TaskMap) -> set[tuple[str, int]]:
    return {(s, p) for s, ps in tasks.items() for p in ps}


def of_set(pairs: Iterable[tuple[str, int]]) -> dict[str, frozenset[int]]:
    out: dict[str, set[int]] = {}
    for s, p in pairs:
        out.setdefault(s, set()).add(p)
    return {s: frozenset(ps) for s, ps in out.items()}


@dataclasses.dataclass(frozen=True, slots=True)
class Tasks:
    active: TaskMap = dataclasses.field(default_factory=dict)
    standby: TaskMap = dataclasses.field(default_factory=dict)
    warmup: TaskMap = dataclasses.field(default_factory=dict)

    @classmethod
    def of(cls, value) -> Tasks:
        """From a record value or request with active_tasks/standby_tasks/warmup_tasks."""
        if value is None:
            return EMPTY
        return cls(task_map(value.active_tasks), task_map(value.standby_tasks), task_map(value.warmup_tasks))

    @classmethod
    def pending_of(cls, value) -> Tasks:
        if value is None:
            return EMPTY
        return cls(task_map(value.active_tasks_pending_revocation), task_map(value.standby_tasks_pending_revocation),
                   task_map(value.warmup_tasks_pending_revocation))

    def sets(self) -> tuple[set, set, set]:
        return as_set(self.active), as_set(self.standby), as_set(self.warmup)

    def empty(self) -> bool:
        return not (self.active or self.standby or self.warmup)

    def normalized(self) -> Tasks:
        """Equal maps compare equal: empty subtopologies dropped."""
        return Tasks(*(of_set(s) for s in self.sets()))

    def count(self) -> int:
        return sum(len(ps) for m in (self.active, self.standby, self.warmup) for ps in m.values())


EMPTY = Tasks()
