"""The shell's side of the core's events (coordinator/core/events.py): each becomes the log line and the
metrics it always was. Dispatch is by type, so a new event without a handler fails loudly (KeyError
in tests) instead of silently dropping a metric."""

from __future__ import annotations

import logging

from groupd.coordinator.core import events as ev

from . import metrics as m

log = logging.getLogger("groupd.group")


def _join_received(e: ev.JoinReceived) -> None:
    log.debug("join group=%s member=%s instance=%s version=%d", e.group_id, e.member_id, e.instance_id, e.version)


def _rebalance_started(e: ev.RebalanceStarted) -> None:
    m.REBALANCES_STARTED.labels(e.reason).inc()
    log.info("rebalance started group=%s generation=%d reason=%s %s members=%d", e.group_id, e.generation, e.reason,
             e.detail, e.members)


def _join_phase_completed(e: ev.JoinPhaseCompleted) -> None:
    log.info("join phase completed group=%s generation=%d protocol=%s leader=%s members=%d", e.group_id,
             e.generation, e.protocol, e.leader, e.members)


def _rebalance_completed(e: ev.RebalanceCompleted) -> None:
    m.REBALANCES_COMPLETED.labels(e.state).inc()
    m.REBALANCE_SECONDS.observe(e.rebalance_ms / 1000)
    if e.sync_ms is None:
        log.info("rebalance completed group=%s generation=%d state=Empty members=0 rebalance_ms=%d", e.group_id,
                 e.generation, e.rebalance_ms)
    else:
        log.info("rebalance completed group=%s generation=%d protocol=%s members=%d rebalance_ms=%d sync_ms=%d",
                 e.group_id, e.generation, e.protocol, e.members, e.rebalance_ms, e.sync_ms)


def _assignment_write_failed(e: ev.AssignmentWriteFailed) -> None:
    log.warning("assignment write failed group=%s generation=%d error=%s", e.group_id, e.generation, e.error)


def _member_expired(e: ev.MemberExpired) -> None:
    m.MEMBERS_EXPIRED.labels(e.reason).inc()
    log.info("member expired group=%s member=%s instance=%s reason=%s generation=%d", e.group_id,
             e.member_id, e.instance_id, e.reason, e.generation)


def _members_sync_timed_out(e: ev.MembersSyncTimedOut) -> None:
    m.MEMBERS_EXPIRED.labels("sync-timeout").inc(len(e.members))
    log.info("members removed group=%s members=%s reason=sync-timeout generation=%d", e.group_id,
             ",".join(e.members), e.generation)


def _member_did_not_rejoin(e: ev.MemberDidNotRejoin) -> None:
    log.info("member removed group=%s member=%s reason=did-not-rejoin", e.group_id, e.member_id)


def _pending_member_expired(e: ev.PendingMemberExpired) -> None:
    log.info("pending member expired group=%s member=%s", e.group_id, e.member_id)


def _members_left(e: ev.MembersLeft) -> None:
    log.info("members left group=%s members=%s", e.group_id, ",".join(e.members))


def _static_member_replaced(e: ev.StaticMemberReplaced) -> None:
    m.STATIC_REPLACED.inc()
    log.info("static member replaced group=%s instance=%s old=%s new=%s state=%s", e.group_id, e.instance_id,
             e.old_member_id, e.new_member_id, e.state)


def _static_member_fenced(e: ev.StaticMemberFenced) -> None:
    m.STATIC_FENCED.inc()


def _group_deleted(e: ev.GroupDeleted) -> None:
    m.GROUPS_REMOVED.labels("deleted").inc()
    m.OFFSETS_REMOVED.labels("deleted").inc(e.offsets)
    log.info("group deleted group=%s offsets=%d", e.group_id, e.offsets)


def _offsets_expired(e: ev.OffsetsExpired) -> None:
    m.OFFSETS_REMOVED.labels("expired").inc(e.offsets)
    m.GROUPS_REMOVED.labels("expired").inc(e.groups)
    log.info("expired partition=%d offsets=%d groups=%d", e.partition, e.offsets, e.groups)


def _consumer_epoch_bumped(e: ev.ConsumerGroupEpochBumped) -> None:
    m.CONSUMER_EPOCH_BUMPS.labels(e.reason).inc()
    log.info("group epoch bumped group=%s type=consumer epoch=%d reason=%s", e.group_id, e.epoch, e.reason)


def _consumer_regex_resolution_failed(e: ev.ConsumerRegexResolutionFailed) -> None:
    log.error("regex resolution failed group=%s type=consumer: %s", e.group_id, e.error)


def _consumer_member_joined(e: ev.ConsumerMemberJoined) -> None:
    log.info("member joined group=%s type=consumer member=%s instance=%s epoch=%d", e.group_id, e.member_id,
             e.instance_id, e.group_epoch)


def _consumer_member_left(e: ev.ConsumerMemberLeft) -> None:
    log.info("member left group=%s type=consumer member=%s instance=%s temporary=%s", e.group_id, e.member_id,
             e.instance_id, e.temporary)


def _consumer_member_fenced(e: ev.ConsumerMemberFenced) -> None:
    m.MEMBERS_EXPIRED.labels(e.reason).inc()
    log.info("member fenced group=%s type=consumer member=%s instance=%s reason=%s", e.group_id, e.member_id,
             e.instance_id, e.reason)


def _consumer_static_member_replaced(e: ev.ConsumerStaticMemberReplaced) -> None:
    m.STATIC_REPLACED.inc()
    log.info("static member replaced group=%s type=consumer instance=%s old=%s new=%s", e.group_id, e.instance_id,
             e.old_member_id, e.new_member_id)


