"""The server-side assignors of consumer groups (spec §3.3–3.4): `uniform` (the default) and `range`.

An assignor is a pure function of the group spec — every member's subscribed topic ids and current
target assignment, plus topic metadata — that returns the new target assignment of every member.

Determinism: where Kafka walks its member map in hash order, we walk member ids sorted (the range
assignor: members with an instance id first, by instance id, then the others by member id), so the
same input always gives the same target.
"""

from __future__ import annotations

import dataclasses
import heapq
import uuid
from collections.abc import Callable, Iterable, Mapping

# topic id -> partitions; a member's assignment (current target or new target)
TopicPartitions = Mapping[uuid.UUID, frozenset[int]]
GroupAssignment = dict[str, dict[uuid.UUID, frozenset[int]]]


@dataclasses.dataclass(frozen=True, slots=True)
class MemberSubscription:
    """What an assignor knows of one member (Kafka: MemberSubscriptionAndAssignmentImpl)."""

    subscribed_topic_ids: frozenset[uuid.UUID]
    target: TopicPartitions = dataclasses.field(default_factory=dict)  # the current target assignment
    instance_id: str | None = None
    rack_id: str | None = None  # unused by the 4.x assignors


@dataclasses.dataclass(frozen=True, slots=True)
class TopicMetadata:
    topic_id: uuid.UUID
    name: str
    num_partitions: int
    partition_racks: Mapping[int, frozenset[str]] = dataclasses.field(default_factory=dict)  # unused in 4.x


class PartitionAssignorError(Exception):
    """The assignor could not compute a target (the machine answers UNKNOWN_SERVER_ERROR)."""


Assignor = Callable[[Mapping[str, MemberSubscription], Mapping[uuid.UUID, TopicMetadata]], GroupAssignment]


def is_homogeneous(members: Mapping[str, MemberSubscription]) -> bool:
    """Kafka's SubscriptionType: HOMOGENEOUS when every member subscribes to the same topics."""
    subscriptions = {m.subscribed_topic_ids for m in members.values()}
    return len(subscriptions) <= 1


def _partition_counts(members: Mapping[str, MemberSubscription],
                      topics: Mapping[uuid.UUID, TopicMetadata]) -> dict[uuid.UUID, int]:
    counts: dict[uuid.UUID, int] = {}
    for subscribed in {m.subscribed_topic_ids for m in members.values()}:  # members mostly share one
        for topic_id in subscribed:
            if topic_id not in counts:
                metadata = topics.get(topic_id)
                if metadata is None:
                    raise PartitionAssignorError(f"members are subscribed to topic {topic_id}, "
                                                 "which is not in the topic metadata")
                counts[topic_id] = metadata.num_partitions
    return counts


def _sticky_inputs(order: Iterable[str], members: Mapping[str, MemberSubscription],
                   counts: Mapping[uuid.UUID, int]) -> dict[str, dict[uuid.UUID, list[int]]]:
    """Each member's current target restricted to what it may keep: topics it still subscribes to,
    partitions that still exist, each partition to the first member (in `order`) that claims it."""
    claimed: set[tuple[uuid.UUID, int]] = set()
    kept: dict[str, dict[uuid.UUID, list[int]]] = {}
    for member_id in order:
        member = members[member_id]
        mine: dict[uuid.UUID, list[int]] = {}
        for topic_id in sorted(member.target):
            if topic_id not in member.subscribed_topic_ids:
                continue
            n = counts[topic_id]
            partitions = []
            for p in sorted(member.target[topic_id]):
                if 0 <= p < n and (topic_id, p) not in claimed:
                    claimed.add((topic_id, p))
                    partitions.append(p)
            if partitions:
                mine[topic_id] = partitions
        kept[member_id] = mine
    return kept


def _freeze(assignment: Mapping[uuid.UUID, Iterable[int]]) -> dict[uuid.UUID, frozenset[int]]:
    return {t: frozenset(ps) for t, ps in assignment.items() if ps}


# ---------------------------------------------------------------------------------------------
# uniform


def uniform(members: Mapping[str, MemberSubscription],
            topics: Mapping[uuid.UUID, TopicMetadata]) -> GroupAssignment:
    """Kafka's UniformAssignor: balance first (sizes within one among members that share topics),
    then stickiness (keep the current target)."""
    if not members:
        return {}
    counts = _partition_counts(members, topics)
    order = sorted(members)
    if is_homogeneous(members):
        return _uniform_homogeneous(order, members, counts)
    return _uniform_heterogeneous(order, members, counts)


