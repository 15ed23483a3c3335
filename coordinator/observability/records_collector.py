"""The records plane's series, computed when Prometheus scrapes: per data partition this node leads,
its log's bytes, start and end offsets (and segments, on disk); per topic the bytes and records
produced and the bytes fetched (Kafka's BytesInPerSec, MessagesInPerSec, BytesOutPerSec, as counters);
the writes that failed (KAFKA_STORAGE_ERROR); on disk, the segments retention removed and the cleans of
compacted topics with the bytes they freed. Registered by `serve` with the node (never at import)."""

from __future__ import annotations

import weakref

from groupd.storage.records_plane import plane_for

from .prometheus import REGISTRY, CounterMetricFamily, GaugeMetricFamily


class RecordsCollector:
    def __init__(self) -> None:
        self._nodes: weakref.WeakSet = weakref.WeakSet()

    def watch(self, node) -> None:
        self._nodes.add(node)

    def collect(self):
        labels = ["topic", "partition"]
        size = GaugeMetricFamily("groupd_records_log_bytes", "Bytes of each data partition's log", labels=labels)
        start = GaugeMetricFamily("groupd_records_log_start_offset", "Log start offset of each data partition",
                                  labels=labels)
        end = GaugeMetricFamily("groupd_records_log_end_offset",
                                "Log end offset (high watermark) of each data partition", labels=labels)
        segments = GaugeMetricFamily("groupd_records_log_segments", "Segments of each data partition (disk plane)",
                                     labels=labels)
        failed = GaugeMetricFamily("groupd_records_write_errors", "Data partition writes that failed since start "
                                   "(answered KAFKA_STORAGE_ERROR)")
        bytes_in = CounterMetricFamily("groupd_records_bytes_in", "Record bytes produced to each topic",
                                       labels=["topic"])
        records_in = CounterMetricFamily("groupd_records_in", "Records produced to each topic", labels=["topic"])
        bytes_out = CounterMetricFamily("groupd_records_bytes_out", "Record bytes fetched from each topic",
                                        labels=["topic"])
        removed = CounterMetricFamily("groupd_records_retention_removed_segments",
                                      "Data segments removed by retention (disk plane)")
        cleans = CounterMetricFamily("groupd_records_compactions", "Cleans of compacted topics' partitions (disk plane)")
        reclaimed = CounterMetricFamily("groupd_records_compaction_reclaimed_bytes",
                                        "Bytes the cleans of compacted topics freed (disk plane)")
        for node in list(self._nodes):
            plane = plane_for(node)
            if plane is None:
                continue
            traffic = plane.traffic
            traffic.forget_except({t.name for t in node.catalog} | {node.offsets_topic.name})
            for name, (b_in, r_in, b_out) in list(traffic.by_topic.items()):
                bytes_in.add_metric([name], b_in)
                records_in.add_metric([name], r_in)
                bytes_out.add_metric([name], b_out)
            if getattr(plane, "DISK", False):
                removed.add_metric([], plane.retention_segments_removed)
                cleans.add_metric([], plane.compactions)
                reclaimed.add_metric([], plane.compaction_reclaimed_bytes)
            disk = getattr(plane, "DISK", False)
            for (topic_id, p), log in plane.partitions():
                topic = node.catalog.by_id(topic_id)
                if topic is None:
                    continue
                at = [topic.name, str(p)]
                size.add_metric(at, log.size)
                start.add_metric(at, log.log_start)
                end.add_metric(at, log.high_watermark)
                if disk:
                    segments.add_metric(at, len(log.dlog.segments))
            failed.add_metric([], getattr(plane, "storage_errors", 0))
        yield from (size, start, end, segments, failed, bytes_in, records_in, bytes_out, removed, cleans, reclaimed)


RECORDS = RecordsCollector()
_registered = False


def register() -> RecordsCollector:
    global _registered
    if not _registered:
        REGISTRY.register(RECORDS)
        _registered = True
    return RECORDS
