"""The Grafana dashboard (config/grafana/dashboards/groupd.json) against Grafana's dashboard JSON
model and the rules of importing it into a Grafana that already has its own data sources.

No Grafana runs here, so the rules are checked on the file: the classic JSON model's required
fields (title, uid, schemaVersion, panels with unique ids and a gridPos on the 24-column grid,
templating variables of a known type), and what makes an import work in any Grafana:

- no panel, target or variable names a data source by a fixed uid: each one refers to the
  `datasource` template variable (type `datasource`, plugin `prometheus`), which Grafana fills in
  with the default Prometheus data source of wherever the dashboard lands, and lets the viewer
  pick another; the compose provisioning's data source is that default;
- no `${DS_…}` input placeholder: Grafana's import form substitutes `__inputs`, but file
  provisioning (docker-compose) does not, so a placeholder would break one of the two;
- `__requires` names the Grafana version, the data source plugin and every panel type used (the
  import page checks them);
- no numeric `id` (an import assigns one), and every variable a query uses is defined.
"""

from __future__ import annotations

import json
import os
import re

import yaml

from tests.support.process import ROOT
from tests.support.prometheus import CONFIG_DIR

DASHBOARD = os.path.join(CONFIG_DIR, "grafana", "dashboards", "groupd.json")
SOURCES = os.path.join(CONFIG_DIR, "grafana", "provisioning", "datasources", "prometheus.yml")
# 36: data sources are referenced as {type, uid} objects; 40: the newest the compose's Grafana 11.4 knows
SCHEMA_VERSIONS = range(36, 41)
VARIABLE_TYPES = {"query", "adhoc", "constant", "datasource", "interval", "textbox", "custom", "groupby"}
GLOBALS = {"__rate_interval", "__interval", "__interval_ms", "__range", "__range_s", "__range_ms", "__all",
           "__from", "__to", "__dashboard", "__name", "__org", "__user", "__timeFilter"}
DS_VARIABLE = "datasource"
VARIABLE_REF = re.compile(r"\$\{(\w+)(?::\w+)?\}|\$(\w+)|\[\[(\w+)\]\]")


def load() -> dict:
    with open(DASHBOARD) as f:
        return json.load(f)


def all_panels(dashboard: dict) -> list[dict]:
    out = []
    for panel in dashboard["panels"]:
        out.append(panel)
        out.extend(panel.get("panels", []))  # a collapsed row keeps its panels inside
    return out


def datasource_refs(node, path="") -> list[tuple[str, object]]:
    """(where, value) of every `datasource` key anywhere in the JSON."""
    found = []
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "datasource":
                found.append((f"{path}.{key}", value))
            found.extend(datasource_refs(value, f"{path}.{key}"))
    elif isinstance(node, list):
        for i, value in enumerate(node):
            found.extend(datasource_refs(value, f"{path}[{i}]"))
    return found


def test_the_dashboard_follows_grafanas_json_model():
    d = load()
    assert isinstance(d.get("title"), str) and d["title"]
    assert isinstance(d.get("uid"), str) and re.fullmatch(r"[A-Za-z0-9_-]{1,40}", d["uid"])
    assert isinstance(d.get("schemaVersion"), int) and d["schemaVersion"] in SCHEMA_VERSIONS, d.get("schemaVersion")
    assert d.get("id") is None, "an import assigns the id; a fixed one overwrites another dashboard"
    assert isinstance(d.get("templating", {}).get("list"), list)
    assert isinstance(d.get("annotations", {}).get("list"), list)
    panels = all_panels(d)
    ids = [p.get("id") for p in panels]
    assert all(isinstance(i, int) for i in ids) and len(ids) == len(set(ids)), "unique integer panel ids"
    for p in panels:
        assert isinstance(p.get("type"), str) and p["type"], p
        g = p.get("gridPos", {})
        assert all(isinstance(g.get(k), int) for k in "hwxy"), p["id"]
        assert g["h"] >= 1 and 1 <= g["w"] <= 24 and 0 <= g["x"] and g["x"] + g["w"] <= 24, (p["id"], g)
        if p["type"] == "row":
            assert p.get("collapsed") in (True, False) and isinstance(p.get("panels"), list), p["id"]
            if not p["collapsed"]:
                assert p["panels"] == [], "an open row's panels follow it at the top level"
            continue
        refs = [t.get("refId") for t in p.get("targets", [])]
        assert p.get("targets") and all(refs) and len(refs) == len(set(refs)), (p["id"], refs)
        assert all(t.get("expr") for t in p["targets"]), p["id"]
    for v in d["templating"]["list"]:
        assert re.fullmatch(r"\w+", v.get("name", "")) and v.get("type") in VARIABLE_TYPES, v
        if v["type"] == "query":
            assert v.get("refresh") in (1, 2), "query variables refresh on load or on time change"
            assert v.get("definition") and v.get("query"), v["name"]
            if v.get("includeAll"):
                assert "allValue" in v, v["name"]
    names = [v["name"] for v in d["templating"]["list"]]
    assert len(names) == len(set(names))


