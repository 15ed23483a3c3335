"""The operator commands' Kafka client: one blocking connection per broker (size-prefixed frames,
one request at a time; also the tests' wire client), over TLS and SASL as the client properties say
(client_config.py), and which broker to ask for a group (`Brokers`)."""

from __future__ import annotations

import struct
import uuid
from collections.abc import Iterable, Mapping
from itertools import count
from typing import Any

from groupd.protocol import ErrorCode
from groupd.protocol.apis import ApiKey
from groupd.protocol.codec import RequestHeader, build_request, decode_response, encode_request

from . import client_config
from .client_config import ClientConfig

EARLIEST, LATEST = -2, -1  # ListOffsets timestamps

# The versions the commands speak: all inside groupd's table (protocol/apis.py).
LIST_GROUPS_V = 5       # states and each group's type
DESCRIBE_GROUPS_V = 6   # GROUP_ID_NOT_FOUND for an unknown group instead of an empty "Dead" one
CONSUMER_GROUP_DESCRIBE_V = 1  # consumer (KIP-848) groups: epochs, current and target assignments
SHARE_GROUP_DESCRIBE_V = 1  # share (KIP-932) groups: epochs and each member's (shared) partitions
DESCRIBE_SHARE_GROUP_OFFSETS_V = 1  # share-partitions' start offsets and lag (v1)
STREAMS_GROUP_DESCRIBE_V = 0  # streams (KIP-1071) groups: epochs, the topology, each member's tasks
OFFSET_FETCH_V = 8      # batched groups; topics=null fetches every committed offset
OFFSET_COMMIT_V = 8
OFFSET_DELETE_V = 0
DELETE_GROUPS_V = 2
METADATA_V = 12
LIST_OFFSETS_V = 7
API_VERSIONS_V = 3
FIND_COORDINATOR_V = 3
LIST_TRANSACTIONS_V = 1     # the duration filter (KIP-994)
DESCRIBE_TRANSACTIONS_V = 0
DESCRIBE_PRODUCERS_V = 0
WRITE_TXN_MARKERS_V = 1
GROUP_KEY, TRANSACTION_KEY = 0, 1  # FindCoordinator key types


class AdminError(Exception):
    """A command cannot do what it was asked; the message is for the operator."""


# ---------------------------------------------------------------------------------------------
# The wire: one connection, size-prefixed frames, one request at a time (also the tests' client,
# tests/support/process.py WireClient)


def split_bootstrap(bootstrap: str) -> tuple[str, int]:
    """`host:port`, `[v6 address]:port` or a listener `PLAINTEXT://host:port` → (host, port)."""
    text = bootstrap.split(",")[0].strip()
    if "://" in text:
        text = text.split("://", 1)[1]
    host, sep, port = text.rpartition(":")
    if not sep or not host or not port.isdigit():
        raise AdminError(f"bootstrap address {bootstrap!r} is not host:port")
    return host.strip("[]"), int(port)


class AdminConnection:
    """A blocking Kafka connection: build a request from plain values (any version; fields a
    version does not have are ignored), get the decoded kio response back. With `security` (Kafka's
    client properties, coordinator/tools/client_config.py) over TLS and SASL as they say; a plaintext
    connection the listener closes is an AdminError saying what the listener wants."""

    def __init__(self, bootstrap: str, client_id: str | None = "groupd-admin", timeout: float = 10.0,
                 security: ClientConfig | None = None) -> None:
        host, port = split_bootstrap(bootstrap)
        self.security = security or ClientConfig()
        self.client_id = self.security.get("client.id", client_id) if security else client_id
        self._ids = count(1)
        self._where = (host, port, timeout)
        try:
            self.sock = client_config.open_socket(host, port, timeout, self.security)
        except client_config.SecurityError as e:
            raise AdminError(str(e)) from None
        if self.security.sasl:
            try:
                client_config.authenticate(self.request, self.security, address(host, port))
            except client_config.SecurityError as e:
                self.close()
                raise AdminError(str(e)) from None
            except ConnectionError:
                self.close()
                raise AdminError(f"{address(host, port)} closed the connection during SASL authentication "
                                 f"(security.protocol={self.security.protocol}: is that the listener's?)") from None

    def close(self) -> None:
        self.sock.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def frame(self, api_key: int, version: int, values: Mapping[str, Any],
              correlation_id: int | None = None) -> tuple[int, bytes]:
        cid = next(self._ids) if correlation_id is None else correlation_id
        header = RequestHeader(api_key, version, cid, self.client_id)
        return cid, encode_request(header, build_request(api_key, version, values))

    def send_raw(self, data: bytes) -> None:
        self.sock.sendall(data)

    def read_frame(self) -> bytes:
        (size,) = struct.unpack(">i", self._read_exactly(4))
        return self._read_exactly(size)

    def _read_exactly(self, n: int) -> bytes:
        chunks = []
        while n:
            chunk = self.sock.recv(n)
            if not chunk:
                raise ConnectionError("server closed the connection")
            chunks.append(chunk)
            n -= len(chunk)
        return b"".join(chunks)

    def request(self, api_key: int, version: int, values: Mapping[str, Any]) -> Any:
        cid, data = self.frame(api_key, version, values)
        try:
            self.send_raw(data)
            frame = self.read_frame()
        except ConnectionError:
            if self.security.protocol == "PLAINTEXT":  # closed: does the listener want TLS or SASL?
                wants = client_config.diagnose(*self._where)
                if wants is not None:
                    raise AdminError(wants) from None
            raise
        got, response = decode_response(api_key, version, frame)
        if got != cid:
            raise ConnectionError(f"correlation id {got} != {cid}")
        return response