def _uniform_homogeneous(order: list[str], members: Mapping[str, MemberSubscription],
                         counts: Mapping[uuid.UUID, int]) -> GroupAssignment:
    """UniformHomogeneousAssignmentBuilder: quota = total // members, the first `total % members`
    quotas one larger. Unlike Kafka (whose extra slots go to whichever members its map yields first)
    the larger quotas go to members that already hold more than the minimum, so no member loses a
    partition it could have kept.

    This runs on every group epoch bump (each of 1,000 joins), so partitions are numbered once, in
    (topic id, partition) order, and the loops below work on those ints rather than hashing UUIDs;
    a member whose target stays as it is gets its current target object back (callers compare by
    identity first)."""
    if not counts:
        return {m: {} for m in order}
    topic_ids = sorted(counts)
    span: dict[int, tuple[int, int]] = {}  # topic id as an int (UUID.__hash__ is Python code) -> first, count
    topic_of: list[int] = []  # partition number -> (index in topic_ids, partition)
    partition_of: list[int] = []
    total = 0
    for i, topic_id in enumerate(topic_ids):
        n = counts[topic_id]
        span[topic_id.int] = (total, n)
        topic_of += [i] * n
        partition_of += range(n)
        total += n
    claimed = bytearray(total)
    kept: list[list[int]] = []  # per member (in `order`): the partitions it may keep, ascending
    intact: list[bool] = []  # ... and whether that is exactly its current target, as stored
    targets = [members[m].target for m in order]
    # homogeneous: every member subscribes to every topic of `counts`
    for target in targets:
        mine: list[int] = []
        whole = True
        for topic_id in sorted(target) if len(target) > 1 else target:
            partitions = target[topic_id]
            if type(partitions) is not frozenset or not partitions:
                whole = False
            first_n = span.get(topic_id.int)
            if first_n is None:
                whole = False
                continue
            first, n = first_n
            for p in sorted(partitions) if len(partitions) > 1 else partitions:
                if 0 <= p < n and not claimed[first + p]:
                    claimed[first + p] = 1
                    mine.append(first + p)
                else:
                    whole = False
        kept.append(mine)
        intact.append(whole)

    minimum, extra = divmod(total, len(order))
    held = [len(mine) for mine in kept]
    larger = bytearray(len(order))
    for i in [i for i, h in enumerate(held) if h > minimum][:extra]:
        larger[i] = 1
    extra -= sum(larger)
    for i, h in enumerate(held):
        if extra <= 0:
            break
        if h <= minimum:
            larger[i] = 1
            extra -= 1

    unassigned = [g for g, taken in enumerate(claimed) if not taken]
    quotas = [minimum + big for big in larger]
    for mine, h, quota in zip(kept, held, quotas):
        if h > quota:
            unassigned += mine[quota:]
            del mine[quota:]
    cursor = 0
    for mine, quota in zip(kept, quotas):
        remaining = quota - len(mine)
        if remaining > 0:
            mine += unassigned[cursor:cursor + remaining]
            cursor += remaining
    if cursor != len(unassigned):
        raise PartitionAssignorError("partitions were left unassigned")

    result: GroupAssignment = {}
    for member_id, target, mine, whole, h, quota in zip(order, targets, kept, intact, held, quotas):
        if whole and h == quota:
            result[member_id] = target  # unchanged: the same object
            continue
        if len(topic_ids) == 1:
            result[member_id] = {topic_ids[0]: frozenset(mine)} if mine else {}
            continue
        grouped: dict[int, list[int]] = {}
        for g in mine:
            grouped.setdefault(topic_of[g], []).append(partition_of[g])
        result[member_id] = {topic_ids[i]: frozenset(ps) for i, ps in sorted(grouped.items())}
    return result


def _uniform_heterogeneous(order: list[str], members: Mapping[str, MemberSubscription],
                           counts: Mapping[uuid.UUID, int]) -> GroupAssignment:
    """UniformHeterogeneousAssignmentBuilder as rewritten in KAFKA-17710: keep current targets,
    hand out the rest to the least-loaded subscriber, then move partitions from the most- to the
    least-loaded subscriber of each topic until no topic has subscribers more than one apart.
    Kafka stops after 16 passes; we run to the fixed point (each move lowers Σ load², so it ends),
    which makes members with identical subscriptions always balanced within one."""
    index = {m: i for i, m in enumerate(order)}
    subscribers: dict[uuid.UUID, list[int]] = {t: [] for t in counts}
    for member_id in order:
        for topic_id in members[member_id].subscribed_topic_ids:
            subscribers[topic_id].append(index[member_id])
    topic_order = sorted((t for t in counts if subscribers[t]),
                         key=lambda t: (-counts[t] / len(subscribers[t]), len(subscribers[t]), t))

    kept = _sticky_inputs(order, members, counts)
    assigned: list[dict[uuid.UUID, set[int]]] = [
        {t: set(ps) for t, ps in kept[m].items()} for m in order]
    load = [sum(len(ps) for ps in a.values()) for a in assigned]

    for topic_id in topic_order:
        owned = set().union(*(a.get(topic_id, ()) for a in assigned))
        free = [p for p in range(counts[topic_id]) if p not in owned]
        if not free:
            continue
        heap = [(load[i], i) for i in subscribers[topic_id]]
        heapq.heapify(heap)
        for p in free:
            _, i = heapq.heappop(heap)
            assigned[i].setdefault(topic_id, set()).add(p)
            load[i] += 1
            heapq.heappush(heap, (load[i], i))

    moved = True
    while moved:
        moved = False
        for topic_id in topic_order:
            if len(subscribers[topic_id]) >= 2 and _balance_topic(topic_id, subscribers[topic_id], assigned, load):
                moved = True
    return {m: _freeze(assigned[index[m]]) for m in order}


