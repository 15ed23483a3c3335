"""The records plane's gauges, computed when Prometheus scrapes: per data partition this node leads,
its log's bytes, start and end offsets (and segments, on disk), and the writes that failed
(KAFKA_STORAGE_ERROR). Registered by `serve` with the node (never at import)."""

from __future__ import annotations

import weakref

from prometheus_client import REGISTRY
from prometheus_client.core import GaugeMetricFamily

from groupd.storage.records_plane import plane_for


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
        for node in list(self._nodes):
            plane = plane_for(node)
            if plane is None:
                continue
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
        yield from (size, start, end, segments, failed)


RECORDS = RecordsCollector()
_registered = False


def register() -> RecordsCollector:
    global _registered
    if not _registered:
        REGISTRY.register(RECORDS)
        _registered = True
    return RECORDS
