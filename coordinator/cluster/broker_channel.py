"""The broker-to-broker requests of the transaction coordinator (Kafka's
TransactionMarkerChannelManager and AddPartitionsToTxnManager): WriteTxnMarkers (v1) to the leader of
partitions another worker or node leads, and AddPartitionsToTxn (v4, verify only) to the coordinator of
a transactional id another worker or node coordinates, over the Kafka protocol on the brokers' own
listeners, one connection per broker, requests of a connection one at a time.

The listener: `inter.broker.listener.name` (Kafka's setting); unset, the first PLAINTEXT listener, else
the first listener. On an SSL or SASL_SSL listener the connection is TLS, verifying the
broker with `ssl.truststore.location` (the system's CAs without one) and presenting the broker's own
keystore as its client certificate (for `ssl.client.auth=required`). On a SASL listener it
authenticates with PLAIN as the first of `super.users` that `sasl.users` has a password for (a super
user may CLUSTER_ACTION under ACLs, as Kafka's brokers are super users of each other); without such a
user nothing can be sent (one warning). Every failure (a broker down, a connection reset, refused
authentication) is a retriable error for the caller: NOT_LEADER_OR_FOLLOWER for markers (the
coordinator looks the leader up again and retries), COORDINATOR_NOT_AVAILABLE for a verification.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
import struct
from itertools import count

from groupd.protocol import ErrorCode
from groupd.protocol.apis import ApiKey
from groupd.protocol.codec import RequestHeader, build_request, decode_response, encode_request

from .view import ClusterView

log = logging.getLogger("groupd")

WRITE_TXN_MARKERS_V = 1
VERIFY_V = 4  # AddPartitionsToTxn's broker form (KIP-890)
ADD_V = 5  # its transactions-v2 form: the coordinator adds the partitions (Produce v12, TxnOffsetCommit v5)
TIMEOUT_S = 10.0
CLIENT_ID = "groupd-broker"


def inter_broker_listener(settings) -> str:
    """The listener brokers talk to each other on: `inter.broker.listener.name`; unset, the first
    PLAINTEXT one, else the first."""
    if settings.inter_broker_listener_name:
        return settings.inter_broker_listener_name
    for listener in settings.listeners:
        if settings.security_protocol(listener.name) == "PLAINTEXT":
            return listener.name
    return settings.listeners[0].name


def client_context(settings) -> ssl.SSLContext:
    ctx = ssl.create_default_context(cafile=settings.ssl_truststore_location or None)
    ctx.load_cert_chain(settings.ssl_keystore_location, password=settings.ssl_key_password or None)
    return ctx


def broker_user(settings) -> tuple[str, str] | None:
    """(name, password) the brokers authenticate as: the first super user with a SASL password."""
    for principal in settings.super_users:
        kind, _, name = principal.partition(":")
        if kind == "User" and name in settings.sasl_users:
            return name, settings.sasl_users[name]
    return None


class RefusedError(ConnectionError):
    """The broker refused this connection's authentication."""


class _Connection:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer
        self.lock = asyncio.Lock()
        self.ids = count(1)

    async def request(self, api_key: int, version: int, values: dict):
        async with self.lock:
            cid = next(self.ids)
            self.writer.write(encode_request(RequestHeader(api_key, version, cid, CLIENT_ID),
                                             build_request(api_key, version, values)))
            await self.writer.drain()
            (size,) = struct.unpack(">i", await self.reader.readexactly(4))
            got, body = decode_response(api_key, version, await self.reader.readexactly(size))
            if got != cid:
                raise ConnectionError(f"correlation id {got} != {cid}")
            return body

    def close(self) -> None:
        self.writer.close()


