"""The `simple` assignor of share groups (Kafka's SimpleAssignor, spec §2.4): every assignable
partition goes to ceil(M/P) members when there are more members M than partitions P (else to one),
members get balanced quotas, and what each member had is kept where it fits. Not rack-aware.

Two builders, as Kafka's: homogeneous (every member subscribes to the same topics) and
heterogeneous (the same steps per topic over the members subscribed to it). Each runs four steps
over the previous target: drop partitions of topics no longer subscribed, take partitions from
members over their quota, take members from partitions shared more than desired, then hand
partitions short of members to members under quota, round-robin.

Kafka iterates Java hash sets of member indices and partitions (ascending for small integers);
here members are numbered in sorted member-id order and partitions iterate sorted, so a target is
a function of its inputs (replay and tests see the same one).
"""

from __future__ import annotations

import math
import uuid
from collections.abc import Iterable, Mapping

Assignment = dict[uuid.UUID, set[int]]  # topic id → partitions
NAME = "simple"


def assign(subscriptions: Mapping[str, frozenset[uuid.UUID]], partitions: Mapping[uuid.UUID, int | Iterable[int]],
           previous: Mapping[str, Mapping[uuid.UUID, frozenset[int]]]) -> dict[str, dict[uuid.UUID, frozenset[int]]]:
    """The target of every member: `subscriptions` member id → subscribed topic ids that exist,
    `partitions` topic id → its assignable partitions (a number n: 0..n-1; share groups assign only
    initialized ones), `previous` the current target."""
    if not subscriptions:
        return {}
    partitions = {t: tuple(range(ps)) if isinstance(ps, int) else tuple(sorted(ps)) for t, ps in partitions.items()}
    member_ids = sorted(subscriptions)
    old = {i: {t: set(ps) for t, ps in previous.get(m, {}).items()} for i, m in enumerate(member_ids)}
    subs = [subscriptions[m] for m in member_ids]
    if all(s == subs[0] for s in subs):
        new = _Homogeneous(subs[0], partitions, old).build()
    else:
        new = _heterogeneous(subs, partitions, old)
    return {m: {t: frozenset(ps) for t, ps in new.get(i, old[i]).items() if ps} for i, m in enumerate(member_ids)}


def _quotas(sharing: int, num_partitions: int, num_members: int) -> list[int]:
    """q(i) = ceil(S·P/M · (i+1)) − ceil(S·P/M · i): they sum to S·P (Kafka's double arithmetic)."""
    precise = sharing * num_partitions / num_members
    return [math.ceil(precise * (i + 1)) - math.ceil(precise * i) for i in range(num_members)]


def _sharing(num_members: int, num_partitions: int) -> int:
    return 0 if num_partitions == 0 else (num_members + num_partitions - 1) // num_partitions


def _copy(a: Assignment) -> Assignment:
    return {t: set(ps) for t, ps in a.items()}


def _hand_out(by_partition: dict, by_member: dict[int, set], unfilled: set[int], sharing: int,
              desired, new: dict[int, Assignment], old: dict[int, Assignment]) -> None:
    """The last step, as Kafka's assignRemainingPartitions: once through the partitions, cycling
    through the members under quota; a partition no unfilled member can take stays short."""
    if not unfilled:
        return
    order, pos, progressed = sorted(unfilled), 0, False
    for key in sorted(by_partition):
        assigned = by_partition[key]
        to_make = sharing - len(assigned)
        while to_make > 0:
            if pos >= len(order):
                if not progressed or not unfilled:
                    break
                order, pos, progressed = sorted(unfilled), 0, False
            i = order[pos]
            pos += 1
            if i not in unfilled or i in assigned:  # removed from the set since the cycle began
                continue
            topic, partition = key
            new.setdefault(i, _copy(old[i])).setdefault(topic, set()).add(partition)
            mine = by_member.setdefault(i, set())
            mine.add(key)
            to_make -= 1
            progressed = True
            if len(mine) >= desired[i]:
                unfilled.discard(i)
        if not unfilled:
            break