def _consumer_target_computed(e: ev.ConsumerTargetAssignmentComputed) -> None:
    m.TARGET_ASSIGNMENT_SECONDS.observe(e.ms / 1000)
    log.info("target assignment computed group=%s epoch=%d members=%d assignor=%s ms=%.2f", e.group_id, e.epoch,
             e.members, e.assignor, e.ms)


def _consumer_assignment_changed(e: ev.ConsumerAssignmentChanged) -> None:
    log.debug("assignment changed group=%s member=%s epoch=%d partitions=%d", e.group_id, e.member_id,
              e.member_epoch, e.partitions)


def _share_epoch_bumped(e: ev.ShareGroupEpochBumped) -> None:
    log.info("group epoch bumped group=%s type=share epoch=%d reason=%s", e.group_id, e.epoch, e.reason)


def _share_member_joined(e: ev.ShareMemberJoined) -> None:
    log.info("member joined group=%s type=share member=%s epoch=%d", e.group_id, e.member_id, e.group_epoch)


def _share_member_left(e: ev.ShareMemberLeft) -> None:
    log.info("member left group=%s type=share member=%s", e.group_id, e.member_id)


def _share_member_fenced(e: ev.ShareMemberFenced) -> None:
    m.MEMBERS_EXPIRED.labels(e.reason).inc()
    log.info("member fenced group=%s type=share member=%s reason=%s", e.group_id, e.member_id, e.reason)


def _streams_epoch_bumped(e: ev.StreamsGroupEpochBumped) -> None:
    m.STREAMS_REBALANCES.labels(e.reason).inc()
    log.info("group epoch bumped group=%s type=streams epoch=%d reason=%s", e.group_id, e.epoch, e.reason)


def _streams_member_joined(e: ev.StreamsMemberJoined) -> None:
    log.info("member joined group=%s type=streams member=%s epoch=%d", e.group_id, e.member_id, e.group_epoch)


def _streams_member_left(e: ev.StreamsMemberLeft) -> None:
    log.info("member left group=%s type=streams member=%s", e.group_id, e.member_id)


def _streams_member_fenced(e: ev.StreamsMemberFenced) -> None:
    m.MEMBERS_EXPIRED.labels(e.reason).inc()
    log.info("member fenced group=%s type=streams member=%s reason=%s", e.group_id, e.member_id, e.reason)


def _streams_topology_configured(e: ev.StreamsTopologyConfigured) -> None:
    log.info("topology configured group=%s topology_epoch=%d status=%s%s", e.group_id, e.topology_epoch, e.status,
             f": {e.detail}" if e.detail else "")


def _streams_shutdown_requested(e: ev.StreamsShutdownRequested) -> None:
    log.warning("application shutdown requested group=%s member=%s", e.group_id, e.member_id)


def _group_converted(e: ev.GroupConverted) -> None:
    m.CONVERSIONS.labels(e.direction).inc()
    log.info("group converted group=%s direction=%s to=%s members=%d", e.group_id, e.direction,
             "consumer" if e.direction == "upgrade" else "classic", e.members)


def _upgrade_refused(e: ev.UpgradeRefused) -> None:
    """Kafka's levels: INFO when its validateOnlineUpgrade refuses (policy, protocol type, size),
    WARN when the conversion finds a malformed embedded protocol or a custom assignor's userData."""
    level = logging.WARNING if e.reason in ("malformed", "custom-assignor") else logging.INFO
    log.log(level, "upgrade refused group=%s reason=%s: %s%s", e.group_id, e.reason, e.message,
            f" ({e.detail})" if e.detail else "")


HANDLERS = {
    ev.GroupConverted: _group_converted,
    ev.UpgradeRefused: _upgrade_refused,
    ev.ConsumerGroupEpochBumped: _consumer_epoch_bumped,
    ev.ConsumerRegexResolutionFailed: _consumer_regex_resolution_failed,
    ev.ConsumerMemberJoined: _consumer_member_joined,
    ev.ConsumerMemberLeft: _consumer_member_left,
    ev.ConsumerMemberFenced: _consumer_member_fenced,
    ev.ConsumerStaticMemberReplaced: _consumer_static_member_replaced,
    ev.ConsumerTargetAssignmentComputed: _consumer_target_computed,
    ev.ConsumerAssignmentChanged: _consumer_assignment_changed,
    ev.ShareGroupEpochBumped: _share_epoch_bumped,
    ev.ShareMemberJoined: _share_member_joined,
    ev.ShareMemberLeft: _share_member_left,
    ev.ShareMemberFenced: _share_member_fenced,
    ev.StreamsGroupEpochBumped: _streams_epoch_bumped,
    ev.StreamsMemberJoined: _streams_member_joined,
    ev.StreamsMemberLeft: _streams_member_left,
    ev.StreamsMemberFenced: _streams_member_fenced,
    ev.StreamsTopologyConfigured: _streams_topology_configured,
    ev.StreamsShutdownRequested: _streams_shutdown_requested,
    ev.JoinReceived: _join_received,
    ev.RebalanceStarted: _rebalance_started,
    ev.JoinPhaseCompleted: _join_phase_completed,
    ev.RebalanceCompleted: _rebalance_completed,
    ev.AssignmentWriteFailed: _assignment_write_failed,
    ev.MemberExpired: _member_expired,
    ev.MembersSyncTimedOut: _members_sync_timed_out,
    ev.MemberDidNotRejoin: _member_did_not_rejoin,
    ev.PendingMemberExpired: _pending_member_expired,
    ev.MembersLeft: _members_left,
    ev.StaticMemberReplaced: _static_member_replaced,
    ev.StaticMemberFenced: _static_member_fenced,
    ev.GroupDeleted: _group_deleted,
    ev.OffsetsExpired: _offsets_expired,
}


def emit(events: list) -> None:
    for event in events:
        HANDLERS[type(event)](event)