def _balance_topic(topic_id: uuid.UUID, subs: list[int], assigned: list[dict[uuid.UUID, set[int]]],
                   load: list[int]) -> bool:
    """Move partitions of `topic_id` from its most-loaded holder to its least-loaded subscriber
    while they are more than one apart. Lazy heaps: an entry is stale once its load changed."""
    least = [(load[i], i) for i in subs]
    most = [(-load[i], i) for i in subs if assigned[i].get(topic_id)]
    heapq.heapify(least)
    heapq.heapify(most)
    moved = False
    while least and most:
        low, lo = least[0]
        if low != load[lo]:
            heapq.heappop(least)
            continue
        high, hi = most[0]
        if -high != load[hi] or not assigned[hi].get(topic_id):
            heapq.heappop(most)
            continue
        if load[hi] - load[lo] <= 1:
            break
        partitions = assigned[hi][topic_id]
        p = max(partitions)
        partitions.discard(p)
        assigned[lo].setdefault(topic_id, set()).add(p)
        load[hi] -= 1
        load[lo] += 1
        moved = True
        heapq.heappop(least)
        heapq.heappop(most)
        heapq.heappush(least, (load[lo], lo))
        heapq.heappush(least, (load[hi], hi))
        if partitions:
            heapq.heappush(most, (-load[hi], hi))
        heapq.heappush(most, (-load[lo], lo))
    return moved


# ---------------------------------------------------------------------------------------------
# range


def range_assignor(members: Mapping[str, MemberSubscription],
                   topics: Mapping[uuid.UUID, TopicMetadata]) -> GroupAssignment:
    """Kafka 4.x's RangeAssignor: per topic, each subscriber gets `P // n` partitions and the first
    `P % n` one more, keeping the lowest-numbered partitions of its current target it may keep and
    filling up from the free partitions in ascending order, so a fresh group with equal partition
    counts is co-partitioned (member i gets the same partition numbers of every topic)."""
    if not members:
        return {}
    counts = _partition_counts(members, topics)
    order = sorted(members, key=lambda m: (members[m].instance_id is None, members[m].instance_id or "", m))
    result: dict[str, dict[uuid.UUID, list[int]]] = {m: {} for m in order}
    for topic_id in sorted(counts):
        n = counts[topic_id]
        subs = [m for m in order if topic_id in members[m].subscribed_topic_ids]
        minimum, extra = divmod(n, len(subs))
        sticky: set[int] = set()
        unfilled: list[tuple[str, int]] = []
        for member_id in subs:
            current = [p for p in sorted(members[member_id].target.get(topic_id, ()))
                       if 0 <= p < n and p not in sticky]
            keep = current[:minimum]
            remaining = minimum - len(current)
            if remaining < 0 and extra > 0:
                extra -= 1
                keep.append(current[minimum])
            else:
                unfilled.append((member_id, remaining))
            sticky.update(keep)
            if keep:
                result[member_id][topic_id] = keep
        free = [p for p in range(n) if p not in sticky]
        cursor = 0
        for member_id, remaining in unfilled:
            if extra > 0:
                remaining += 1
                extra -= 1
            if remaining > 0:
                result[member_id].setdefault(topic_id, []).extend(free[cursor:cursor + remaining])
                cursor += remaining
        if cursor != len(free):
            raise PartitionAssignorError("partitions were left unassigned")
    return {m: _freeze(result[m]) for m in order}


# group.consumer.assignors: the first is the default (spec §2.4)
ASSIGNORS: dict[str, Assignor] = {"uniform": uniform, "range": range_assignor}
DEFAULT_ASSIGNOR = "uniform"
