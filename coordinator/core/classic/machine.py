"""The classic group state machine (spec §3–§6): JoinGroup, SyncGroup, Heartbeat, LeaveGroup and
the session, join and sync timers, on the classic groups of one partition. Sans-IO: each operation
takes the request and `now` (coordinator/core/clock.py) and returns an `Outcome`; nothing here awaits, sleeps or reads a
clock. Over 500 lines because it is one state machine: the join, sync and timer paths call into
the same rebalance steps, and splitting them would scatter the transitions spec §2 tabulates.

State split, as in Kafka's coordinator: the rebalance in flight (who re-joined, parked replies,
deadlines) is memory that Kafka does not persist either, changed here directly; what is durable
(the group's existence, a generation's protocol, leader and assignments) is written as records,
which the partition applies when the runner appends them (`ClassicGroup.replay`). A coordinator
that restarts mid-rebalance resumes from the last durable generation.

A parked request is an opaque `ticket` the caller passes in and gets back in `Outcome.released`
with its reply.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from groupd.coordinator.core import events as ev
from groupd.coordinator.core.clock import Now
from groupd.coordinator.core.outcome import Outcome
from groupd.protocol import ErrorCode
from groupd.storage.records import GroupMetadataKey, GroupMetadataValue, Record

from .group import (
    COMPLETING_REBALANCE,
    EMPTY,
    NEW_MEMBER_JOIN_TIMEOUT_MS,
    PREPARING_REBALANCE,
    STABLE,
    ClassicGroup,
    Member,
)
from .replies import join_reply, sync_reply
from .requests import HeartbeatRequest, JoinRequest, LeaveRequest, SyncRequest

E = ErrorCode

REBALANCE_REASONS = ("member-joined", "member-left", "session-expired", "metadata-changed", "leader-rejoin",
                     "static-member-rejoin", "sync-timeout", "write-failed", "over-max-size", "downgrade", "forced")


class ClassicMachine:
    def __init__(self, groups: dict, settings, new_member_id: Callable[[str], str], events: list) -> None:
        self.groups = groups  # the partition's registry, shared with every group type
        self.settings = settings
        self.new_member_id = new_member_id  # prefix → "<prefix>-<uuid>"
        self.events = events  # the partition's list of what happened (coordinator/core/events.py)

    def on_loaded(self, out: Outcome, group: ClassicGroup, now: Now) -> None:
        """The partition has replayed its log: start every member's session timer, and force a
        group above group.max.size into a rebalance so the excess is kicked out (spec §12.6)."""
        for member in group.members.values():
            self._arm_session(out, group, member, now, member.session_timeout_ms)
        if len(group.members) > self.settings.max_size:
            self._prepare_rebalance(out, group, now, "over-max-size", "group is over group.max.size after loading")

    def downgraded(self, group_id: str, now: Now, rebalance: bool = True) -> Outcome:
        """A consumer group became this classic group (spec §7.4): every member's session starts
        and, unless the members' assignments are already what a rebalance would give (a static
        member replaced with the same subscription), a classic rebalance gives them new ones."""
        out = Outcome()
        group = self.groups.get(group_id)
        if isinstance(group, ClassicGroup) and group.members:
            self.on_loaded(out, group, now)
            if rebalance and group.can_rebalance():
                self._prepare_rebalance(out, group, now, "downgrade", "downgraded from a consumer group")
        return out

    # =========================================================================================
    # JoinGroup (spec §3)

    def join(self, req: JoinRequest, ticket: Any, now: Now) -> Outcome:
        self.events.append(ev.JoinReceived(req.group_id, req.member_id, req.group_instance_id, req.version))
        out = Outcome()
        s = self.settings
        if req.group_id == "":
            out.reply = join_reply(E.invalid_group_id, req.member_id)
            return out
        if not s.min_session_timeout_ms <= req.session_timeout_ms <= s.max_session_timeout_ms:
            out.reply = join_reply(E.invalid_session_timeout, req.member_id)
            return out
        group = self.groups.get(req.group_id)
        created = False
        if group is None:
            if req.member_id:
                out.reply = join_reply(E.unknown_member_id, req.member_id)
                return out
            group = ClassicGroup(req.group_id, EMPTY, now.wall)
            self.groups[req.group_id] = group
            created = True

        if not self._accepts_joining_member(group, req.member_id):
            if group.has_member(req.member_id):
                self._remove_member(out, group, req.member_id)
            out.reply = join_reply(E.group_max_size_reached, "")
        elif req.member_id == "":
            self._join_new_member(out, group, req, ticket, now)
        else:
            self._join_known_member(out, group, req, ticket, now)

        if created and not out.records:
            # a new group is written at once so that it exists in the log (Kafka 4 does this):
            # the empty group as created, whoever this join added (spec §3.3)
            out.records.append(Record(GroupMetadataKey(group.group_id), GroupMetadataValue(
                "", 0, None, None, group.state_timestamp if group.state_timestamp is not None else -1, ())))
            # a failed write reverts the creation: the group goes, its parked joins get the error
            if out.reply is not None and ticket is not None:
                # Kafka completes this join's answer (MEMBER_ID_REQUIRED, an error) inside the write
                # operation, not when the record commits: the re-join need not wait for an fsync
                out.released.append((ticket, out.reply))
                out.reply = None
        return out

    def _accepts_joining_member(self, group: ClassicGroup, member_id: str) -> bool:
        limit = self.settings.max_size
        if group.is_in(EMPTY):
            return True
        member = group.members.get(member_id)
        if group.is_in(PREPARING_REBALANCE):
            return (member is not None and member.awaiting_join is not None) or group.awaiting_join_count < limit
        return member is not None or len(group.members) < limit

    def _join_new_member(self, out: Outcome, group: ClassicGroup, req: JoinRequest, ticket: Any, now: Now) -> None:
        if not group.supports_protocols(req.protocol_type, req.protocols):
            out.reply = join_reply(E.inconsistent_group_protocol, "")
            return
        if req.group_instance_id is not None:
            old_id = group.static_members.get(req.group_instance_id)
            if old_id is not None:
                self._replace_static_member(out, group, req, old_id, ticket, now)
                return
            self._add_member(out, group, req, self.new_member_id(req.group_instance_id), ticket, now)
            return
        member_id = self.new_member_id(req.client_id if req.client_id is not None else "null")
        if req.version >= 4:
            group.pending_join[member_id] = now.mono + req.session_timeout_ms
            out.timers.append((("session", group.group_id, member_id), group.pending_join[member_id]))
            out.reply = join_reply(E.member_id_required, member_id)
            return
        self._add_member(out, group, req, member_id, ticket, now)

    def _join_known_member(self, out: Outcome, group: ClassicGroup, req: JoinRequest, ticket: Any, now: Now) -> None:
        if not group.supports_protocols(req.protocol_type, req.protocols):
            out.reply = join_reply(E.inconsistent_group_protocol, req.member_id)
            return
        if req.member_id in group.pending_join:
            del group.pending_join[req.member_id]
            self._add_member(out, group, req, req.member_id, ticket, now)
            return
        error = self._validate_member(group, req.member_id, req.group_instance_id)
        if error is not None:
            out.reply = join_reply(error, req.member_id)
            return
        member = group.members[req.member_id]
        if group.is_in(PREPARING_REBALANCE):
            self._update_member(out, group, member, req, ticket)
            self._maybe_complete_join(out, group, now)
        elif group.is_in(COMPLETING_REBALANCE):
            if member.matches(req.protocols):
                out.reply = self._current_generation_reply(group, member, with_members=group.is_leader(member.member_id))
            else:
                self._update_member(out, group, member, req, ticket)
                self._prepare_rebalance(out, group, now, "metadata-changed", f"member={member.member_id}")
        elif group.is_in(STABLE):
            if group.is_leader(member.member_id) or not member.matches(req.protocols):
                reason = "leader-rejoin" if group.is_leader(member.member_id) else "metadata-changed"
                self._update_member(out, group, member, req, ticket)
                self._prepare_rebalance(out, group, now, reason, f"member={member.member_id}")
            else:
                out.reply = self._current_generation_reply(group, member, with_members=False)
        else:  # Empty: no members, so validation has already answered
            out.reply = join_reply(E.unknown_member_id, req.member_id)

    def _current_generation_reply(self, group: ClassicGroup, member: Member, with_members: bool) -> dict:
        return join_reply(E.none, member.member_id, group.generation, group.protocol_type, group.protocol_name,
                          group.leader_id or "", group.member_list() if with_members else ())

    def _update_member(self, out: Outcome, group: ClassicGroup, member: Member, req: JoinRequest, ticket: Any) -> None:
        if member.awaiting_join is not None and member.awaiting_join is not ticket:
            # a retried JoinGroup supersedes the parked one, which its client has given up on
            out.released.append((member.awaiting_join, join_reply(E.rebalance_in_progress, member.member_id)))
            group.set_awaiting_join(member, None)
        group.update_member(member, req.protocols, req.rebalance_timeout_ms, req.session_timeout_ms, ticket)

    def _add_member(self, out: Outcome, group: ClassicGroup, req: JoinRequest, member_id: str, ticket: Any,
                    now: Now) -> None:
        member = Member(member_id, req.group_instance_id, req.client_id or "", req.client_host,
                        req.rebalance_timeout_ms, req.session_timeout_ms, req.protocol_type, req.protocols,
                        awaiting_join=ticket, is_new=True)
        group.add(member)
        # sockets of parked joins are muted, so a new member that gave up would linger: it gets the
        # new-member join timeout instead of its session timeout until its first generation
        self._arm_session(out, group, member, now, NEW_MEMBER_JOIN_TIMEOUT_MS)
        detail = f"member={member_id}" + (f" instance={req.group_instance_id}" if req.group_instance_id else "")
        self._maybe_prepare_rebalance_or_complete_join(out, group, now, "member-joined", detail)

    def _replace_static_member(self, out: Outcome, group: ClassicGroup, req: JoinRequest, old_id: str,
                               ticket: Any, now: Now) -> None:
        """A static member re-joins with an empty member id (KIP-345, KIP-814; spec §3.10)."""
        old = group.members[old_id]
        if old.awaiting_join is not None:
            out.released.append((old.awaiting_join, join_reply(E.fenced_instance_id, old_id)))
        if old.awaiting_sync is not None:
            out.released.append((old.awaiting_sync, sync_reply(E.fenced_instance_id)))
        previous_leader = group.leader_id
        new_id = self.new_member_id(req.group_instance_id)
        member = group.replace_static_member(req.group_instance_id, old_id, new_id)
        self._arm_session(out, group, member, now, member.session_timeout_ms)
        group.update_member(member, req.protocols, req.rebalance_timeout_ms, req.session_timeout_ms, ticket)
        self.events.append(ev.StaticMemberReplaced(group.group_id, req.group_instance_id, old_id, new_id,
                                                   group.state.value))

        if group.is_in(STABLE):
            if group.select_protocol() != group.protocol_name:
                self._maybe_prepare_rebalance_or_complete_join(
                    out, group, now, "metadata-changed", f"instance={req.group_instance_id} changes the protocol")
                return
            # Same protocol: no rebalance. Persist the new member id, then answer from the stored
            # generation; the leader of a v9+ join is told to skip the assignment.
            out.records.append(Record(GroupMetadataKey(group.group_id), group.metadata_value()))

            def written(error: ErrorCode | None, at: Now) -> Outcome:
                done = Outcome()
                if error is not None:
                    if group.members.get(new_id) is not member:  # reverted: the instance has its old member
                        restored = group.members.get(group.static_members.get(req.group_instance_id))
                        if restored is not None:
                            self._arm_session(done, group, restored, at, restored.session_timeout_ms)
                    elif member.awaiting_join is not ticket or not group.is_in(STABLE):
                        return done  # a rebalance overtook the write: it answers (or answered) the join
                    else:  # timed out, so not reverted (it may still land): the client joins again
                        group.set_awaiting_join(member, None)
                    done.reply = join_reply(error, "", group.generation, group.protocol_type, group.protocol_name,
                                            previous_leader or "")
                    return done
                if member.awaiting_join is not ticket or group.members.get(new_id) is not member:
                    return done  # a rebalance overtook the write and answered the join
                group.set_awaiting_join(member, None)
                if req.version >= 9:
                    leader = group.is_leader(new_id)
                    done.reply = join_reply(E.none, new_id, group.generation, group.protocol_type,
                                            group.protocol_name, group.leader_id or "",
                                            group.member_list() if leader else (), skip_assignment=leader)
                else:
                    # v5–v8: report the leader as it was, so a returning leader does not assign
                    done.reply = join_reply(E.none, new_id, group.generation, group.protocol_type,
                                            group.protocol_name, previous_leader or "")
                return done

            out.after_write = written
        elif group.is_in(COMPLETING_REBALANCE):
            self._prepare_rebalance(out, group, now, "static-member-rejoin", f"instance={req.group_instance_id}")
        else:
            self._maybe_complete_join(out, group, now)

    # -- rebalancing ---------------------------------------------------------------------------

    def _maybe_prepare_rebalance_or_complete_join(self, out: Outcome, group: ClassicGroup, now: Now, reason: str,
                                                  detail: str = "") -> None:
        if group.can_rebalance():
            self._prepare_rebalance(out, group, now, reason, detail)
        elif group.is_in(PREPARING_REBALANCE):
            self._maybe_complete_join(out, group, now)

    def _prepare_rebalance(self, out: Outcome, group: ClassicGroup, now: Now, reason: str, detail: str = "") -> None:
        """`reason` is one of REBALANCE_REASONS (a metrics label); `detail` only goes to the log."""
        if group.is_in(COMPLETING_REBALANCE):
            self._reset_assignments_with_error(out, group, E.rebalance_in_progress, now)
        group.sync_deadline = None
        group.pending_sync.clear()
        initial = group.is_in(EMPTY)
        if initial:
            delay = self.settings.initial_rebalance_delay_ms
            group.initial_delay = (delay, max(group.rebalance_timeout_ms() - delay, 0))
            self._arm_join(out, group, now.mono + delay)
        group.transition_to(PREPARING_REBALANCE, now.wall)
        group.rebalance_started_at = now.mono
        self.events.append(ev.RebalanceStarted(group.group_id, group.generation, reason, detail, len(group.members)))
        if not initial:
            group.initial_delay = None
            if group.has_all_members_joined():
                self._complete_join(out, group, now)
            else:
                self._arm_join(out, group, now.mono + group.rebalance_timeout_ms())

    def _maybe_complete_join(self, out: Outcome, group: ClassicGroup, now: Now) -> None:
        if group.is_in(PREPARING_REBALANCE) and group.previous_state is not EMPTY and group.has_all_members_joined():
            self._complete_join(out, group, now)

    def _complete_join(self, out: Outcome, group: ClassicGroup, now: Now) -> None:
        group.join_deadline = None
        group.initial_delay = None
        for member in [m for m in group.members.values() if m.awaiting_join is None and m.group_instance_id is None]:
            self._remove_member(out, group, member.member_id)
            self.events.append(ev.MemberDidNotRejoin(group.group_id, member.member_id))
        if group.leader_id is None or group.members[group.leader_id].awaiting_join is None:
            group.leader_id = next((m.member_id for m in group.members.values() if m.awaiting_join is not None),
                                   group.leader_id if group.leader_id in group.members else None)
            if group.members and group.members[group.leader_id].awaiting_join is None:
                # only static members that have not re-joined are left: wait for them (or their expiry)
                self._arm_join(out, group, now.mono + group.rebalance_timeout_ms())
                return
        group.generation += 1
        if not group.members:
            group.protocol_name = None
            group.transition_to(EMPTY, now.wall)
            group.compute_subscribed_topics()
            out.records.append(Record(GroupMetadataKey(group.group_id), group.metadata_value()))
            self.events.append(ev.RebalanceCompleted(group.group_id, group.generation, "Empty", None, 0,
                                                     now.mono - group.rebalance_started_at, None))
            return
        group.protocol_name = group.select_protocol()
        group.compute_subscribed_topics()
        group.transition_to(COMPLETING_REBALANCE, now.wall)
        group.pending_sync.clear()
        for member in group.members.values():
            if member.awaiting_join is not None:
                leader = group.is_leader(member.member_id)
                out.released.append((member.awaiting_join, join_reply(
                    E.none, member.member_id, group.generation, group.protocol_type, group.protocol_name,
                    group.leader_id, group.member_list() if leader else ())))
                group.set_awaiting_join(member, None)
            self._arm_session(out, group, member, now, member.session_timeout_ms)
            member.is_new = False
            group.pending_sync.add(member.member_id)
        group.sync_deadline = now.mono + group.rebalance_timeout_ms()
        group.sync_generation = group.generation
        group.join_completed_at = now.mono
        out.timers.append((("sync", group.group_id), group.sync_deadline))
        self.events.append(ev.JoinPhaseCompleted(group.group_id, group.generation, group.protocol_name,
                                                 group.leader_id, len(group.members)))

    def _reset_assignments_with_error(self, out: Outcome, group: ClassicGroup, error: ErrorCode, now: Now) -> None:
        for member in group.members.values():
            member.assignment = member.propagated = b""
            if member.awaiting_sync is not None:
                out.released.append((member.awaiting_sync, sync_reply(error)))
                member.awaiting_sync = None
                self._arm_session(out, group, member, now, member.session_timeout_ms)

    def _remove_member(self, out: Outcome, group: ClassicGroup, member_id: str) -> Member | None:
        member = group.remove(member_id)
        if member is not None:
            # Kafka leaves a removed member's parked SyncGroup unanswered; a reply that never
            # comes would hold back every later reply on that connection, so it is answered
            if member.awaiting_join is not None:
                out.released.append((member.awaiting_join, join_reply(E.unknown_member_id, "")))
                member.awaiting_join = None
            if member.awaiting_sync is not None:
                out.released.append((member.awaiting_sync, sync_reply(E.unknown_member_id)))
                member.awaiting_sync = None
        return member

    def _validate_member(self, group: ClassicGroup, member_id: str, instance_id: str | None) -> ErrorCode | None:
        error = group.validate_member(member_id, instance_id)
        if error is E.fenced_instance_id:
            self.events.append(ev.StaticMemberFenced(group.group_id))
        return error

    # -- timers --------------------------------------------------------------------------------

    def _arm_session(self, out: Outcome, group: ClassicGroup, member: Member, now: Now, timeout_ms: int) -> None:
        member.deadline = now.mono + timeout_ms
        out.timers.append((("session", group.group_id, member.member_id), member.deadline))

    def _arm_join(self, out: Outcome, group: ClassicGroup, deadline: int) -> None:
        group.join_deadline = deadline
        out.timers.append((("join", group.group_id), deadline))

    def on_timer(self, key: tuple, now: Now) -> Outcome:
        """A timer fired. Deadlines may have moved since it was armed (heartbeats only move the
        deadline): then it is re-armed, not acted on."""
        out = Outcome()
        group = self.groups.get(key[1])
        if not isinstance(group, ClassicGroup):  # gone, or converted to a consumer group
            return out
        kind = key[0]
        if kind == "session":
            self._session_expired(out, group, key[2], now)
        elif kind == "join":
            if group.join_deadline is not None:
                if now.mono < group.join_deadline:
                    out.timers.append((key, group.join_deadline))
                else:
                    self._join_timer_expired(out, group, now)
        elif kind == "sync":
            if group.sync_deadline is not None:
                if now.mono < group.sync_deadline:
                    out.timers.append((key, group.sync_deadline))
                else:
                    self._sync_timer_expired(out, group, now)
        return out

    def _session_expired(self, out: Outcome, group: ClassicGroup, member_id: str, now: Now) -> None:
        pending_deadline = group.pending_join.get(member_id)
        if pending_deadline is not None:
            if now.mono < pending_deadline:
                out.timers.append((("session", group.group_id, member_id), pending_deadline))
                return
            del group.pending_join[member_id]
            self.events.append(ev.PendingMemberExpired(group.group_id, member_id))
            self._maybe_complete_join(out, group, now)
            return
        member = group.members.get(member_id)
        if member is None:
            return
        if now.mono < member.deadline:
            out.timers.append((("session", group.group_id, member_id), member.deadline))
            return
        if not member.is_new and (member.awaiting_join is not None or member.awaiting_sync is not None):
            return  # re-armed when its join completes or its sync is answered
        self.expire_member(out, group, member_id, now)

    def expire_member(self, out: Outcome, group: ClassicGroup, member_id: str, now: Now,
                      reason: str = "session-timeout") -> None:
        """Remove a member as its session expiry does (the timer's path, and an operator's forced one)."""
        member = self._remove_member(out, group, member_id)
        self.events.append(ev.MemberExpired(group.group_id, member_id, member.group_instance_id, group.generation,
                                            reason))
        if group.is_in(STABLE, COMPLETING_REBALANCE):
            self._prepare_rebalance(out, group, now, "session-expired", f"member={member_id}")
        elif group.is_in(PREPARING_REBALANCE):
            self._maybe_complete_join(out, group, now)

    def force_rebalance(self, out: Outcome, group: ClassicGroup, now: Now) -> None:
        """An operator's rebalance (fault injection): a new generation, as a member joining would start.
        A group without members, or already rebalancing, has nothing to start."""
        if group.members and group.can_rebalance():
            self._prepare_rebalance(out, group, now, "forced")

    def expire_members(self, out: Outcome, group: ClassicGroup, member_ids: list[str], now: Now) -> None:
        """An operator's expiry of these members (fault injection), one by one as their timers would."""
        for member_id in member_ids:
            self.expire_member(out, group, member_id, now, "forced")

    @staticmethod
    def owns_timer(key: tuple) -> bool:
        return key[0] in ("session", "join", "sync")

    def _join_timer_expired(self, out: Outcome, group: ClassicGroup, now: Now) -> None:
        if group.initial_delay is not None:
            delay, remaining = group.initial_delay
            if group.new_member_added and remaining != 0:
                group.new_member_added = False
                next_delay = min(self.settings.initial_rebalance_delay_ms, remaining)
                group.initial_delay = (next_delay, max(remaining - delay, 0))
                self._arm_join(out, group, now.mono + next_delay)
                return
        self._complete_join(out, group, now)

    def _sync_timer_expired(self, out: Outcome, group: ClassicGroup, now: Now) -> None:
        group.sync_deadline = None
        if group.sync_generation != group.generation or not group.is_in(COMPLETING_REBALANCE, STABLE):
            return
        if not group.pending_sync:
            return
        missing = sorted(group.pending_sync)
        for member_id in missing:
            self._remove_member(out, group, member_id)
        self.events.append(ev.MembersSyncTimedOut(group.group_id, tuple(missing), group.generation))
        self._prepare_rebalance(out, group, now, "sync-timeout", f"members={len(missing)}")

    # =========================================================================================
    # SyncGroup (spec §4)

    def sync(self, req: SyncRequest, ticket: Any, now: Now) -> Outcome:
        group_id, generation, member_id = req.group_id, req.generation, req.member_id
        protocol_type, protocol_name = req.protocol_type, req.protocol_name
        out = Outcome()
        if group_id == "":
            out.reply = sync_reply(E.invalid_group_id)
            return out
        group = self.groups.get(group_id)
        if group is None or group.is_in(EMPTY):
            out.reply = sync_reply(E.unknown_member_id)
            return out
        error = self._validate_member(group, member_id, req.group_instance_id)
        if error is None and generation != group.generation:
            error = E.illegal_generation
        if error is None and ((protocol_type is not None and group.protocol_type is not None
                               and protocol_type != group.protocol_type) or
                              (protocol_name is not None and group.protocol_name is not None
                               and protocol_name != group.protocol_name)):
            error = E.inconsistent_group_protocol
        if error is not None:
            out.reply = sync_reply(error)
            return out
        member = group.members[member_id]
        if group.is_in(PREPARING_REBALANCE):
            out.reply = sync_reply(E.rebalance_in_progress)
        elif group.is_in(STABLE):
            group.pending_sync.discard(member_id)
            out.reply = sync_reply(E.none, group.protocol_type, group.protocol_name, member.assignment)
        else:  # CompletingRebalance: park until the leader's assignment is durable
            if member.awaiting_sync is not None and member.awaiting_sync is not ticket:
                # a retried SyncGroup supersedes the parked one, which its client has given up on
                out.released.append((member.awaiting_sync, sync_reply(E.rebalance_in_progress)))
            member.awaiting_sync = ticket
            group.pending_sync.discard(member_id)
            if not group.pending_sync:
                group.sync_deadline = None
            if group.is_leader(member_id):
                assigned = {m: req.assignments.get(m, b"") for m in group.members}
                out.records.append(Record(GroupMetadataKey(group_id), group.metadata_value(assigned)))
                out.after_write = lambda error, at, g=group.generation: self._assignment_written(group, g, error, at)
        return out

    def _assignment_written(self, group: ClassicGroup, generation: int, error: ErrorCode | None, now: Now) -> Outcome:
        out = Outcome()
        if not group.is_in(COMPLETING_REBALANCE) or group.generation != generation:
            return out  # a new rebalance already answered the parked syncs
        if error is not None:
            self.events.append(ev.AssignmentWriteFailed(group.group_id, generation, error.name))
            self._reset_assignments_with_error(out, group, error, now)
            self._prepare_rebalance(out, group, now, "write-failed", error.name)
            return out
        for member in group.members.values():  # apply() has stored the assignments
            member.propagated = member.assignment
            if member.awaiting_sync is not None:
                out.released.append((member.awaiting_sync, sync_reply(
                    E.none, group.protocol_type, group.protocol_name, member.assignment)))
                member.awaiting_sync = None
                self._arm_session(out, group, member, now, member.session_timeout_ms)
        group.transition_to(STABLE, now.wall)
        self.events.append(ev.RebalanceCompleted(group.group_id, generation, "Stable", group.protocol_name,
                                                 len(group.members), now.mono - group.rebalance_started_at,
                                                 now.mono - group.join_completed_at))
        return out

    # =========================================================================================
    # Heartbeat (spec §5)

    def heartbeat(self, req: HeartbeatRequest, now: Now) -> ErrorCode:
        """The heartbeat error; a valid one only moves the member's session deadline."""
        group_id, member_id = req.group_id, req.member_id
        if not group_id:
            return E.invalid_group_id
        group = self.groups.get(group_id)
        if group is None:
            return E.unknown_member_id
        if req.group_instance_id is not None or member_id not in group.members:  # else valid: the hot path
            error = self._validate_member(group, member_id, req.group_instance_id)
            if error is not None:
                return error
        if req.generation != group.generation:
            return E.illegal_generation
        state = group.state
        if state is EMPTY:
            return E.unknown_member_id
        member = group.members[member_id]
        member.deadline = now.mono + member.session_timeout_ms  # lazy: the armed timer re-arms itself
        return E.rebalance_in_progress if state is PREPARING_REBALANCE else E.none

    # =========================================================================================
    # LeaveGroup (spec §6)

    def leave(self, req: LeaveRequest, now: Now) -> Outcome:
        """Reply: {"error_code", "members": [(member_id, instance_id, error)]}."""
        group_id, identities = req.group_id, req.members
        out = Outcome()
        if group_id == "":
            out.reply = {"error_code": E.invalid_group_id, "members": []}
            return out
        group = self.groups.get(group_id)
        if group is None:
            out.reply = {"error_code": E.none,
                         "members": [(m, i, E.unknown_member_id) for m, i in identities]}
            return out
        results, removed = [], []
        for member_id, instance_id in identities:
            if member_id == "":
                target = group.static_members.get(instance_id) if instance_id is not None else None
                error = None if target is not None else E.unknown_member_id
            elif member_id in group.pending_join:
                del group.pending_join[member_id]
                results.append((member_id, instance_id, E.none))
                removed.append(member_id)
                continue
            else:
                error = self._validate_member(group, member_id, instance_id)
                target = member_id
            if error is None:
                self._remove_member(out, group, target)
                removed.append(target)
            results.append((member_id, instance_id, error or E.none))
        if removed:
            self.events.append(ev.MembersLeft(group_id, tuple(removed)))
            if group.is_in(STABLE, COMPLETING_REBALANCE):
                self._prepare_rebalance(out, group, now, "member-left", f"members={len(removed)}")
            elif group.is_in(PREPARING_REBALANCE):
                self._maybe_complete_join(out, group, now)
        out.reply = {"error_code": E.none, "members": results}
        return out