class BrokerChannel:
    def __init__(self, settings, view: ClusterView) -> None:
        self.view = view
        self.listener = inter_broker_listener(settings)
        protocol = settings.security_protocol(self.listener)
        self.tls = client_context(settings) if protocol in ("SSL", "SASL_SSL") else None
        self.sasl = protocol.startswith("SASL_")
        self.user = broker_user(settings) if self.sasl else None
        self._connections: dict[int, _Connection] = {}
        self._warned: set[str] = set()

    async def _connect(self, at: tuple[str, int]) -> _Connection:
        reader, writer = await asyncio.open_connection(*at, ssl=self.tls,
                                                       server_hostname=at[0] if self.tls is not None else None)
        conn = _Connection(reader, writer)
        if self.sasl:
            try:
                hello = await conn.request(ApiKey.SASL_HANDSHAKE, 1, {"mechanism": "PLAIN"})
                if hello.error_code != ErrorCode.none:
                    raise RefusedError(f"SASL/PLAIN refused: {ErrorCode(hello.error_code).name}")
                name, password = self.user
                token = b"\0" + name.encode() + b"\0" + password.encode()
                done = await conn.request(ApiKey.SASL_AUTHENTICATE, 2, {"auth_bytes": token})
                if done.error_code != ErrorCode.none:
                    raise RefusedError(f"SASL/PLAIN as {name} refused: {done.error_message}")
            except BaseException:
                conn.close()
                raise
        return conn

    def _address(self, broker_id: int) -> tuple[str, int] | None:
        for broker in self.view.brokers():
            if broker.node_id == broker_id and self.listener is not None:
                return broker.addresses.get(self.listener)
        return None

    async def _request(self, broker_id: int, api_key: int, version: int, values: dict):
        """The response, or None when the broker cannot be asked now. A kept connection that fails
        (the broker restarted since) is replaced once at once, as a client reconnects."""
        kept = broker_id in self._connections
        body = await self._request_once(broker_id, api_key, version, values)
        if body is None and kept:
            body = await self._request_once(broker_id, api_key, version, values)
        return body

    async def _request_once(self, broker_id: int, api_key: int, version: int, values: dict):
        conn = self._connections.get(broker_id)
        try:
            if conn is None:
                at = self._address(broker_id)
                if at is None:
                    self._warn(f"no-address-{broker_id}", "broker request impossible broker=%d: no address on "
                               "listener %s", broker_id, self.listener)
                    return None
                if self.sasl and self.user is None:
                    self._warn("no-user", "broker request impossible: listener %s is SASL and no super.users "
                               "entry has a sasl.users password to authenticate the brokers with", self.listener)
                    return None
                conn = self._connections[broker_id] = await asyncio.wait_for(self._connect(at), TIMEOUT_S)
            return await asyncio.wait_for(conn.request(api_key, version, values), TIMEOUT_S)
        except (OSError, EOFError, asyncio.IncompleteReadError, asyncio.TimeoutError, ConnectionError,
                ssl.SSLError) as e:
            dropped = self._connections.pop(broker_id, None)
            if dropped is not None:
                dropped.close()
            log.info("broker request failed broker=%d api=%s: %r", broker_id, ApiKey(api_key).name, e)
            return None

    def _warn(self, key: str, message: str, *args) -> None:
        if key not in self._warned:
            self._warned.add(key)
            log.warning(message, *args)

    async def write_markers(self, broker_id: int, producer_id: int, producer_epoch: int, commit: bool,
                            coordinator_epoch: int, partitions: list[tuple[str, int]]
                            ) -> dict[tuple[str, int], ErrorCode]:
        """Each partition's error from the broker's WriteTxnMarkers (all NOT_LEADER_OR_FOLLOWER when it
        could not be asked: the coordinator retries them with their leaders looked up again)."""
        topics: dict[str, list[int]] = {}
        for topic, p in partitions:
            topics.setdefault(topic, []).append(p)
        body = await self._request(broker_id, ApiKey.WRITE_TXN_MARKERS, WRITE_TXN_MARKERS_V, {"markers": [{
            "producer_id": producer_id, "producer_epoch": producer_epoch, "transaction_result": commit,
            "coordinator_epoch": coordinator_epoch,
            "topics": [{"name": t, "partition_indexes": ps} for t, ps in topics.items()]}]})
        errors = dict.fromkeys(partitions, ErrorCode.not_leader_or_follower)
        if body is None:
            return errors
        for marker in body.markers:
            for t in marker.topics:
                for p in t.partitions:
                    errors[(t.name, p.partition_index)] = ErrorCode(p.error_code)
        return errors

    async def verify(self, broker_id: int, transactional_id: str, producer_id: int, producer_epoch: int,
                     partitions: list[tuple[str, int]], add: bool = False) -> dict[tuple[str, int], ErrorCode]:
        """The coordinator's verdict per partition: AddPartitionsToTxn v4 with verify_only, or with
        `add` (transactions v2: Produce v12, TxnOffsetCommit v5) v5 adding them, as Kafka's
        AddPartitionsToTxnManager sends."""
        topics: dict[str, list[int]] = {}
        for topic, p in partitions:
            topics.setdefault(topic, []).append(p)
        body = await self._request(broker_id, ApiKey.ADD_PARTITIONS_TO_TXN, ADD_V if add else VERIFY_V, {
            "transactions": [{
                "transactional_id": transactional_id, "producer_id": producer_id, "producer_epoch": producer_epoch,
                "verify_only": not add, "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()]}]})
        errors = dict.fromkeys(partitions, ErrorCode.coordinator_not_available)
        if body is None:
            return errors
        if body.error_code != ErrorCode.none:
            return dict.fromkeys(partitions, ErrorCode(body.error_code))
        for result in body.results_by_transaction:
            for t in result.topic_results:
                for p in t.results_by_partition:
                    errors[(t.name, p.partition_index)] = ErrorCode(p.partition_error_code)
        return errors

    def close(self) -> None:
        for conn in self._connections.values():
            conn.close()
        self._connections.clear()
