"""One module per Kafka API, each opening with what its versions change. `HANDLERS` is the
one table the connection dispatches through; its keys are exactly the APIs that
`protocol.apis.SUPPORTED_VERSIONS` advertises."""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
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

_MS = datetime.timedelta(milliseconds=1)


def ms(value: datetime.timedelta) -> int:
    """kio carries Kafka's millisecond fields as timedeltas."""
    return value // _MS


def respond(result: Any, make: Callable[[Any], Any]) -> Any:
    """`make(result)` now, or a future of it when the coordinator answers later."""
    if not isinstance(result, asyncio.Future):
        return make(result)
    out = asyncio.get_running_loop().create_future()

    def done(f: asyncio.Future) -> None:
        if out.done():
            return
        if f.cancelled():
            out.cancel()
        elif f.exception() is not None:
            out.set_exception(f.exception())
        else:
            try:
                out.set_result(make(f.result()))
            except Exception as e:  # a bug in make(): the connection logs it and closes
                out.set_exception(e)

    result.add_done_callback(done)
    return out

from . import (  # noqa: E402  (the handlers import Request from here)
    api_versions,
    create_partitions,
    create_topics,
    delete_groups,
    delete_topics,
    describe_groups,
    fetch,
    find_coordinator,
    heartbeat,
    init_producer_id,
    join_group,
    leave_group,
    list_groups,
    list_offsets,
    metadata,
    offset_commit,
    offset_delete,
    offset_fetch,
    produce,
    sync_group,
)

HANDLERS: dict[int, Handler] = {
    ApiKey.PRODUCE: produce.handle,
    ApiKey.FETCH: fetch.handle,
    ApiKey.LIST_OFFSETS: list_offsets.handle,
    ApiKey.METADATA: metadata.handle,
    ApiKey.OFFSET_COMMIT: offset_commit.handle,
    ApiKey.OFFSET_FETCH: offset_fetch.handle,
    ApiKey.FIND_COORDINATOR: find_coordinator.handle,
    ApiKey.JOIN_GROUP: join_group.handle,
    ApiKey.HEARTBEAT: heartbeat.handle,
    ApiKey.LEAVE_GROUP: leave_group.handle,
    ApiKey.SYNC_GROUP: sync_group.handle,
    ApiKey.DESCRIBE_GROUPS: describe_groups.handle,
    ApiKey.LIST_GROUPS: list_groups.handle,
    ApiKey.API_VERSIONS: api_versions.handle,
    ApiKey.CREATE_TOPICS: create_topics.handle,
    ApiKey.DELETE_TOPICS: delete_topics.handle,
    ApiKey.INIT_PRODUCER_ID: init_producer_id.handle,
    ApiKey.CREATE_PARTITIONS: create_partitions.handle,
    ApiKey.DELETE_GROUPS: delete_groups.handle,
    ApiKey.OFFSET_DELETE: offset_delete.handle,
}
