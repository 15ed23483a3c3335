"""A real Prometheus (Debian's, installed by .ci/install-clients) scraping a test's groupd with the
compose file's config/prometheus.yml: its groupd job pointed at the test's metrics port, scraping
every 500 ms, and the alert rules it names."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request

import yaml

from .process import ROOT, free_port

CONFIG_DIR = os.path.join(ROOT, "config")


def config_for(target: str) -> dict:
    """config/prometheus.yml, pointed at `target`, scraping every 500 ms; rule files by absolute path."""
    with open(os.path.join(CONFIG_DIR, "prometheus.yml")) as f:
        config = yaml.safe_load(f)
    jobs = [job for job in config["scrape_configs"] if job["job_name"] == "groupd"]
    assert jobs, "config/prometheus.yml has a scrape job named groupd"
    jobs[0]["static_configs"] = [{"targets": [target]}]
    jobs[0]["scrape_interval"] = "500ms"
    config["scrape_configs"] = jobs
    config.setdefault("global", {})["scrape_interval"] = "500ms"
    config["rule_files"] = [os.path.join(CONFIG_DIR, f) for f in config.get("rule_files", [])]
    return config


class Prometheus:
    def __init__(self, tmp_path, target: str) -> None:
        binary = shutil.which("prometheus")
        assert binary, "Debian's prometheus is installed by .ci/install-clients"
        self.log = tmp_path / "prometheus.log"
        config = tmp_path / "prometheus.yml"
        config.write_text(yaml.safe_dump(config_for(target)))
        self.port = free_port()
        self.process = subprocess.Popen(
            [binary, f"--config.file={config}", f"--storage.tsdb.path={tmp_path / 'tsdb'}",
             f"--web.listen-address=127.0.0.1:{self.port}"],
            stdout=subprocess.DEVNULL, stderr=open(self.log, "wb"))

    def api(self, path: str, **params) -> dict:
        """The JSON answer of /api/v1/<path>, also for a 400 (a query that does not parse)."""
        url = f"http://127.0.0.1:{self.port}/api/v1/{path}?" + urllib.parse.urlencode(params)
        try:
            return json.load(urllib.request.urlopen(url, timeout=5))
        except urllib.error.HTTPError as e:
            if e.code != 400:
                raise  # 503 while Prometheus starts
            return json.load(e)

    def query(self, expr: str) -> list:
        try:
            return self.api("query", query=expr)["data"]["result"]
        except (OSError, KeyError):
            return []

    def eventually(self, expr: str, check, timeout: float = 60.0) -> list:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            result = self.query(expr)
            if result and check(result):
                return result
            time.sleep(0.5)
        raise AssertionError(f"{expr}: {self.query(expr)}; prometheus log: {self.log.read_text()[-1500:]}")

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(20)