class _Homogeneous:
    def __init__(self, topics: frozenset[uuid.UUID], partitions: Mapping[uuid.UUID, tuple[int, ...]],
                 old: dict[int, Assignment]) -> None:
        self.topics = topics
        self.old = old
        self.targets = [(t, p) for t in sorted(topics) for p in partitions.get(t, ())]
        self.sharing = _sharing(len(old), len(self.targets))
        self.desired = _quotas(self.sharing, len(self.targets), len(old))
        self.new: dict[int, Assignment] = {}
        self.by_partition: dict[tuple[uuid.UUID, int], set[int]] = {}
        self.by_member: dict[int, set[tuple[uuid.UUID, int]]] = {}
        self.unfilled: set[int] = set()
        self.overfilled: set[int] = set()

    def build(self) -> dict[int, Assignment]:
        if not self.topics:
            return {}
        self._drop_unsubscribed()
        self._revoke_overfilled()
        self._revoke_overshared()
        for key in self.targets:
            self.by_partition.setdefault(key, set())
        _hand_out(self.by_partition, self.by_member, self.unfilled, self.sharing, self.desired, self.new, self.old)
        return self.new

    def _drop_unsubscribed(self) -> None:
        for i, assignment in self.old.items():
            copy, count = None, 0
            for topic, ps in assignment.items():
                if topic in self.topics:
                    for p in sorted(ps):
                        count += 1
                        self.by_partition.setdefault((topic, p), set()).add(i)
                        self.by_member.setdefault(i, set()).add((topic, p))
                        if count >= self.desired[i] and copy is None:
                            copy = _copy(assignment)
                else:
                    if copy is None:
                        copy = _copy(assignment)
                    copy.pop(topic, None)
            if copy is not None:
                self.new[i] = copy
            if count < self.desired[i]:
                self.unfilled.add(i)
            elif count > self.desired[i]:
                self.overfilled.add(i)

    def _revoke_overfilled(self) -> None:
        for i in sorted(self.overfilled):
            mine = self.by_member[i]
            for key in sorted(mine):
                if len(mine) <= self.desired[i]:
                    break
                self.new[i][key[0]].discard(key[1])
                self.by_partition[key].discard(i)
                mine.discard(key)

    def _revoke_overshared(self) -> None:
        for key in sorted(self.by_partition):
            assigned = self.by_partition[key]
            count = len(assigned)
            if count <= self.sharing:
                continue
            for i in sorted(assigned):
                mine = self.new.setdefault(i, _copy(self.old[i]))
                ps = mine.get(key[0])
                if ps is not None and key[1] in ps:
                    ps.discard(key[1])
                    count -= 1
                    assigned.discard(i)
                    self.by_member[i].discard(key)
                    self.unfilled.add(i)
                if count <= self.sharing:
                    break


def _heterogeneous(subs: list[frozenset[uuid.UUID]], partitions: Mapping[uuid.UUID, tuple[int, ...]],
                   old: dict[int, Assignment]) -> dict[int, Assignment]:
    """Kafka's SimpleHeterogeneousAssignmentBuilder: each topic balanced on its own over its subscribers."""
    new: dict[int, Assignment] = {}
    for topic in sorted(set().union(*subs)):
        subscribers = [i for i, s in enumerate(subs) if topic in s]
        assignable = partitions.get(topic, ())
        num = len(assignable)
        sharing = _sharing(len(subscribers), num)
        desired = [0] * len(subs)
        for k, q in enumerate(_quotas(sharing, num, len(subscribers))):
            desired[subscribers[k]] = q
        by_partition: dict[tuple[uuid.UUID, int], set[int]] = {}
        by_member: dict[int, set[tuple[uuid.UUID, int]]] = {}
        for i, assignment in old.items():  # what each member had of the topic
            for p in sorted(assignment.get(topic, ())):
                by_partition.setdefault((topic, p), set()).add(i)
                by_member.setdefault(i, set()).add((topic, p))
        for i in sorted(by_member):  # members over quota (a member no longer subscribed has quota 0)
            mine = by_member[i]
            for key in sorted(mine):
                if len(mine) <= desired[i]:
                    break
                by_partition[key].discard(i)
                mine.discard(key)
                new.setdefault(i, _copy(old[i]))[topic].discard(key[1])
        for key in sorted(by_partition):  # partitions shared more than desired
            assigned = by_partition[key]
            count = len(assigned)
            if count <= sharing:
                continue
            for i in sorted(assigned):
                ps = new.setdefault(i, _copy(old[i])).get(topic)
                if ps is not None and key[1] in ps:
                    ps.discard(key[1])
                    count -= 1
                    assigned.discard(i)
                    by_member[i].discard(key)
                if count <= sharing:
                    break
        for p in assignable:
            by_partition.setdefault((topic, p), set())
        unfilled = {i for i in subscribers if len(by_member.get(i, ())) < desired[i]}
        _hand_out(by_partition, by_member, unfilled, sharing, desired, new, old)
    return new
