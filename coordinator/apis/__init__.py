"""One module per Kafka API, each opening with what its versions change and declaring its `KEY`,
the `VERSIONS` it implements (min, max, inclusive) and `handle`. Both tables are built from the
modules, so adding an API touches one file plus the list below: `HANDLERS`, which the connection
dispatches through, and `SUPPORTED_VERSIONS`, which ApiVersions advertises (an API belongs there
only once its handler implements every version in its range; caps below Kafka's maxima are
deliberate: Fetch ≥ 13 and OffsetCommit/OffsetFetch ≥ 10 switch topic names for topic ids)."""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
from typing import TYPE_CHECKING, Any, Callable

from groupd.protocol.apis import ApiKey
from groupd.protocol.codec import Encoded, RequestHeader

from groupd.coordinator.security.tls import ANONYMOUS  # the principal of a connection nobody authenticated

if TYPE_CHECKING:
    from groupd.coordinator.server.node import Node
    from groupd.coordinator.settings import Listener


@dataclasses.dataclass(slots=True)
class Request:
    header: RequestHeader
    body: Any
    client_host: str  # "/127.0.0.1", as Java renders an InetAddress
    advertised: "Listener"  # this node's address on the listener the request came in on
    principal: str = ANONYMOUS  # the authenticated principal of the connection (Kafka's `Type:Name`)
    off_loop: bool = False  # its answer is being built off the loop: the connection reads on after it

    @property
    def version(self) -> int:
        return self.header.api_version


# A handler returns a kio response, None (no response at all), or a future of either.
Handler = Callable[["Node", Request], Any]

_MS = datetime.timedelta(milliseconds=1)


def ms(value: datetime.timedelta) -> int:
    """kio carries Kafka's millisecond fields as timedeltas."""
    return value // _MS


# Rows (partitions, members) above which an answer is built and encoded off the loop: a 20,000-offset
# OffsetFetch costs ~90 ms of CPU, which the loop must not spend while other clients wait.
LARGE_ANSWER_ROWS = 2_000


def answer_off_loop(node: "Node", request: Request, make: Callable[[], Any]) -> asyncio.Future:
    """A future of `make()`, built and encoded on the node's answer thread. `make` may read only a
    snapshot taken on the loop (immutable values). The loop keeps serving other connections while it
    runs (the interpreter lock changes hands every few ms), and the requesting connection handles
    nothing more until it is done, so one connection holds at most one such answer."""
    request.off_loop = True
    return asyncio.wrap_future(node.answers.submit(lambda: Encoded(make())))


def respond(result: Any, make: Callable[[Any], Any]) -> Any:
    """`make(result)` now, or a future of it when the coordinator answers later."""
    if not isinstance(result, asyncio.Future):
        return make(result)
    out = asyncio.get_running_loop().create_future()
    result.add_done_callback(lambda f: forward(f, out, make))
    return out


def respond_all(items: list[Any], make: Callable[[list[Any]], Any]) -> Any:
    """`make(items)` once every item that is a future has its result (in its place)."""
    pending = [item for item in items if isinstance(item, asyncio.Future)]
    if not pending:
        return make(items)
    return respond(asyncio.gather(*pending), lambda _: make(
        [item.result() if isinstance(item, asyncio.Future) else item for item in items]))


def forward(done: asyncio.Future, out: asyncio.Future, make: Callable[[Any], Any] = lambda r: r) -> None:
    """Settle `out` as the finished `done` went: `make(its result)`, its exception, or cancelled."""
    if out.done():
        return
    if done.cancelled():
        out.cancel()
    elif done.exception() is not None:
        out.set_exception(done.exception())
    else:
        try:
            out.set_result(make(done.result()))
        except Exception as e:  # a bug in make(): the connection logs it and closes
            out.set_exception(e)

from . import (  # noqa: E402  (the handlers import Request from here)
    alter_configs,
    alter_user_scram_credentials,
    api_versions,
    consumer_group_describe,
    consumer_group_heartbeat,
    create_acls,
    create_partitions,
    create_topics,
    delete_acls,
    delete_groups,
    delete_topics,
    describe_acls,
    describe_configs,
    describe_groups,
    describe_user_scram_credentials,
    fetch,
    find_coordinator,
    heartbeat,
    incremental_alter_configs,
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
    sasl_authenticate,
    sasl_handshake,
    sync_group,
)

MODULES = (produce, fetch, list_offsets, metadata, offset_commit, offset_fetch, find_coordinator, join_group,
           heartbeat, leave_group, sync_group, describe_groups, list_groups, api_versions, create_topics,
           delete_topics, init_producer_id, create_partitions, delete_groups, offset_delete,
           consumer_group_heartbeat, consumer_group_describe, sasl_handshake, sasl_authenticate,
           describe_acls, create_acls, delete_acls, describe_configs, alter_configs,
           incremental_alter_configs, describe_user_scram_credentials, alter_user_scram_credentials)

HANDLERS: dict[int, Handler] = {m.KEY: m.handle for m in MODULES}
SUPPORTED_VERSIONS: dict[ApiKey, tuple[int, int]] = {m.KEY: m.VERSIONS for m in MODULES}
