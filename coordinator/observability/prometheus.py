"""prometheus_client as groupd uses it: the registry, the metric classes and families, without the
package's `__init__` (storage/package_entry.py), which imports the exposition module and with it
http.server, wsgiref and urllib.request for the push gateway and the WSGI/ASGI servers groupd never
starts (~16 ms of a server's start-up). The text exposition is imported at the first scrape.

Every groupd module takes prometheus_client's names from here, so this runs before anything registers."""

from __future__ import annotations

from groupd.storage.package_entry import enter_without_init

enter_without_init("prometheus_client")

# the default collectors (python_gc_*, python_info, process_*), registered in the order the package's
# __init__ registers them, so the exposition lists them as before; `import a.b` asks `a` for nothing
import prometheus_client.gc_collector  # noqa: E402,F401
import prometheus_client.platform_collector  # noqa: E402,F401
import prometheus_client.process_collector  # noqa: E402,F401
import prometheus_client.values  # noqa: E402,F401  (before metrics, whose `from . import values` would ask the package)
from prometheus_client.metrics import Counter, Gauge, Histogram, disable_created_metrics  # noqa: E402
from prometheus_client.metrics_core import (  # noqa: E402
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
)
from prometheus_client.registry import REGISTRY  # noqa: E402
from prometheus_client.utils import floatToGoString  # noqa: E402

__all__ = ["REGISTRY", "Counter", "CounterMetricFamily", "Gauge", "GaugeMetricFamily", "Histogram",
           "HistogramMetricFamily", "disable_created_metrics", "exposition", "floatToGoString"]


def exposition() -> tuple[bytes, str]:
    """The registry in Prometheus' text format, and its content type."""
    from prometheus_client.exposition import CONTENT_TYPE_LATEST, generate_latest
    return generate_latest(REGISTRY), CONTENT_TYPE_LATEST


def content_type() -> str:
    from prometheus_client.exposition import CONTENT_TYPE_LATEST
    return CONTENT_TYPE_LATEST
