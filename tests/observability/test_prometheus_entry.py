"""coordinator/observability/prometheus.py: a server's imports take prometheus_client's registry and
metric classes without its HTTP exposition (loaded at the first scrape), register the default
collectors first as the package does, and a process that then imports the package gets all of it."""

import subprocess
import sys

CHECK = r"""
import sys
sys.modules["hypothesis"] = None  # as `groupd serve` (kio's strategies)
import groupd.coordinator.cli, groupd.coordinator.server.server  # what the server imports
assert "prometheus_client.exposition" not in sys.modules and "http.server" not in sys.modules, sorted(sys.modules)
from groupd.coordinator.observability import prometheus
from prometheus_client.registry import REGISTRY
first = [type(c).__name__ for c in REGISTRY._collector_to_names][:3]
assert first == ["GCCollector", "PlatformCollector", "ProcessCollector"], first
text, kind = prometheus.exposition()
assert b"groupd_connections_opened_total 0.0" in text and b"process_cpu_seconds_total" in text, text[:300]
import prometheus_client
from prometheus_client import REGISTRY as Same, generate_latest, start_http_server
assert Same is REGISTRY and kind == prometheus_client.CONTENT_TYPE_LATEST
assert "__getattr__" not in vars(prometheus_client)  # completed once, then a plain package
print(generate_latest(REGISTRY).count(b"# TYPE"))
"""


def test_the_registry_without_the_exposition_then_the_whole_package():
    out = subprocess.run([sys.executable, "-c", CHECK], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert int(out.stdout) > 10


def test_a_process_that_imported_prometheus_client_first_keeps_it():
    code = "import prometheus_client, sys; import groupd.coordinator.observability.metrics; " \
           "assert sys.modules['prometheus_client'] is prometheus_client; " \
           "assert '__getattr__' not in vars(prometheus_client)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
