"""A real etcd (Debian's etcd-server) for cluster-mode tests, on free loopback ports with a temporary
data dir, and groupd nodes that use it. A missing etcd fails the test: CI installs it."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import threading
import time

import pytest

from groupd.coordinator.tools.client import AdminConnection
from groupd.protocol import ErrorCode
from groupd.protocol.apis import ApiKey

from .process import GroupdProcess, free_ports

LEASE_MS = 2000  # short, so that a dead node's partitions move within seconds


class EtcdServer:
    """`tls`: a directory of certificates (`tls_certificates`): etcd serves https:// and asks clients
    for a certificate its CA signed (--client-cert-auth)."""

    def __init__(self, data_dir: str, tls: str | None = None) -> None:
        self.data_dir = data_dir
        self.tls = tls
        # below the ephemeral range (free_ports): etcd binds a moment after the choice, and a port the
        # kernel hands to an outgoing connection meanwhile would be taken ("address already in use")
        self.port = free_ports(1)
        self.peer_port = free_ports(1)
        while self.peer_port == self.port:
            self.peer_port = free_ports(1)
        self.proc: subprocess.Popen | None = None
        self.log_path = os.path.join(os.path.dirname(data_dir), f"etcd-{self.port}.log")

    @property
    def endpoint(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self, timeout: float = 30.0) -> EtcdServer:
        binary = shutil.which("etcd") or "/usr/bin/etcd"
        if not os.path.exists(binary):
            pytest.fail("etcd is not installed (apt-get install etcd-server; .ci/install-deploy-tools does it)")
        scheme = "https" if self.tls else "http"
        client, peer = f"{scheme}://127.0.0.1:{self.port}", f"http://127.0.0.1:{self.peer_port}"
        tls = [] if not self.tls else [
            "--cert-file", os.path.join(self.tls, "server.pem"), "--key-file", os.path.join(self.tls, "server-key.pem"),
            "--client-cert-auth", "--trusted-ca-file", os.path.join(self.tls, "ca.pem")]
        self._log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(
            [binary, "--name", "t", "--data-dir", self.data_dir, "--listen-client-urls", client,
             "--advertise-client-urls", client, "--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
             "--initial-cluster", f"t={peer}", "--log-level", "warn", *tls], stdout=self._log, stderr=subprocess.STDOUT)
        context = None
        if self.tls:
            import ssl

            context = ssl.create_default_context(cafile=os.path.join(self.tls, "ca.pem"))
            context.load_cert_chain(os.path.join(self.tls, "client.pem"), os.path.join(self.tls, "client-key.pem"))
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self.proc.poll() is None, open(self.log_path).read()
            try:
                import urllib.request

                with urllib.request.urlopen(f"{client}/health", timeout=2, context=context) as r:
                    if b'"true"' in r.read():
                        return self
            except OSError:
                pass
            time.sleep(0.1)
        raise TimeoutError(f"etcd did not start in {timeout} s")

    def pause(self) -> None:
        self.proc.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        self.proc.send_signal(signal.SIGCONT)

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.send_signal(signal.SIGCONT)
            self.proc.terminate()
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
            self._log.close()
            self.proc = None


def tls_certificates(directory: str) -> str:
    """A CA, etcd's certificate for 127.0.0.1 (server and client use: etcd's JSON gateway dials its
    own gRPC with it) and a client certificate, as PEM files in `directory`."""
    from .certs import _openssl, _signed

    os.makedirs(directory, exist_ok=True)
    _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca-key.pem", "-out", "ca.pem",
             "-days", "2", "-subj", "/CN=groupd test etcd ca", cwd=directory)
    _signed(directory, "server", "/CN=localhost", "ca",
            "subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth,clientAuth\n")
    _signed(directory, "client", "/CN=groupd", "ca", "extendedKeyUsage=clientAuth\n")
    return directory


class Proxy:
    """A TCP relay from a loopback port to `target_port` that a test can `cut` (every connection
    closed, new ones closed at once: the node behind it is cut off) and `restore`."""

    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.cut_off = threading.Event()
        self._lock = threading.Lock()
        self._sockets: set[socket.socket] = set()
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def endpoint(self) -> str:
        return f"127.0.0.1:{self.port}"

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            if self.cut_off.is_set():
                client.close()
                continue
            try:
                upstream = socket.create_connection(("127.0.0.1", self.target_port))
            except OSError:
                client.close()
                continue
            with self._lock:
                self._sockets |= {client, upstream}
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass
        for s in (src, dst):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def cut(self) -> None:
        self.cut_off.set()
        with self._lock:
            for s in self._sockets:
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
            self._sockets.clear()

    def restore(self) -> None:
        self.cut_off.clear()

    def close(self) -> None:
        self.cut()
        self.listener.close()


def etcd_get(endpoint: str, key: str) -> bytes | None:
    """One key's value, read with the client groupd uses."""
    import asyncio

    import aetcd

    async def get():
        host, _, port = endpoint.rpartition(":")
        async with aetcd.Client(host, int(port), timeout=5) as client:
            found = await client.get(key.encode())
            return None if found is None else found.value
    return asyncio.run(get())


def cluster_node(data_dir: str, etcd: EtcdServer | Proxy, node_id: int, *settings: str) -> GroupdProcess:
    return GroupdProcess(data_dir, f"node.id={node_id}", f"cluster.etcd.endpoints={etcd.endpoint}",
                         f"cluster.lease.ms={LEASE_MS}", "log.level=info", *settings)


def coordinators(bootstrap: str, groups: list[str]) -> dict[str, int | None]:
    """FindCoordinator v4 for `groups` as `bootstrap` answers: group → node id (None: not available);
    {} when the node does not answer."""
    try:
        with AdminConnection(bootstrap, "cluster-test") as c:
            r = c.request(ApiKey.FIND_COORDINATOR, 4, {"key_type": 0, "coordinator_keys": groups})
    except OSError:
        return {}
    return {x.key: (x.node_id if x.error_code == ErrorCode.none else None) for x in r.coordinators}

