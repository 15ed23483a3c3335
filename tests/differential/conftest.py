"""The two servers of the differential tests: Apache Kafka (the session's `kafka_broker`) and a groupd
with the same group settings, each with the corpus's topics created through CreateTopics."""

from __future__ import annotations

import dataclasses
import datetime
import uuid

import pytest

from groupd.protocol import ErrorCode
from groupd.protocol.apis import ApiKey
from tests.support.kafka import groupd_settings
from tests.support.process import GroupdProcess, WireClient

from .corpus import TOPICS


@dataclasses.dataclass
class Server:
    name: str
    bootstrap: str
    topic_ids: dict[uuid.UUID, str]


def create_topics(bootstrap: str) -> dict[uuid.UUID, str]:
    """Create TOPICS (idempotent) and return {topic id: name} as Metadata reports them."""
    with WireClient(bootstrap, timeout=60) as c:
        r = c.request(ApiKey.CREATE_TOPICS, 7, {"topics": [
            {"name": t, "num_partitions": n, "replication_factor": 1, "assignments": [], "configs": []}
            for t, n in TOPICS.items()], "timeout": datetime.timedelta(seconds=60), "validate_only": False})
        for t in r.topics:
            assert t.error_code in (ErrorCode.none, ErrorCode.topic_already_exists), t
        meta = c.request(ApiKey.METADATA, 12, {"topics": [{"name": t, "topic_id": uuid.UUID(int=0)} for t in TOPICS],
                                               "allow_auto_topic_creation": False,
                                               "include_topic_authorized_operations": False})
        assert all(t.error_code == ErrorCode.none and len(t.partitions) == TOPICS[t.name] for t in meta.topics), meta
        return {t.topic_id: t.name for t in meta.topics}


@pytest.fixture(scope="module")
def servers(kafka_broker, tmp_path_factory):
    groupd = GroupdProcess(str(tmp_path_factory.mktemp("groupd")), *groupd_settings()).start()
    try:
        yield (Server("kafka", kafka_broker.bootstrap, create_topics(kafka_broker.bootstrap)),
               Server("groupd", groupd.bootstrap, create_topics(groupd.bootstrap)))
    finally:
        assert groupd.stop() == 0, groupd.log()
