"""Classic-protocol members inside a consumer group (spec §7.3; Kafka's classicGroup*ToConsumerGroup):
their JoinGroup runs the consumer machine's join/heartbeat step with the owned partitions of their
subscription, SyncGroup hands out their current assignment as a ConsumerProtocolAssignment, and
Heartbeat tells them to re-join while they have a reconciliation to do. Sans-IO.
"""

from __future__ import annotations

from groupd.coordinator.core import events as ev
from groupd.coordinator.core.classic.replies import join_reply, sync_reply
from groupd.coordinator.core.classic.requests import HeartbeatRequest, JoinRequest, LeaveRequest, SyncRequest
from groupd.coordinator.core.clock import Now
from groupd.coordinator.core.group import static_member_error
from groupd.coordinator.core.outcome import Outcome, reply_when_written
from groupd.protocol import ErrorCode
from groupd.protocol.consumer import BadConsumerProtocol, assignment_version, decode_subscription, encode_assignment
from groupd.storage.consumer_records import ClassicMemberMetadata, ClassicProtocol

from .group import ConsumerGroup, ConsumerMember
from .machine import ConsumerHeartbeatRequest, ConsumerMachine, TopicsImage
from .migration import can_downgrade, downgrade_records
from .reconciliation import FencedMemberEpoch, MemberState

E = ErrorCode


