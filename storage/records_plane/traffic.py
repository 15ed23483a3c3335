"""Records in and out per topic (Kafka's BytesInPerSec, MessagesInPerSec, BytesOutPerSec), counted in
plain integers on the event loop as Produce and Fetch answer, and exposed by the records collector at
scrape time (coordinator/observability/records_collector.py)."""

from __future__ import annotations


class Traffic:
    def __init__(self) -> None:
        self.by_topic: dict[str, list[int]] = {}  # topic → [bytes in, records in, bytes out]

    def _of(self, topic: str) -> list[int]:
        counts = self.by_topic.get(topic)
        if counts is None:
            counts = self.by_topic[topic] = [0, 0, 0]
        return counts

    def produced(self, topic: str, size: int, records: int) -> None:
        counts = self._of(topic)
        counts[0] += size
        counts[1] += records

    def fetched(self, topic: str, size: int) -> None:
        if size:
            self._of(topic)[2] += size

    def forget_except(self, topics: set[str]) -> None:
        """Deleted topics' counts go (their series end)."""
        for name in [n for n in self.by_topic if n not in topics]:
            del self.by_topic[name]