def test_no_data_source_is_hard_coded_so_the_dashboard_imports_anywhere():
    d = load()
    variables = {v["name"]: v for v in d["templating"]["list"]}
    ds = variables.get(DS_VARIABLE)
    assert ds is not None and ds["type"] == "datasource", "a `datasource` variable of type datasource"
    assert ds["query"] == "prometheus", "it lists the Prometheus data sources"
    assert not (ds.get("current") or {}).get("value"), "no data source uid picked in advance"
    assert list(variables).index(DS_VARIABLE) == 0, "defined before the variables that query through it"
    wanted = {"type": "prometheus", "uid": "${" + DS_VARIABLE + "}"}
    refs = datasource_refs(d)
    for where, ref in refs:
        if where.startswith(".annotations") and ref == {"type": "grafana", "uid": "-- Grafana --"}:
            continue  # Grafana's built-in annotations: present in every Grafana
        assert ref == wanted, f"{where}: {ref!r} (a fixed uid is 'datasource not found' in another Grafana)"
    for p in all_panels(d):
        if p["type"] != "row":
            assert p.get("datasource") == wanted, p["id"]
            assert all(t.get("datasource") == wanted for t in p["targets"]), p["id"]
    for v in variables.values():
        if v["type"] == "query":
            assert v.get("datasource") == wanted, v["name"]
    assert "${DS_" not in json.dumps(d) and "__inputs" not in d, (
        "file provisioning does not substitute __inputs placeholders")


def test_every_variable_a_query_uses_is_defined():
    d = load()
    defined = {v["name"] for v in d["templating"]["list"]}
    texts = [t["expr"] for p in all_panels(d) for t in p.get("targets", [])]
    texts += [v.get("definition", "") for v in d["templating"]["list"]]
    texts += [ref["uid"] for _, ref in datasource_refs(d) if isinstance(ref, dict) and "uid" in ref]
    used = {next(g for g in m.groups() if g) for text in texts for m in VARIABLE_REF.finditer(text)}
    assert used - GLOBALS <= defined, used - GLOBALS - defined


def test_requires_lists_grafana_the_data_source_plugin_and_every_panel_type():
    d = load()
    requires = {(r.get("type"), r.get("id")) for r in d.get("__requires", [])}
    assert ("grafana", "grafana") in requires and ("datasource", "prometheus") in requires, requires
    panel_types = {p["type"] for p in all_panels(d) if p["type"] != "row"}
    assert {("panel", t) for t in panel_types} <= requires, panel_types
    assert all(r.get("name") and isinstance(r.get("version"), str) for r in d["__requires"])
    assert next(r for r in d["__requires"] if r["type"] == "grafana")["version"]


def test_compose_provisions_the_data_source_the_variable_picks():
    with open(SOURCES) as f:
        (source,) = yaml.safe_load(f)["datasources"]
    variable = next(v for v in load()["templating"]["list"] if v["name"] == DS_VARIABLE)
    assert source["type"] == variable["query"] and source["isDefault"] is True, (
        "the datasource variable defaults to Grafana's default data source of its type")
    with open(os.path.join(ROOT, "docker-compose.yml")) as f:
        grafana = yaml.safe_load(f)["services"]["grafana"]
    assert re.fullmatch(r"grafana/grafana:11\.[0-9.]+", grafana["image"]), "SCHEMA_VERSIONS is for Grafana 11"
