"""A classic group and its members (spec §1–§2): plain data and the small rules that only read or
adjust one group, including what the partition and the offsets store ask of every group type
(coordinator/core/group.py). No I/O, no clock: time comes in as `now` (ms), timers go out as deadlines.

There is no Dead state: Kafka marks a removed group object Dead for the threads that still hold
it; here one loop owns every group and a removed group is simply gone from its partition.

Deterministic choices where Kafka is arbitrary (its members live in a HashMap):
- "map order" is join order: members are kept in insertion order, so a new leader, the leader
  picked at join completion and the member list given to the leader follow join order;
- a tie in the protocol vote goes to the protocol whose first vote came earliest in join order.
"""

from __future__ import annotations

import dataclasses
import enum
from collections import Counter
from collections.abc import Collection
from typing import Any

from groupd.coordinator.core.group import static_member_error
from groupd.protocol import ErrorCode
from groupd.protocol.consumer import BadConsumerProtocol, assigned_partitions, subscribed_topics
from groupd.storage.records import GroupMetadataKey, GroupMetadataValue, MemberMetadata, Record

from .replies import join_reply, sync_reply

NEW_MEMBER_JOIN_TIMEOUT_MS = 300_000  # Kafka's CLASSIC_GROUP_NEW_MEMBER_JOIN_TIMEOUT_MS
E = ErrorCode


