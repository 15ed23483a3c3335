"""The broker-to-broker requests (Kafka's TransactionMarkerChannelManager, AddPartitionsToTxnManager and
the share groups' Persister): WriteTxnMarkers (v1) to the leader of partitions another worker or node
leads, AddPartitionsToTxn (v4, verify only) to the coordinator of a transactional id another worker or
node coordinates, and the share-state requests (InitializeShareGroupState, DeleteShareGroupState,
ReadShareGroupStateSummary, with ListOffsets for the log end) to the leader of a data partition, which
keeps its share-partitions' state; over the Kafka protocol on the brokers' own listeners, one connection
per broker, requests of a connection one at a time.

The listener: `inter.broker.listener.name` (Kafka's setting); unset, the first PLAINTEXT listener, else
the first listener. On an SSL or SASL_SSL listener the connection is TLS, verifying the
broker with `ssl.truststore.location` (the system's CAs without one) and presenting the broker's own
keystore as its client certificate (for `ssl.client.auth=required`). On a SASL listener it
authenticates with `sasl.mechanism.inter.broker.protocol` (PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512) as
the first of `super.users` that `sasl.users` has a password for (a super user may CLUSTER_ACTION under
ACLs, as Kafka's brokers are super users of each other); without such a user nothing can be sent (one
warning). Every failure (a broker down, a connection reset, refused
authentication) is a retriable error for the caller: NOT_LEADER_OR_FOLLOWER for markers (the
coordinator looks the leader up again and retries), COORDINATOR_NOT_AVAILABLE for a verification.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
import struct
import uuid
from itertools import count
from typing import Any

from groupd.coordinator.security.scram import ScramClient, ScramError
from groupd.protocol import ErrorCode
from groupd.protocol.apis import ApiKey
from groupd.protocol.codec import RequestHeader, build_request, decode_response, encode_request

from .view import ClusterView

log = logging.getLogger("groupd")

WRITE_TXN_MARKERS_V = 1
VERIFY_V = 4  # AddPartitionsToTxn's broker form (KIP-890)
ADD_V = 5  # its transactions-v2 form: the coordinator adds the partitions (Produce v12, TxnOffsetCommit v5)
SHARE_STATE_V = {ApiKey.INITIALIZE_SHARE_GROUP_STATE: 0, ApiKey.DELETE_SHARE_GROUP_STATE: 0,
                 ApiKey.READ_SHARE_GROUP_STATE_SUMMARY: 1}  # v1: the delivery-complete count (lag)
LIST_OFFSETS_V = 6
LATEST = -1
TIMEOUT_S = 10.0
CLIENT_ID = "groupd-broker"


def inter_broker_listener(settings) -> str:
    """The listener brokers talk to each other on: `inter.broker.listener.name`; unset, the first
    PLAINTEXT one, else the first."""
    return settings.inter_broker_listener()


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
        self.mechanism = settings.sasl_mechanism_inter_broker_protocol
        self._connections: dict[int, _Connection] = {}
        self._connecting: dict[int, asyncio.Lock] = {}  # requests at once to a broker not yet connected wait
        self._warned: set[str] = set()

    async def _connect(self, at: tuple[str, int]) -> _Connection:
        reader, writer = await asyncio.open_connection(*at, ssl=self.tls,
                                                       server_hostname=at[0] if self.tls is not None else None)
        conn = _Connection(reader, writer)
        if self.sasl:
            try:
                await self._authenticate(conn)
            except BaseException:
                conn.close()
                raise
        return conn

    async def _authenticate(self, conn: _Connection) -> None:
        """SaslHandshake v1 with `sasl.mechanism.inter.broker.protocol`, then its SaslAuthenticate
        exchange: one token for PLAIN; client-first and client-final for SCRAM, whose server
        signature is checked (a broker that does not know the credential is not trusted)."""
        mechanism, (name, password) = self.mechanism, self.user
        hello = await conn.request(ApiKey.SASL_HANDSHAKE, 1, {"mechanism": mechanism})
        if hello.error_code != ErrorCode.none:
            raise RefusedError(f"SASL/{mechanism} refused: {ErrorCode(hello.error_code).name}")

        async def send(token: bytes) -> bytes:
            done = await conn.request(ApiKey.SASL_AUTHENTICATE, 2, {"auth_bytes": token})
            if done.error_code != ErrorCode.none:
                raise RefusedError(f"SASL/{mechanism} as {name} refused: {done.error_message}")
            return bytes(done.auth_bytes)

        if mechanism == "PLAIN":
            await send(b"\0" + name.encode() + b"\0" + password.encode())
            return
        client = ScramClient(mechanism, name, password)
        try:
            client.verify(await send(client.final(await send(client.first()))))
        except ScramError as e:
            raise RefusedError(f"SASL/{mechanism} with broker failed: {e}") from None

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
                async with self._connecting.setdefault(broker_id, asyncio.Lock()):  # one connection per broker
                    conn = self._connections.get(broker_id)
                    if conn is None:
                        conn = self._connections[broker_id] = await asyncio.wait_for(self._connect(at), TIMEOUT_S)
            return await asyncio.wait_for(conn.request(api_key, version, values), TIMEOUT_S)
        except (OSError, EOFError, asyncio.IncompleteReadError, asyncio.TimeoutError, ConnectionError,
                ssl.SSLError) as e:
            if conn is not None and self._connections.get(broker_id) is conn:  # not one opened since by another
                del self._connections[broker_id]
                conn.close()
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

    async def share_state(self, broker_id: int, api_key: ApiKey, group_id: str,
                          partitions: dict[tuple[uuid.UUID, int], dict]) -> dict[tuple[uuid.UUID, int], Any]:
        """Each (topic id, partition)'s PartitionResult from the broker's share-state request
        (`partitions`: the request's fields of each beyond its index), None for every one when the
        broker could not be asked."""
        topics: dict[uuid.UUID, list[dict]] = {}
        for (topic_id, index), fields in partitions.items():
            topics.setdefault(topic_id, []).append({"partition": index, **fields})
        body = await self._request(broker_id, api_key, SHARE_STATE_V[api_key], {
            "group_id": group_id, "topics": [{"topic_id": t, "partitions": ps} for t, ps in topics.items()]})
        out: dict[tuple[uuid.UUID, int], Any] = dict.fromkeys(partitions)
        if body is not None:
            for result in body.results:
                for p in result.partitions:
                    if (result.topic_id, p.partition) in out:
                        out[(result.topic_id, p.partition)] = p
        return out

    async def log_ends(self, broker_id: int, partitions: list[tuple[str, int]]) -> dict[tuple[str, int], int | None]:
        """Each partition's high watermark at the broker (ListOffsets, latest), None where it did not say."""
        topics: dict[str, list[dict]] = {}
        for topic, index in partitions:
            topics.setdefault(topic, []).append({"partition_index": index, "current_leader_epoch": -1,
                                                 "timestamp": LATEST})
        body = await self._request(broker_id, ApiKey.LIST_OFFSETS, LIST_OFFSETS_V, {
            "replica_id": -1, "isolation_level": 0,
            "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()]})
        out: dict[tuple[str, int], int | None] = dict.fromkeys(partitions)
        if body is not None:
            for t in body.topics:
                for p in t.partitions:
                    if p.error_code == ErrorCode.none and (t.name, p.partition_index) in out:
                        out[(t.name, p.partition_index)] = p.offset
        return out

    def close(self) -> None:
        for conn in self._connections.values():
            conn.close()
        self._connections.clear()
