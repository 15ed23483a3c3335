"""Reconciliation of a streams-group member towards its target (Kafka's streams
CurrentAssignmentBuilder), and the member-epoch check of a heartbeat.

As in KIP-848, revocation comes before assignment: a member that must give tasks up (active,
standby or warm-up) keeps its epoch in UNREVOKED_TASKS, holding only what it keeps, until a heartbeat
shows it no longer owns them; an active task moves to a member only once no other process holds it
(assigned or pending revocation), and a standby never joins the process that still runs it as
active. What it cannot take yet leaves it in UNRELEASED_TASKS at the new epoch. Each active task
carries the epoch it was assigned at (KIP-1251's assignment epochs, which offset commits are checked
against): a task the member keeps keeps its epoch, a task it takes gets the new member epoch.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping

from .group import MemberState
from .tasks import EMPTY, Tasks, of_set

Task = tuple[str, int]


class FencedMemberEpoch(Exception):
    """FENCED_MEMBER_EPOCH: the member must drop its tasks and rejoin with epoch 0."""


@dataclasses.dataclass(frozen=True, slots=True)
class Assignment:
    member_epoch: int
    previous_member_epoch: int
    state: MemberState
    assigned: Tasks
    pending: Tasks
    epochs: Mapping[Task, int] = dataclasses.field(default_factory=dict)  # active task → assigned at


NEW_MEMBER = Assignment(0, -1, MemberState.STABLE, EMPTY, EMPTY)


def validate_member_epoch(current: Assignment, received: int, owned: Tasks | None) -> None:
    """Kafka's throwIfStreamsGroupMemberEpochIsInvalid: a newer epoch is fenced; an older one only
    passes when it is the previous epoch and what the member owns is within what it is assigned
    (the answer that carried the new epoch was lost)."""
    if received > current.member_epoch:
        raise FencedMemberEpoch(f"The streams group member has a greater member epoch ({received}) than the one "
                                f"known by the group coordinator ({current.member_epoch}). The member must abandon "
                                "all its tasks and rejoin.")
    if received < current.member_epoch:
        within = owned is None or all(a <= b for a, b in zip(owned.sets(), current.assigned.sets()))
        if received != current.previous_member_epoch or not within:
            raise FencedMemberEpoch(f"The streams group member has a smaller member epoch ({received}) than the one "
                                    f"known by the group coordinator ({current.member_epoch}). The member must "
                                    "abandon all its tasks and rejoin.")


def reconcile(current: Assignment, target_epoch: int, target: Tasks, owned: Tasks | None,
              active_elsewhere: Callable[[Task], bool], active_on_process: Callable[[Task], bool]) -> Assignment:
    """The member's next assignment. `owned`: the tasks the heartbeat reported (None: unchanged);
    `active_elsewhere(task)`: another process holds the task as active (assigned or pending
    revocation); `active_on_process(task)`: another member of this member's process holds it active."""
    state = current.state
    if state == MemberState.STABLE:
        if current.member_epoch == target_epoch:
            return current
        return _next(current, target_epoch, target, active_elsewhere, active_on_process)
    if state == MemberState.UNREVOKED_TASKS:
        if owned is None or any(a & b for a, b in zip(owned.sets(), current.pending.sets())):
            return current  # still holds (or did not say) what it must give up
        return _next(current, target_epoch, target, active_elsewhere, active_on_process)
    if state == MemberState.UNRELEASED_TASKS:
        return _next(current, target_epoch, target, active_elsewhere, active_on_process)
    raise FencedMemberEpoch("The streams group member is in a unknown state. The member must abandon all its tasks "
                            "and rejoin.")


def _next(current: Assignment, target_epoch: int, target: Tasks, active_elsewhere: Callable[[Task], bool],
          active_on_process: Callable[[Task], bool]) -> Assignment:
    held_active, held_standby, held_warmup = current.assigned.sets()
    want_active, want_standby, want_warmup = target.sets()
    revoke = (held_active - want_active, held_standby - want_standby, held_warmup - want_warmup)
    if any(revoke):
        keep = Tasks(of_set(held_active & want_active), of_set(held_standby & want_standby),
                     of_set(held_warmup & want_warmup))
        return Assignment(current.member_epoch, current.previous_member_epoch, MemberState.UNREVOKED_TASKS, keep,
                          Tasks(*(of_set(r) for r in revoke)), current.epochs)
    active = {t for t in want_active if t in held_active or not active_elsewhere(t)}
    standby = {t for t in want_standby if t in held_standby or not active_on_process(t)}
    warmup = {t for t in want_warmup if t in held_warmup or not active_on_process(t)}
    unreleased = (want_active - active) or (want_standby - standby) or (want_warmup - warmup)
    state = MemberState.UNRELEASED_TASKS if unreleased else MemberState.STABLE
    epochs = {t: current.epochs.get(t, target_epoch) if t in held_active else target_epoch for t in active}
    return Assignment(target_epoch, current.member_epoch if target_epoch != current.member_epoch
                      else current.previous_member_epoch, state,
                      Tasks(of_set(active), of_set(standby), of_set(warmup)), EMPTY, epochs)