class GroupState(enum.Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"


EMPTY = GroupState.EMPTY
PREPARING_REBALANCE = GroupState.PREPARING_REBALANCE
COMPLETING_REBALANCE = GroupState.COMPLETING_REBALANCE
STABLE = GroupState.STABLE

_ALLOWED_FROM = {
    EMPTY: {PREPARING_REBALANCE},
    PREPARING_REBALANCE: {EMPTY, STABLE, COMPLETING_REBALANCE},
    COMPLETING_REBALANCE: {PREPARING_REBALANCE},
    STABLE: {COMPLETING_REBALANCE},
}


@dataclasses.dataclass(eq=False, slots=True)
class Member:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    protocols: tuple[tuple[str, bytes], ...]  # (name, metadata) in preference order
    assignment: bytes = b""  # the leader's, from when its record is appended (the record's apply)
    # what Kafka's member holds: the leader's assignment once durable and sent to the members, reset
    # when a rebalance or a failed write resets it; an upgrade starts from it (spec §7.4)
    propagated: bytes = b""
    awaiting_join: Any = None  # the ticket of a parked JoinGroup
    awaiting_sync: Any = None  # the ticket of a parked SyncGroup
    is_new: bool = False
    deadline: int = 0  # session deadline, monotonic ms

    def metadata(self, protocol: str | None) -> bytes:
        for name, metadata in self.protocols:
            if name == protocol:
                return metadata
        return b""

    def matches(self, protocols: tuple[tuple[str, bytes], ...]) -> bool:
        return self.protocols == protocols

    def vote(self, candidates: set[str]) -> str | None:
        return next((name for name, _ in self.protocols if name in candidates), None)


@dataclasses.dataclass(eq=False)
class ClassicGroup:
    group_id: str
    state: GroupState
    state_timestamp: int | None  # wall clock ms of the last transition
    previous_state: GroupState | None = None
    protocol_type: str | None = None
    protocol_name: str | None = None
    generation: int = 0
    leader_id: str | None = None
    members: dict[str, Member] = dataclasses.field(default_factory=dict)
    static_members: dict[str, str] = dataclasses.field(default_factory=dict)  # instance id → member id
    pending_join: dict[str, int] = dataclasses.field(default_factory=dict)  # MEMBER_ID_REQUIRED id → mono deadline
    pending_sync: set[str] = dataclasses.field(default_factory=set)
    supported_protocols: Counter = dataclasses.field(default_factory=Counter)
    subscribed_topics: set[str] | None = None  # None = unknown (not "consumer", or unparsable)
    awaiting_join_count: int = 0
    new_member_added: bool = False
    # timers, as deadlines (monotonic ms); None = not armed
    join_deadline: int | None = None
    initial_delay: tuple[int, int] | None = None  # (delay, remaining) of the initial-delay chain
    sync_deadline: int | None = None
    sync_generation: int = -1
    # when the current rebalance started and when its join phase completed (monotonic ms), for the log
    rebalance_started_at: int = 0
    join_completed_at: int = 0
    durable: GroupMetadataValue | None = None  # the last GroupMetadata record applied (None: not in the log)

    # -- state ---------------------------------------------------------------------------------

    def is_in(self, *states: GroupState) -> bool:
        return self.state in states

    def transition_to(self, target: GroupState, now: int) -> None:
        if self.state not in _ALLOWED_FROM[target]:
            raise AssertionError(f"group {self.group_id}: {self.state.value} -> {target.value} is not allowed")
        self.previous_state, self.state = self.state, target
        self.state_timestamp = now

    def can_rebalance(self) -> bool:
        return self.state in (EMPTY, STABLE, COMPLETING_REBALANCE)

    def in_initial_rebalance(self) -> bool:
        return self.state is PREPARING_REBALANCE and self.previous_state is EMPTY

    # -- members -------------------------------------------------------------------------------

    def has_member(self, member_id: str) -> bool:
        return member_id in self.members

    def is_leader(self, member_id: str) -> bool:
        return self.leader_id == member_id

    def add(self, member: Member) -> None:
        if not self.members:
            self.protocol_type = member.protocol_type
        self.members[member.member_id] = member
        if member.group_instance_id is not None:
            self.static_members[member.group_instance_id] = member.member_id
        self.supported_protocols.update(name for name, _ in member.protocols)
        if self.leader_id is None:
            self.leader_id = member.member_id
        if member.awaiting_join is not None:
            self.awaiting_join_count += 1
        if self.in_initial_rebalance():
            self.new_member_added = True

    def remove(self, member_id: str) -> Member | None:
        member = self.members.pop(member_id, None)
        if member is None:
            return None
        self.supported_protocols.subtract(name for name, _ in member.protocols)
        self.supported_protocols += Counter()  # drop zero counts
        if member.group_instance_id is not None and self.static_members.get(member.group_instance_id) == member_id:
            del self.static_members[member.group_instance_id]
        if member.awaiting_join is not None:
            self.awaiting_join_count -= 1
        self.pending_sync.discard(member_id)
        if self.leader_id == member_id:
            self.leader_id = next(iter(self.members), None)
        return member

    def update_member(self, member: Member, protocols, rebalance_timeout_ms: int, session_timeout_ms: int,
                      ticket: Any) -> None:
        self.supported_protocols.subtract(name for name, _ in member.protocols)
        self.supported_protocols.update(name for name, _ in protocols)
        self.supported_protocols += Counter()
        member.protocols = protocols
        member.rebalance_timeout_ms = rebalance_timeout_ms
        member.session_timeout_ms = session_timeout_ms
        self.set_awaiting_join(member, ticket)

    def set_awaiting_join(self, member: Member, ticket: Any) -> None:
        if (member.awaiting_join is None) != (ticket is None):
            self.awaiting_join_count += 1 if ticket is not None else -1
        member.awaiting_join = ticket

    def replace_static_member(self, instance_id: str, old_id: str, new_id: str) -> Member:
        """The member of `instance_id` continues under `new_id`: same client, timeouts, protocols
        and assignment (KIP-345)."""
        old = self.members[old_id]
        new = dataclasses.replace(old, member_id=new_id, awaiting_join=None, awaiting_sync=None)
        # the replacement keeps the old member's place in join order
        self.members = {(new_id if k == old_id else k): (new if k == old_id else v)
                        for k, v in self.members.items()}
        self.static_members[instance_id] = new_id
        if old.awaiting_join is not None:
            self.awaiting_join_count -= 1
        if old_id in self.pending_sync:
            self.pending_sync.discard(old_id)
            self.pending_sync.add(new_id)
        if self.leader_id == old_id:
            self.leader_id = new_id
        return new

    def has_all_members_joined(self) -> bool:
        return self.awaiting_join_count == len(self.members) and not self.pending_join

    def rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    def supports_protocols(self, protocol_type: str, protocols) -> bool:
        """The protocol check of JoinGroup (spec §3.5 step 2)."""
        if self.state is EMPTY:  # an Empty group takes any non-empty type and protocol list
            return bool(protocol_type) and bool(protocols)
        n = len(self.members)
        return protocol_type == self.protocol_type and any(
            self.supported_protocols.get(name, 0) == n for name, _ in protocols)

    def select_protocol(self) -> str | None:
        n = len(self.members)
        candidates = {name for name, count in self.supported_protocols.items() if count == n}
        votes: Counter = Counter()
        for member in self.members.values():  # Counter keeps first-vote order: ties go to the earliest
            vote = member.vote(candidates)
            if vote is not None:
                votes[vote] += 1
        return max(votes, key=votes.__getitem__) if votes else None

    def compute_subscribed_topics(self) -> None:
        if self.protocol_type != "consumer":
            self.subscribed_topics = None
            return
        topics: set[str] = set()
        try:
            for member in self.members.values():
                topics.update(subscribed_topics(member.metadata(self.protocol_name)))
        except BadConsumerProtocol:
            self.subscribed_topics = None
            return
        self.subscribed_topics = topics

    def is_subscribed_to(self, topic: str) -> bool:
        if self.subscribed_topics is None:
            return self.protocol_type == "consumer"
        return topic in self.subscribed_topics

    def member_list(self) -> list[dict]:
        """Members as the leader sees them in JoinGroup: metadata for the selected protocol."""
        return [{"member_id": m.member_id, "group_instance_id": m.group_instance_id,
                 "metadata": m.metadata(self.protocol_name)} for m in self.members.values()]

    # -- what the partition, the offsets store and admin ask of a group (coordinator/core/group.py) --

    type = "classic"

    @property
    def state_name(self) -> str:
        return self.state.value

    def validate_member(self, member_id: str, instance_id: str | None) -> ErrorCode | None:
        error = static_member_error(self.static_members, instance_id, member_id)
        if error is not None:
            return error
        if member_id not in self.members:
            return E.unknown_member_id
        return None

    def validate_offset_commit(self, member_id: str, instance_id: str | None, generation: int,
                               version: int = 9, partitions: Collection[tuple[str, int]] = ()) -> ErrorCode | None:
        if generation < 0 and self.state is EMPTY:
            return None  # admin tools and consumers without group management
        if generation >= 0 or member_id or instance_id is not None:
            error = self.validate_member(member_id, instance_id)
            if error is not None:
                return error
            if generation != self.generation:
                return E.illegal_generation
        elif self.state is not EMPTY:
            return E.unknown_member_id
        if self.state is COMPLETING_REBALANCE:
            return E.rebalance_in_progress
        return None

    def validate_txn_offset_commit(self, member_id: str, instance_id: str | None, generation: int,
                                   partitions: Collection[tuple[str, int]] = ()) -> ErrorCode | None:
        """KIP-447 (Kafka's validateOffsetCommit with isTransactional): the member checks of an
        OffsetCommit, but a commit without membership is accepted in any state (TxnOffsetCommit
        v0–2 carry none) and CompletingRebalance is no error."""
        if generation < 0 and self.state is EMPTY:
            return None
        if generation >= 0 or member_id or instance_id is not None:
            error = self.validate_member(member_id, instance_id)
            if error is not None:
                return error
            if generation != self.generation:
                return E.illegal_generation
        return None

    def offset_committed_by(self, member_id: str, now_mono: int) -> None:
        """A member's commit counts as a heartbeat (Kafka reschedules its session)."""
        member = self.members.get(member_id)
        if member is not None and self.state in (STABLE, PREPARING_REBALANCE):
            member.deadline = now_mono + member.session_timeout_ms

    def offset_expiry_base(self, topic: str, commit_timestamp: int) -> int | None:
        """What an offset of `topic` ages from, or None while it cannot expire (spec §11)."""
        if self.protocol_type is None:  # a simple group: each offset ages from its commit
            return commit_timestamp
        if self.state is EMPTY:  # a group with members' offsets ages from when it became Empty
            return self.state_timestamp if self.state_timestamp is not None else commit_timestamp
        if self.state is STABLE and self.protocol_type == "consumer" and self.subscribed_topics is not None:
            return None if topic in self.subscribed_topics else commit_timestamp  # a topic it no longer reads
        return None

    def expirable(self) -> bool:
        """Removed with its last offset: Empty, and no first member between MEMBER_ID_REQUIRED and
        its re-join (KIP-211)."""
        return self.state is EMPTY and not self.members and not self.pending_join

    def delete_records(self) -> list[Record]:
        return [Record(GroupMetadataKey(self.group_id), None)]

    def validate_offset_delete(self) -> ErrorCode | None:
        if self.state is not EMPTY and self.protocol_type != "consumer":
            return E.non_empty_group
        return None

    def validate_delete(self) -> ErrorCode | None:
        return None if self.state is EMPTY else E.non_empty_group

    def validate_offset_fetch(self, member_id: str | None, member_epoch: int) -> ErrorCode | None:
        return None  # OffsetFetch v9's member check is the consumer protocol's; classic groups ignore it

    def epochs(self) -> dict[str, int]:
        return {"generation": self.generation}

    def unreconciled(self) -> int:
        return 0  # a classic member's assignment is whatever its leader gave it

    def partition_owners(self) -> list[tuple[Any, int, str, str, str]]:
        """From each member's assignment as sent to it (reset by a rebalance), decoded with the
        consumer protocol; a group of another protocol type (connect, ...) owns no partitions."""
        if self.protocol_type != "consumer":
            return []
        out = []
        for m in self.members.values():
            try:
                assigned = assigned_partitions(m.propagated)
            except BadConsumerProtocol:
                continue  # a leader's assignment that is not the consumer protocol's: no owner known
            out.extend((topic, p, m.member_id, m.client_id, m.client_host)
                       for topic, partitions in assigned.items() for p in partitions)
        return out

    def describe(self) -> dict:
        stable = self.state is STABLE
        return {
            "group_id": self.group_id, "group_state": self.state.value, "protocol_type": self.protocol_type or "",
            "protocol_data": (self.protocol_name or "") if stable else "",
            "members": [{"member_id": m.member_id, "group_instance_id": m.group_instance_id,
                         "client_id": m.client_id, "client_host": m.client_host,
                         "member_metadata": m.metadata(self.protocol_name) if stable else b"",
                         "member_assignment": m.assignment} for m in self.members.values()],
        }

    # -- persistence ---------------------------------------------------------------------------

    def replay(self, value: GroupMetadataValue) -> None:
        """A record of this group's current generation applied to its live state (a live write, or
        the revert of one): it stores the leader's assignments of a generation in
        CompletingRebalance, and gives each static instance the member id the record names (a
        reverted static replacement gets its old member back, with the record's protocol and
        timeouts)."""
        self.durable = value
        if value.generation != self.generation:
            return  # an older generation: memory has moved on
        if self.state is COMPLETING_REBALANCE:
            assigned = {m.member_id: m.assignment for m in value.members}
            for member in self.members.values():
                member.assignment = assigned.get(member.member_id, b"")
        elif self.state is STABLE:
            for m in value.members:
                current = self.static_members.get(m.group_instance_id) if m.group_instance_id else None
                if current is None or current == m.member_id or m.member_id in self.members:
                    continue
                member = self.replace_static_member(m.group_instance_id, current, m.member_id)
                protocols = member.protocols
                if member.metadata(value.protocol) != m.subscription:
                    protocols = ((value.protocol or "", m.subscription),)
                self.update_member(member, protocols, m.rebalance_timeout if m.rebalance_timeout != -1
                                   else m.session_timeout, m.session_timeout, None)

    def release_parked(self, error: ErrorCode, name_members: bool = False) -> list[tuple[Any, Any]]:
        """The group is gone (a revert removed it, its partition unloaded, an upgrade converted it):
        every parked request gets the error, once; `name_members`: each join reply names its member,
        as Kafka's completeAllJoinFutures does when an upgrade converts the group. A later step of
        this group object (the leader's assignment becoming durable) finds nothing to answer again."""
        released = []
        for member in self.members.values():
            if member.awaiting_join is not None:
                released.append((member.awaiting_join, join_reply(error, member.member_id if name_members else "")))
                self.set_awaiting_join(member, None)
            if member.awaiting_sync is not None:
                released.append((member.awaiting_sync, sync_reply(error)))
                member.awaiting_sync = None
        return released

    def metadata_value(self, assignments: dict[str, bytes] | None = None) -> GroupMetadataValue:
        """The GroupMetadataValue record of this group (members with their assignments)."""
        assignments = assignments if assignments is not None else {}
        return GroupMetadataValue(
            protocol_type=self.protocol_type or "",
            generation=self.generation,
            protocol=self.protocol_name,
            leader=self.leader_id,
            current_state_timestamp=self.state_timestamp if self.state_timestamp is not None else -1,
            members=tuple(MemberMetadata(
                m.member_id, m.group_instance_id, m.client_id, m.client_host, m.rebalance_timeout_ms,
                m.session_timeout_ms, m.metadata(self.protocol_name),
                assignments.get(m.member_id, m.assignment)) for m in self.members.values()),
        )

    @classmethod
    def from_record(cls, group_id: str, value: GroupMetadataValue) -> ClassicGroup:
        """A group as the log left it: Stable with members, Empty without (spec §12.6)."""
        group = cls(group_id, STABLE if value.members else EMPTY,
                    value.current_state_timestamp if value.current_state_timestamp != -1 else None,
                    protocol_type=value.protocol_type or None, protocol_name=value.protocol,
                    generation=value.generation, leader_id=value.leader)
        for m in value.members:
            group.add(Member(m.member_id, m.group_instance_id, m.client_id, m.client_host,
                             m.rebalance_timeout if m.rebalance_timeout != -1 else m.session_timeout,
                             m.session_timeout, value.protocol_type, ((value.protocol or "", m.subscription),),
                             assignment=m.assignment, propagated=m.assignment))
        group.protocol_type, group.leader_id = value.protocol_type or None, value.leader
        group.compute_subscribed_topics()
        group.durable = value
        return group
