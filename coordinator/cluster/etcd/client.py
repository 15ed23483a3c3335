"""Connecting to etcd: an asyncio (aetcd) client per endpoint, plain or over TLS with
`cluster.etcd.ssl.*`, the JSON gateway's TLS context, gRPC's errors in one line, and what to install
when the client is missing."""

from __future__ import annotations

import os
import ssl
import sys
from urllib.parse import urlsplit

from groupd.coordinator.cluster.view import ClusterError


def install_cluster_extra() -> str:
    """How to add the `cluster` extra to the Python that runs this groupd. groupd is not on PyPI (a
    `pip install 'groupd[cluster]'` would fetch someone else's package, or nothing): from the clone."""
    root = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))  # coordinator/cluster/etcd/
    if os.path.isfile(os.path.join(root, "pyproject.toml")):  # a checkout (the editable install)
        return (f"install the cluster extra into this Python: {sys.executable} -m pip install -e "
                f"'{root}[cluster]' (or, for the clone's .venv, {os.path.join(root, '.ci', 'install-python')} cluster)")
    return ("install the cluster extra: in groupd's clone, .ci/install-python cluster; for the image, build it "
            "with --build-arg GROUPD_EXTRAS=cluster")


def new_client(settings, endpoint: str, timeout: float):
    """An aetcd client of `endpoint` (`host:port`, `http://…`, `https://…` with cluster.etcd.ssl.*)."""
    try:
        import aetcd  # the `cluster` extra: only cluster mode needs it
    except ImportError:
        raise ClusterError("cluster.etcd.endpoints is set but the etcd client (aetcd) is missing: "
                           + install_cluster_extra()) from None

    url = urlsplit(endpoint if "://" in endpoint else f"http://{endpoint}")
    host = f"[{url.hostname}]" if ":" in url.hostname else url.hostname
    if url.scheme == "https":
        return _tls_client(aetcd, host, url.port or 2379, timeout, grpc_credentials(settings))
    return aetcd.Client(host, url.port or 2379, timeout=timeout)


def tls_files(settings) -> tuple[bytes | None, bytes | None, bytes | None]:
    """The PEM bytes of cluster.etcd.ssl.cafile, .keyfile and .certfile (None: not set)."""
    out = []
    for name in ("cafile", "keyfile", "certfile"):
        path = settings.value(f"cluster.etcd.ssl.{name}")
        try:
            out.append(open(path, "rb").read() if path else None)
        except OSError as e:
            raise ClusterError(f"cannot read cluster.etcd.ssl.{name}={path}: {e.strerror}") from None
    return out[0], out[1], out[2]


def grpc_credentials(settings):
    """gRPC's TLS credentials from cluster.etcd.ssl.*."""
    import grpc

    ca, key, cert = tls_files(settings)
    return grpc.ssl_channel_credentials(root_certificates=ca, private_key=key, certificate_chain=cert)


def gateway_ssl(settings) -> ssl.SSLContext:
    """The TLS context of the JSON gateway's https:// calls (the shared documents)."""
    s = settings
    try:
        context = ssl.create_default_context(cafile=s.cluster_etcd_ssl_cafile or None)
        if s.cluster_etcd_ssl_certfile:
            context.load_cert_chain(s.cluster_etcd_ssl_certfile, s.cluster_etcd_ssl_keyfile)
    except (OSError, ssl.SSLError) as e:
        raise ClusterError(f"cannot load cluster.etcd.ssl.* ({e})") from None
    return context


def reason(error: Exception) -> str:
    """gRPC's error in one line (its details, not the whole status dump)."""
    details = getattr(error, "details", None)
    text = details() if callable(details) else None
    return " ".join((text or str(error) or type(error).__name__).split())


def _tls_client(aetcd, host: str, port: int, timeout: float, credentials):
    """An aetcd client over TLS (aetcd 1.0 opens insecure channels only): the same stubs on a secure channel."""
    from aetcd import rpc, watcher

    class TlsClient(aetcd.Client):
        async def connect(self) -> None:
            if self._connected.is_set():
                return
            self.channel = rpc.secure_channel(f"{self._host}:{self._port}", credentials,
                                              options=self._options.items())
            self.kvstub = rpc.KVStub(self.channel)
            self.clusterstub = rpc.ClusterStub(self.channel)
            self.leasestub = rpc.LeaseStub(self.channel)
            self.maintenancestub = rpc.MaintenanceStub(self.channel)
            self._watcher = watcher.Watcher(rpc.WatchStub(self.channel), timeout=self._timeout,
                                            metadata=self.metadata)
            self._connected.set()

    return TlsClient(host, port, timeout=timeout)
