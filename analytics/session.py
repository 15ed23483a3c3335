"""A Spark session set up for the pipeline: local by default, any master URL otherwise."""

from __future__ import annotations

import glob
import os
import shutil
import sys
from urllib.parse import urlparse

DEFAULT_MASTER = "local[*]"


def ensure_java() -> None:
    """Spark 4 needs Java 17 or later: use JAVA_HOME or `java` on PATH, else the newest JDK
    under /usr/lib/jvm (Debian's layout)."""
    if os.environ.get("JAVA_HOME") or shutil.which("java"):
        return
    for home in sorted(glob.glob("/usr/lib/jvm/java-*-openjdk*"), reverse=True):
        if os.path.exists(os.path.join(home, "bin", "java")):
            os.environ["JAVA_HOME"] = home
            return
    raise RuntimeError("Spark needs Java 17 or later: install it (apt-get install openjdk-17-jre-headless) "
                       "or set JAVA_HOME")


def _loopback(master: str) -> bool:
    if master.startswith("local"):
        return True
    host = urlparse(master).hostname or ""
    return host in ("127.0.0.1", "localhost", "::1")


def build(master: str | None = None, app_name: str = "groupd-analytics", conf: dict[str, str] | None = None):
    """A new (or the running) SparkSession. Python workers run this interpreter (the one that has
    groupd installed) unless `spark.pyspark.python` says otherwise; the UI and console progress
    bars are off; timestamps are UTC. `conf` overrides any of it. The `groupd_offsets` data source
    is registered."""
    from pyspark.sql import SparkSession

    ensure_java()
    master = master or DEFAULT_MASTER
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    if _loopback(master):
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")  # bind the driver to loopback only
    settings = {
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.session.timeZone": "UTC",
        "spark.pyspark.python": sys.executable,
        "spark.driver.memory": "2g",
    }
    if master.startswith("local"):
        settings["spark.sql.shuffle.partitions"] = "4"
    if _loopback(master) and not master.startswith("local"):
        settings["spark.driver.host"] = "127.0.0.1"
    settings.update(conf or {})
    builder = SparkSession.builder.master(master).appName(app_name)
    for key, value in settings.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    from .source import register

    register(spark)
    return spark


def shutdown(spark) -> None:
    """Stop the session and the JVM that pyspark started for it (spark.stop() alone leaves the
    JVM running until this Python process exits): for long-lived processes such as test runs."""
    from pyspark import SparkContext

    spark.stop()
    gateway = SparkContext._gateway
    if gateway is None:
        return
    proc = getattr(gateway, "proc", None)
    try:
        gateway.shutdown()
    finally:
        SparkContext._gateway = None
        SparkContext._jvm = None
        if proc is not None and proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(30)
            except Exception:  # noqa: BLE001 — a JVM that ignores SIGTERM is killed
                proc.kill()
                proc.wait()
