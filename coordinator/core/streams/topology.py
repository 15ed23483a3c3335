"""A streams group's topology (KIP-1071) against the topics that exist: Kafka's InternalTopicManager.
`configure` resolves each subtopology's number of tasks, derives the partition counts of repartition
topics (from the subtopologies that write to them) and of changelog topics (one partition per task),
enforces copartition groups, and lists the internal topics still to be created. The result is either
ready (tasks can be assigned), waiting for internal topics (MISSING_INTERNAL_TOPICS: the shell
creates them), or refused with a status (MISSING_SOURCE_TOPICS, INCORRECTLY_PARTITIONED_TOPICS) or an
invalid topology (STREAMS_INVALID_TOPOLOGY). Pure: it reads the topology record and a topics image.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

from groupd.storage.streams_records import StreamsGroupTopologyValue, StreamsTopicInfo

# StreamsGroupHeartbeatResponse's status codes
STALE_TOPOLOGY = 0
MISSING_SOURCE_TOPICS = 1
INCORRECTLY_PARTITIONED_TOPICS = 2
MISSING_INTERNAL_TOPICS = 3
SHUTDOWN_APPLICATION = 4
ASSIGNMENT_DELAYED = 5
STATUS_NAMES = {STALE_TOPOLOGY: "STALE_TOPOLOGY", MISSING_SOURCE_TOPICS: "MISSING_SOURCE_TOPICS",
                INCORRECTLY_PARTITIONED_TOPICS: "INCORRECTLY_PARTITIONED_TOPICS",
                MISSING_INTERNAL_TOPICS: "MISSING_INTERNAL_TOPICS", SHUTDOWN_APPLICATION: "SHUTDOWN_APPLICATION",
                ASSIGNMENT_DELAYED: "ASSIGNMENT_DELAYED"}


class InvalidTopology(Exception):
    """STREAMS_INVALID_TOPOLOGY, with Kafka's message."""


@dataclasses.dataclass(frozen=True, slots=True)
class InternalTopic:
    """An internal topic to create: CreateTopics' name, partitions, replication factor (-1: the
    broker's default) and configs."""

    name: str
    partitions: int
    replication_factor: int
    configs: tuple[tuple[str, str], ...]


@dataclasses.dataclass(frozen=True, slots=True)
class ConfiguredSubtopology:
    subtopology_id: str
    tasks: int  # partitions of its widest source topic: one task per partition
    source_topics: tuple[str, ...]  # the external ones, then the repartition ones it reads
    repartition_sink_topics: tuple[str, ...]
    changelogs: dict[str, int]  # name → partitions
    repartition_sources: dict[str, int]  # name → partitions


@dataclasses.dataclass(frozen=True, slots=True)
class ConfiguredTopology:
    topology_epoch: int
    metadata_hash: int
    subtopologies: dict[str, ConfiguredSubtopology] | None  # None: refused (see status)
    status: int | None = None  # MISSING_SOURCE_TOPICS or INCORRECTLY_PARTITIONED_TOPICS
    detail: str = ""
    to_create: tuple[InternalTopic, ...] = ()

    @property
    def ready(self) -> bool:
        return self.subtopologies is not None and not self.to_create

    def tasks(self) -> dict[str, int]:
        """subtopology id → its number of tasks (empty unless ready)."""
        return {s: c.tasks for s, c in self.subtopologies.items()} if self.ready else {}


def validate(topology: StreamsGroupTopologyValue) -> None:
    """What Kafka checks of a topology sent on join (GroupCoordinatorService.throwIfInvalidTopology)."""
    for sub in topology.subtopologies:
        for changelog in sub.state_changelog_topics:
            if changelog.partitions != 0:
                raise InvalidTopology(f"Changelog topic {changelog.name} must have an undefined partition count, "
                                      f"but it is set to {changelog.partitions}.")