# ---------------------------------------------------------------------------------------------
# Which broker to ask: one node is every group's coordinator; with several (`groupd serve --workers
# N`), a group's requests go to its coordinator, found as clients find it


def address(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def brokers(conn: AdminConnection) -> dict[int, str]:
    """{node id: host:port} of the brokers Metadata lists (their advertised addresses)."""
    r = conn.request(ApiKey.METADATA, METADATA_V, {"topics": [], "allow_auto_topic_creation": False,
                                                   "include_topic_authorized_operations": False})
    return {b.node_id: address(b.host, b.port) for b in r.brokers}


class Brokers:
    """Connections to the brokers, opened as needed: the bootstrap alone when it is the only broker
    (its advertised address may not be reachable from here), else each at its advertised address."""

    def __init__(self, bootstrap: str, timeout: float = 10.0, security: ClientConfig | None = None) -> None:
        self.bootstrap = AdminConnection(bootstrap, timeout=timeout, security=security)
        self.timeout = timeout
        self.security = security  # every broker is reached as the bootstrap is (one listener name)
        self._open: dict[str, AdminConnection] = {}
        try:
            self.addresses = brokers(self.bootstrap)
        except BaseException:
            self.bootstrap.close()
            raise

    def __enter__(self) -> Brokers:
        return self

    def __exit__(self, *exc: Any) -> None:
        for conn in (self.bootstrap, *self._open.values()):
            conn.close()

    def each(self) -> list[AdminConnection]:
        """A connection to every broker."""
        if len(self.addresses) <= 1:
            return [self.bootstrap]
        return [self._at(address) for address in self.addresses.values()]

    def coordinator(self, group: str) -> AdminConnection:
        """A connection to `group`'s coordinator, found as clients find it."""
        if len(self.addresses) <= 1:
            return self.bootstrap
        return self.find_coordinator(group, GROUP_KEY)[1]

    def find_coordinator(self, key: str, key_type: int) -> tuple[int, AdminConnection]:
        """The node id of the coordinator of group (or transactional id) `key`, and a connection to it."""
        r = self.bootstrap.request(ApiKey.FIND_COORDINATOR, FIND_COORDINATOR_V, {"key": key, "key_type": key_type})
        what = "group" if key_type == GROUP_KEY else "transactional id"
        check(r.error_code, f"FindCoordinator for {what} {key!r}", r.error_message)
        if len(self.addresses) <= 1:
            return r.node_id, self.bootstrap
        return r.node_id, self._at(address(r.host, r.port))

    def leader(self, topic: str, partition: int) -> AdminConnection:
        """A connection to the leader of a data partition (Metadata's)."""
        if len(self.addresses) <= 1:
            return self.bootstrap
        leader = self.leaders({topic: [partition]}).get((topic, partition), -1)
        if leader not in self.addresses:
            raise AdminError(f"partition {topic}-{partition} has no leader now")
        return self._at(self.addresses[leader])

    def leaders(self, partitions: Mapping[str, Iterable[int]]) -> dict[tuple[str, int], int]:
        """{(topic, partition): leader node id} of the partitions asked (Metadata's)."""
        meta = self.bootstrap.request(ApiKey.METADATA, METADATA_V, {
            "topics": [{"name": t, "topic_id": uuid.UUID(int=0)} for t in sorted(partitions)],
            "allow_auto_topic_creation": False, "include_topic_authorized_operations": False})
        return {(t.name, p.partition_index): p.leader_id for t in meta.topics for p in t.partitions}

    def list_offsets(self, partitions: Mapping[str, Iterable[int]], timestamp: int) -> dict:
        """ListOffsets of each data partition at its leader (Metadata's)."""
        if len(self.addresses) <= 1 or not partitions:
            return list_offsets(self.bootstrap, partitions, timestamp)
        leaders = self.leaders(partitions)
        by_leader: dict[int, dict[str, set[int]]] = {}
        for topic, ps in partitions.items():
            for p in ps:
                by_leader.setdefault(leaders.get((topic, p), -1), {}).setdefault(topic, set()).add(p)
        out = {}
        for leader, asked in by_leader.items():
            address = self.addresses.get(leader)
            if address is None:  # no leader now: no offsets
                out.update({(t, p): None for t, ps in asked.items() for p in ps})
            else:
                out.update(list_offsets(self._at(address), asked, timestamp))
        return out

    def _at(self, address: str) -> AdminConnection:
        if address not in self._open:
            self._open[address] = AdminConnection(address, timeout=self.timeout, security=self.security)
        return self._open[address]


def check(error_code: ErrorCode, what: str, message: str | None = None) -> None:
    if error_code is not ErrorCode.none:
        raise AdminError(f"{what}: {error_code.name.upper()}" + (f" ({message})" if message else ""))


def list_offsets(conn: AdminConnection, partitions: Mapping[str, Iterable[int]], timestamp: int) -> dict:
    """{(topic, partition): offset or None when that partition answered an error}."""
    topics = [{"name": t, "partitions": [{"partition_index": p, "timestamp": timestamp,
                                          "current_leader_epoch": -1} for p in sorted(ps)]}
              for t, ps in sorted(partitions.items()) if ps]
    if not topics:
        return {}
    r = conn.request(ApiKey.LIST_OFFSETS, LIST_OFFSETS_V, {"replica_id": -1, "isolation_level": 0, "topics": topics})
    return {(t.name, p.partition_index): (p.offset if p.error_code is ErrorCode.none else None)
            for t in r.topics for p in t.partitions}
