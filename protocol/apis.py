"""The api-version table: which Kafka APIs groupd speaks, and in which versions.

ApiVersions advertises exactly this table, so an entry belongs here only once its handler
implements every version in the range. Caps below Kafka's own maxima are deliberate:
Fetch ≥ 13 and OffsetCommit/OffsetFetch ≥ 10 switch topic names for topic ids.
"""

from enum import IntEnum


class ApiKey(IntEnum):
    PRODUCE = 0
    FETCH = 1
    LIST_OFFSETS = 2
    METADATA = 3
    OFFSET_COMMIT = 8
    OFFSET_FETCH = 9
    FIND_COORDINATOR = 10
    JOIN_GROUP = 11
    HEARTBEAT = 12
    LEAVE_GROUP = 13
    SYNC_GROUP = 14
    DESCRIBE_GROUPS = 15
    LIST_GROUPS = 16
    API_VERSIONS = 18
    CREATE_TOPICS = 19
    DELETE_TOPICS = 20
    INIT_PRODUCER_ID = 22
    DELETE_GROUPS = 42
    CREATE_PARTITIONS = 37
    OFFSET_DELETE = 47


# (min, max) per API key, inclusive.
SUPPORTED_VERSIONS: dict[ApiKey, tuple[int, int]] = {
    # Produce is advertised so that librdkafka enables its v2 fetcher (clients.md §1.2); with
    # records.plane none every partition is answered with an error.
    ApiKey.PRODUCE: (3, 8),
    ApiKey.FETCH: (4, 12),
    ApiKey.LIST_OFFSETS: (1, 9),
    ApiKey.METADATA: (0, 12),
    ApiKey.OFFSET_COMMIT: (2, 9),
    ApiKey.OFFSET_FETCH: (1, 9),
    ApiKey.FIND_COORDINATOR: (0, 6),
    ApiKey.JOIN_GROUP: (0, 9),
    ApiKey.HEARTBEAT: (0, 4),
    ApiKey.LEAVE_GROUP: (0, 5),
    ApiKey.SYNC_GROUP: (0, 5),
    ApiKey.DESCRIBE_GROUPS: (0, 6),
    ApiKey.LIST_GROUPS: (0, 5),
    ApiKey.API_VERSIONS: (0, 4),
    ApiKey.CREATE_TOPICS: (2, 7),
    ApiKey.DELETE_TOPICS: (1, 6),
    ApiKey.INIT_PRODUCER_ID: (0, 4),
    ApiKey.CREATE_PARTITIONS: (0, 3),
    ApiKey.DELETE_GROUPS: (0, 2),
    ApiKey.OFFSET_DELETE: (0, 0),
}


def supports(api_key: int, version: int) -> bool:
    bounds = SUPPORTED_VERSIONS.get(api_key)  # type: ignore[call-overload]
    return bounds is not None and bounds[0] <= version <= bounds[1]