def configure(topology: StreamsGroupTopologyValue, partitions_of: Mapping[str, int],
              metadata_hash: int) -> ConfiguredTopology:
    """`partitions_of`: topic name → partitions of the topics that exist."""
    epoch = topology.epoch
    repartition: dict[str, StreamsTopicInfo] = {t.name: t for s in topology.subtopologies
                                                for t in s.repartition_source_topics}
    missing = sorted({t for s in topology.subtopologies for t in s.source_topics
                      if t not in repartition and t not in partitions_of})
    if missing:
        return ConfiguredTopology(epoch, metadata_hash, None, MISSING_SOURCE_TOPICS,
                                  f"Source topics {', '.join(missing)} are missing.")
    counts = _repartition_counts(topology, repartition, partitions_of)
    refusal = _copartition(topology, repartition, counts, partitions_of)
    if refusal is not None:
        return ConfiguredTopology(epoch, metadata_hash, None, INCORRECTLY_PARTITIONED_TOPICS, refusal)

    subtopologies: dict[str, ConfiguredSubtopology] = {}
    wanted: dict[str, InternalTopic] = {}
    for sub in topology.subtopologies:
        external = [t for t in sub.source_topics if t not in repartition]
        sources = {t: partitions_of[t] for t in external}
        sources.update({t.name: counts[t.name] for t in sub.repartition_source_topics})
        tasks = max(sources.values(), default=0)
        changelogs = {t.name: tasks for t in sub.state_changelog_topics}
        subtopologies[sub.subtopology_id] = ConfiguredSubtopology(
            sub.subtopology_id, tasks, tuple(external) + tuple(t.name for t in sub.repartition_source_topics),
            tuple(sub.repartition_sink_topics), changelogs,
            {t.name: counts[t.name] for t in sub.repartition_source_topics})
        for info in sub.repartition_source_topics:
            wanted[info.name] = _internal(info, counts[info.name])
        for info in sub.state_changelog_topics:
            wanted[info.name] = _internal(info, tasks)

    wrong = sorted(name for name, topic in wanted.items()
                   if name in partitions_of and partitions_of[name] != topic.partitions)
    if wrong:
        detail = ", ".join(f"{n} (expected {wanted[n].partitions} partitions, found {partitions_of[n]})" for n in wrong)
        return ConfiguredTopology(epoch, metadata_hash, None, INCORRECTLY_PARTITIONED_TOPICS,
                                  f"Existing internal topics have invalid number of partitions: {detail}")
    to_create = tuple(wanted[n] for n in sorted(wanted) if n not in partitions_of)
    return ConfiguredTopology(epoch, metadata_hash, subtopologies, None, "", to_create)


def _internal(info: StreamsTopicInfo, partitions: int) -> InternalTopic:
    return InternalTopic(info.name, partitions, info.replication_factor or -1,
                         tuple((c.key, c.value) for c in info.topic_configs))


def _repartition_counts(topology: StreamsGroupTopologyValue, repartition: Mapping[str, StreamsTopicInfo],
                        partitions_of: Mapping[str, int]) -> dict[str, int]:
    """Kafka's RepartitionTopics: a repartition topic without a fixed count gets the most partitions
    of the source topics of any subtopology that writes to it, resolved until nothing changes."""
    counts = {name: info.partitions for name, info in repartition.items() if info.partitions > 0}
    writers: dict[str, list] = {}
    for sub in topology.subtopologies:
        for sink in sub.repartition_sink_topics:
            writers.setdefault(sink, []).append(sub)
    unknown = [n for n in repartition if n not in counts]
    if any(n not in writers for n in unknown):
        raise InvalidTopology("Failed to compute number of partitions for all repartition topics, because a "
                              "repartition source topic is never used as a sink topic.")
    while unknown:
        progress = False
        for name in list(unknown):
            widths = []
            for sub in writers[name]:
                for t in sub.source_topics:
                    if t in repartition:
                        if t in counts:
                            widths.append(counts[t])
                    elif t in partitions_of:
                        widths.append(partitions_of[t])
                widths += [counts[t.name] for t in sub.repartition_source_topics if t.name in counts]
            if widths:
                counts[name] = max(widths)
                unknown.remove(name)
                progress = True
        if not progress:
            raise InvalidTopology("Failed to compute number of partitions for all repartition topics. There may be "
                                  "loops in the topology that cannot be resolved.")
    return counts


def _copartition(topology: StreamsGroupTopologyValue, repartition: Mapping[str, StreamsTopicInfo],
                 counts: dict[str, int], partitions_of: Mapping[str, int]) -> str | None:
    """Kafka's CopartitionedTopicsEnforcer: the external topics of a copartition group must agree;
    its repartition topics follow them (a fixed count that disagrees is refused). Sets `counts`."""
    for sub in topology.subtopologies:
        for group in sub.copartition_groups:
            external = [sub.source_topics[i] for i in group.source_topics if 0 <= i < len(sub.source_topics)]
            internal = [sub.repartition_source_topics[i].name for i in group.repartition_source_topics
                        if 0 <= i < len(sub.repartition_source_topics)]
            external = [t for t in external if t not in repartition]
            if external:
                widths = {partitions_of[t] for t in external}
                if len(widths) > 1:
                    listed = ", ".join(f"{t}:{partitions_of[t]}" for t in sorted(external))
                    return f"Following topics do not have the same number of partitions: [{listed}]"
                width = widths.pop()
            else:
                width = max((counts[t] for t in internal), default=0)
            for name in internal:
                fixed = repartition[name].partitions
                if fixed > 0 and fixed != width:
                    return (f"Number of partitions [{fixed}] of repartition topic [{name}] doesn't match number of "
                            f"partitions [{width}] of the source topic.")
                counts[name] = width
    return None