class ClassicMembers:
    def __init__(self, machine: ConsumerMachine) -> None:
        self.machine = machine

    # -- JoinGroup ------------------------------------------------------------------------------

    def join(self, group: ConsumerGroup, req: JoinRequest, topics: TopicsImage, now: Now) -> Outcome:
        m = self.machine
        names = [name for name, _ in req.protocols]
        if not group.supports_classic_protocols(req.protocol_type, set(names)):
            return Outcome(reply=join_reply(E.inconsistent_group_protocol, req.member_id))
        member_id, instance_id = req.member_id, req.group_instance_id
        if instance_id is not None and member_id:  # a known static member re-joining must hold its instance
            error = static_member_error(group.static_members, instance_id, member_id)
            if error is not None:
                return Outcome(reply=join_reply(error, req.member_id))
        member = group.members.get(member_id) if member_id else None
        if member is not None and member.classic is None:  # a consumer-protocol member's id
            return Outcome(reply=join_reply(E.unknown_member_id, req.member_id))
        if member is None:
            if len(group.members) >= m.settings.max_size:
                return Outcome(reply=join_reply(E.group_max_size_reached, req.member_id))
            if not member_id:
                # a new id even for a static member: the one it replaces (any protocol) is fenced
                member_id = m.new_member_id()
                if req.version >= 4 and instance_id is None:  # the id first, then the join
                    return Outcome(reply=join_reply(E.member_id_required, member_id))
        try:
            subscription = decode_subscription(req.protocols[0][1])
        except BadConsumerProtocol:
            return Outcome(reply=join_reply(E.inconsistent_group_protocol, req.member_id))
        owned = [(topics.by_name[t].topic_id, ps) for t, ps in subscription.owned_partitions.items()
                 if t in topics.by_name]
        hb = ConsumerHeartbeatRequest(  # "" regex: a classic member subscribes by names only
            group.group_id, member_id, member.member_epoch if member is not None else 0, req.group_instance_id,
            subscription.rack_id, req.rebalance_timeout_ms, subscription.topics, "", None, owned,
            req.client_id, req.client_host,
            classic=ClassicMemberMetadata(req.session_timeout_ms,
                                          tuple(ClassicProtocol(n, meta) for n, meta in req.protocols)))
        replaced = group.members.get(group.static_members.get(instance_id, "")) if member is None else None
        if replaced is not None and replaced.classic is None:
            if can_downgrade(list(group.members.values()), m.settings.migration_policy, m.settings.classic_max_size,
                             replacing=replaced):
                return self._downgrade_replacing(group, replaced, hb, names, now)
        try:
            out = m.join_or_heartbeat(hb, topics, now)
        except FencedMemberEpoch:
            return Outcome(reply=join_reply(E.unknown_member_id, req.member_id))
        if out.reply["error_code"] != E.none:
            out.reply = join_reply(out.reply["error_code"], req.member_id)
            return out
        # no client-side assignment: every member is a follower, its assignment comes in SyncGroup
        # it must sync within its rebalance timeout (Kafka's sync timeout), and has re-joined
        self._expect(out, group.group_id, member_id, now.mono + req.rebalance_timeout_ms, "sync-timeout")
        reply = join_reply(E.none, member_id, out.reply["member_epoch"], "consumer",
                           self._protocol_name(group, names))
        reply_when_written(out, reply, lambda error: join_reply(error, member_id))
        return out

    def _downgrade_replacing(self, group: ConsumerGroup, replaced: ConsumerMember, hb: ConsumerHeartbeatRequest,
                             names: list[str], now: Now) -> Outcome:
        """A classic static member replaces the last consumer-protocol member (its instance id): the
        group becomes a classic group in which the new member holds the replaced one's partitions
        (spec §7.4, Kafka's validateOnlineDowngradeWithReplacedMember). A classic rebalance follows
        when its subscription differs (KAFKA-19546) or the group had not reached its target
        assignment (KAFKA-20273: the assignment the classic group starts from would be stale)."""
        m = self.machine
        metadata = m.updated_metadata(replaced.metadata, hb)
        joining = ConsumerMember(hb.member_id, metadata, assignment=replaced.assignment)
        subscription_changed = (set(metadata.subscribed_topic_names) != set(replaced.subscribed_topic_names)
                                or replaced.subscribed_topic_regex is not None)
        rebalance = subscription_changed or not _at_target(group, replaced)
        staying = [x for x in group.members.values() if x is not replaced] + [joining]
        out = Outcome(records=downgrade_records(group, staying, now.wall))
        m.events.append(ev.ConsumerStaticMemberReplaced(group.group_id, hb.instance_id, replaced.member_id,
                                                        hb.member_id))
        m.events.append(ev.GroupConverted(group.group_id, "downgrade", len(staying)))
        for member_id in group.members:
            m.forget(group.group_id, member_id)
        out.after_write = lambda error, at: (Outcome() if error is not None
                                             else m.downgraded(group.group_id, at, rebalance))
        reply = join_reply(E.none, hb.member_id, group.group_epoch, "consumer", names[0])
        reply_when_written(out, reply, lambda error: join_reply(error, hb.member_id))
        return out

    @staticmethod
    def _protocol_name(group: ConsumerGroup, names: list[str]) -> str:
        """The member's first protocol every classic member of the group supports."""
        for name in names:
            if all(name in {p.name for p in m.classic.supported_protocols}
                   for m in group.members.values() if m.classic is not None):
                return name
        return names[0]

    # -- SyncGroup, Heartbeat ---------------------------------------------------------------------

    def _member(self, group: ConsumerGroup, member_id: str, instance_id: str | None,
                generation: int) -> ConsumerMember | ErrorCode:
        error = static_member_error(group.static_members, instance_id, member_id)
        if error is not None:
            return error
        member = group.members.get(member_id)
        if member is None or member.classic is None:
            return E.unknown_member_id
        if generation != member.member_epoch:
            return E.illegal_generation
        return member

    def sync(self, group: ConsumerGroup, req: SyncRequest, topics: TopicsImage, now: Now) -> Outcome:
        member = self._member(group, req.member_id, req.group_instance_id, req.generation)
        if isinstance(member, ErrorCode):
            return Outcome(reply=sync_reply(member))
        names = [p.name for p in member.classic.supported_protocols]
        if ((req.protocol_type is not None and req.protocol_type != "consumer")
                or (req.protocol_name is not None and req.protocol_name not in names)):
            return Outcome(reply=sync_reply(E.inconsistent_group_protocol))
        self.machine.arm_session(None, group.group_id, member.member_id, member.metadata, now)
        self.machine.classic_deadlines.pop((group.group_id, member.member_id), None)  # synced in time
        if group.group_epoch > member.member_epoch and member.assignment.state is not MemberState.UNREVOKED_PARTITIONS:
            self._expect(None, group.group_id, member.member_id, self._join_by(member, now), "join-timeout")
            return Outcome(reply=sync_reply(E.rebalance_in_progress))
        assignment = {topics.by_id[t].name: sorted(ps)
                      for t, ps in sorted(member.assignment.assigned_partitions.items()) if ps and t in topics.by_id}
        first = member.classic.supported_protocols[0].metadata  # what Kafka reads the version from
        return Outcome(reply=sync_reply(E.none, "consumer", req.protocol_name or self._protocol_name(group, names),
                                        encode_assignment(assignment, None, assignment_version(first))))

    def heartbeat(self, group: ConsumerGroup, req: HeartbeatRequest, now: Now) -> ErrorCode:
        member = self._member(group, req.member_id, req.group_instance_id, req.generation)
        if isinstance(member, ErrorCode):
            return member
        self.machine.arm_session(None, group.group_id, member.member_id, member.metadata, now)
        a = member.assignment
        if (member.member_epoch < group.group_epoch or a.state is MemberState.UNREVOKED_PARTITIONS
                or (a.state is MemberState.UNRELEASED_PARTITIONS and self._released(group, member))):
            # re-join (to give up partitions, or take released ones) within the rebalance timeout
            key = (group.group_id, member.member_id)
            if self.machine.classic_deadlines.get(key, (0, ""))[1] != "join-timeout":
                self._expect(None, group.group_id, member.member_id, self._join_by(member, now), "join-timeout")
            return E.rebalance_in_progress
        return E.none

    @staticmethod
    def _join_by(member: ConsumerMember, now: Now) -> int:
        return now.mono + member.metadata.rebalance_timeout_ms

    def _expect(self, out: Outcome | None, group_id: str, member_id: str, deadline: int, reason: str) -> None:
        """A join or sync deadline, checked by the member's session timer (armed earlier here when
        an outcome can carry the timer; a heartbeat's is checked when the session timer fires)."""
        self.machine.classic_deadlines[(group_id, member_id)] = (deadline, reason)
        if out is not None:
            out.timers.append((("consumer-session", group_id, member_id), deadline))

    @staticmethod
    def _released(group: ConsumerGroup, member: ConsumerMember) -> bool:
        """Some partition of its target it does not own yet is owned by nobody."""
        assigned = member.assignment.assigned_partitions
        return any(p not in assigned.get(t, ()) and group.partition_epoch(t, p) == -1
                   for t, ps in group.target_of(member.member_id).items() for p in ps)

    # -- LeaveGroup -------------------------------------------------------------------------------

    def leave(self, group: ConsumerGroup, req: LeaveRequest, now: Now) -> Outcome:
        """Each identity leaves (an instance id alone is an admin removal); one new group epoch."""
        out, results, leavers = Outcome(), [], []
        for member_id, instance_id in req.members:
            if instance_id is not None:
                holder = group.static_members.get(instance_id)
                if holder is None or (member_id and holder != member_id):
                    results.append((member_id, instance_id,
                                    E.unknown_member_id if holder is None else E.fenced_instance_id))
                    continue
                member_id = holder
            member = group.members.get(member_id)
            if member is None:
                results.append((member_id, instance_id, E.unknown_member_id))
                continue
            results.append((member_id, instance_id, E.none))
            if member not in leavers:
                leavers.append(member)
                self.machine.events.append(ev.ConsumerMemberLeft(group.group_id, member_id, instance_id,
                                                                 temporary=False))
        if leavers:
            self.machine.remove_members(out, group, leavers, "member-left", now)
        out.reply = {"error_code": E.none, "members": results}
        if out.records:
            reply_when_written(out, out.reply, lambda error: {"error_code": error, "members": []})
        return out


def _at_target(group: ConsumerGroup, replaced: ConsumerMember) -> bool:
    """Every member holds its target of the group's epoch (the replaced one may have left with -2:
    its partitions are what counts, the replacement takes them)."""
    return (group.group_epoch == group.assignment_epoch and group.unreconciled() == 0
            and all(m.member_epoch == group.assignment_epoch and m.assignment.state is MemberState.STABLE
                    for m in group.members.values() if m is not replaced))
