"""The alert rules and the Grafana dashboard in config/: promtool checks the rules and proves each
alert fires on the series that should fire it (config/prometheus-rules.test.yml); a real Prometheus
loads the rules and answers every dashboard query while it scrapes a groupd with lag to show; the
compose file provisions both."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import urllib.request

import pytest
import yaml

from tests.support.process import ROOT, commit_offsets, free_port
from tests.support.prometheus import CONFIG_DIR, Prometheus

RULES = os.path.join(CONFIG_DIR, "prometheus-rules.yml")
DASHBOARD = os.path.join(CONFIG_DIR, "grafana", "dashboards", "groupd.json")
ALERTS = {"GroupdGroupNotStable", "GroupdLagGrowing", "GroupdMembersExpiring", "GroupdLogWriteErrors"}
# Grafana's variables, as Grafana substitutes them (the `group` variable's "All" is its allValue)
GRAFANA_VARIABLES = {"$__rate_interval": "1m", "$group": ".+"}


def promtool(*args: str) -> subprocess.CompletedProcess:
    binary = shutil.which("promtool")
    assert binary, "Debian's promtool is installed by .ci/install-clients"
    return subprocess.run([binary, *args], cwd=CONFIG_DIR, capture_output=True, text=True, timeout=120)


def test_alert_rules_pass_promtool_check_and_their_unit_tests():
    checked = promtool("check", "rules", RULES)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    tested = promtool("test", "rules", "prometheus-rules.test.yml")
    assert tested.returncode == 0, tested.stdout + tested.stderr
    with open(os.path.join(CONFIG_DIR, "prometheus-rules.test.yml")) as f:
        unit = yaml.safe_load(f)
    fired = {t["alertname"] for case in unit["tests"] for t in case["alert_rule_test"] if t["exp_alerts"]}
    assert fired == ALERTS, "every alert has a case where it fires"


def dashboard_queries() -> list[tuple[str, str]]:
    """(panel title, PromQL) of every panel target, Grafana's variables substituted."""
    with open(DASHBOARD) as f:
        dashboard = json.load(f)
    queries = []
    for panel in dashboard["panels"]:
        for target in panel.get("targets", []):
            expr = target["expr"]
            for name, value in GRAFANA_VARIABLES.items():
                expr = expr.replace(name, value)
            queries.append((panel["title"], expr))
    for variable in dashboard["templating"]["list"]:
        queries.append((f"variable {variable['name']}",
                        re.fullmatch(r"label_values\((\w+), \w+\)", variable["query"]["query"]).group(1)))
    return queries


def exported_names(metrics_url: str) -> set[str]:
    """Every series name groupd's exposition declares (histograms with their _bucket/_sum/_count)."""
    text = urllib.request.urlopen(metrics_url, timeout=5).read().decode()
    names = set()
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split()
            names.add(name)
            if kind == "histogram":
                names.update(name + suffix for suffix in ("_bucket", "_sum", "_count"))
    return names


def test_compose_provisions_the_rules_and_a_grafana_with_the_dashboard():
    with open(os.path.join(ROOT, "docker-compose.yml")) as f:
        services = yaml.safe_load(f)["services"]
    with open(os.path.join(CONFIG_DIR, "prometheus.yml")) as f:
        rule_files = yaml.safe_load(f)["rule_files"]
    assert [f"./config/{name}:/etc/prometheus/{name}:ro" for name in rule_files] == [
        v for v in services["prometheus"]["volumes"] if "rules" in v]
    grafana = services["grafana"]
    assert re.fullmatch(r"grafana/grafana:[\d.]+", grafana["image"]), "a pinned version"
    mounts = dict(v.removesuffix(":ro").split(":") for v in grafana["volumes"])
    assert mounts["./config/grafana/provisioning"] == "/etc/grafana/provisioning"
    with open(os.path.join(CONFIG_DIR, "grafana", "provisioning", "dashboards", "groupd.yml")) as f:
        (provider,) = yaml.safe_load(f)["providers"]
    assert mounts["./config/grafana/dashboards"] == provider["options"]["path"]
    with open(os.path.join(CONFIG_DIR, "grafana", "provisioning", "datasources", "prometheus.yml")) as f:
        (source,) = yaml.safe_load(f)["datasources"]
    assert source["url"] == "http://prometheus:9090" and "prometheus" in services
    with open(DASHBOARD) as f:
        dashboard = json.load(f)
    used = {t["datasource"]["uid"] for p in dashboard["panels"] for t in p.get("targets", [])}
    assert used == {source["uid"]}


@pytest.mark.clients
def test_every_dashboard_query_parses_and_reads_only_groupd_series(start_groupd, tmp_path):
    port = free_port()
    server = start_groupd("topics=shown:2", "records.plane=memory", "group.initial.rebalance.delay.ms=0",
                          f"metrics.listener=http://127.0.0.1:{port}/metrics")
    metrics_url = f"http://127.0.0.1:{port}/metrics"
    commit_offsets(server.bootstrap, "dashboarded", "shown", {0: 0})
    names = exported_names(metrics_url)
    prom = Prometheus(tmp_path, f"127.0.0.1:{port}")
    try:
        rules = prom.eventually("up", lambda r: True) and prom.api("rules")["data"]["groups"]
        assert {r["name"] for g in rules for r in g["rules"] if r["type"] == "alerting"} == ALERTS
        assert all(r["health"] != "err" for g in rules for r in g["rules"])
        prom.eventually('groupd_consumergroup_group_sum_lag{group="dashboarded"}', lambda r: True)
        for title, expr in dashboard_queries():
            answer = prom.api("query", query=expr)
            assert answer["status"] == "success", f"{title}: {expr}: {answer.get('error')}"
            referenced = set(re.findall(r"\bgroupd_\w+", expr))
            assert referenced, f"{title}: {expr} reads no groupd series"
            assert referenced <= names, f"{title}: {expr}: groupd exports no {referenced - names}"
        lag = prom.query(dict(dashboard_queries())["Lag per group"])
        assert [(s["metric"]["group"], s["value"][1]) for s in lag] == [("dashboarded", "0")]
    finally:
        prom.stop()
