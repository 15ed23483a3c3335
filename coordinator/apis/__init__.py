"""One module per Kafka API, each opening with what its versions change. `HANDLERS` is the
one table the connection dispatches through; its keys are exactly the APIs that
`protocol.apis.SUPPORTED_VERSIONS` advertises."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any, Callable

from protocol.apis import ApiKey
from protocol.codec import RequestHeader

if TYPE_CHECKING:
    from ..node import Node


@dataclasses.dataclass(slots=True)
class Request:
    header: RequestHeader
    body: Any
    client_host: str  # "/127.0.0.1", as Java renders an InetAddress

    @property
    def version(self) -> int:
        return self.header.api_version


# A handler returns a kio response, None (no response at all), or a future of either.
Handler = Callable[["Node", Request], Any]

from . import (  # noqa: E402  (the handlers import Request from here)
    api_versions,
    create_partitions,
    create_topics,
    delete_topics,
    fetch,
    find_coordinator,
    list_offsets,
    metadata,
    produce,
)

HANDLERS: dict[int, Handler] = {
    ApiKey.PRODUCE: produce.handle,
    ApiKey.FETCH: fetch.handle,
    ApiKey.LIST_OFFSETS: list_offsets.handle,
    ApiKey.METADATA: metadata.handle,
    ApiKey.FIND_COORDINATOR: find_coordinator.handle,
    ApiKey.API_VERSIONS: api_versions.handle,
    ApiKey.CREATE_TOPICS: create_topics.handle,
    ApiKey.DELETE_TOPICS: delete_topics.handle,
    ApiKey.CREATE_PARTITIONS: create_partitions.handle,
}
