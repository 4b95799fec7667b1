"""The Grafana dashboard shipped with the chart: valid JSON, the data source a variable, and every
series it queries exported by colony.metrics."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from prometheus_client import REGISTRY

import colony.metrics  # noqa: F401 - defines every colony_* family

CHART = Path(__file__).resolve().parents[2] / "charts" / "colony-operator"
DASHBOARD = CHART / "dashboards" / "colony.json"
SERIES = re.compile(r"\bcolony_[a-z0-9_]+")
SUFFIXES = {"counter": ("_total", "_created"), "histogram": ("_bucket", "_count", "_sum", "_created")}


def _dashboard() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(DASHBOARD.read_text())
    return loaded


def _panels(panels: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    for panel in panels:
        yield panel
        yield from _panels(panel.get("panels") or [])


def _exported_series() -> set[str]:
    names = set()
    for family in REGISTRY.collect():
        if family.name.startswith("colony_"):
            names |= {family.name + suffix for suffix in SUFFIXES.get(family.type, ("",))}
    return names


def _queries(dashboard: dict[str, Any]) -> list[str]:
    queries = [t["expr"] for p in _panels(dashboard["panels"]) for t in p.get("targets") or []]
    for variable in dashboard["templating"]["list"]:
        if variable["type"] == "query":
            query = variable["query"]
            queries.append(query["query"] if isinstance(query, dict) else query)
    return queries


def test_dashboard_is_json_with_a_datasource_variable_used_by_every_panel() -> None:
    dashboard = _dashboard()
    variables = {v["name"]: v for v in dashboard["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource"
    assert variables["datasource"]["query"] == "prometheus"
    panels = [p for p in _panels(dashboard["panels"]) if p["type"] != "row"]
    assert panels
    for panel in panels:
        assert panel["datasource"]["uid"] == "${datasource}", panel["title"]
        assert panel["targets"], panel["title"]
        assert all(t["datasource"]["uid"] == "${datasource}" for t in panel["targets"])
    assert len({p["id"] for p in _panels(dashboard["panels"])}) == len(list(_panels(dashboard["panels"])))


def test_every_queried_metric_exists_in_colony_metrics() -> None:
    exported = _exported_series()
    queried = {name for query in _queries(_dashboard()) for name in SERIES.findall(query)}
    assert queried, "the dashboard queries no colony_* metric"
    assert queried <= exported, sorted(queried - exported)


def test_dashboard_has_a_panel_for_each_metric_family() -> None:
    queried = {name for query in _queries(_dashboard()) for name in SERIES.findall(query)}
    families = {f.name for f in REGISTRY.collect() if f.name.startswith("colony_")}
    missing = {
        family
        for family in families
        if not any(name == family or name.startswith(family + "_") for name in queried)
    }
    assert not missing, sorted(missing)


def _helm() -> str | None:
    cached = sorted(Path.home().glob(".cache/colony-operator/bin/*/helm"))
    return str(cached[-1]) if cached else shutil.which("helm")


def test_chart_ships_the_dashboard_in_a_labelled_configmap_only_when_enabled() -> None:
    helm = _helm()
    if helm is None:
        pytest.skip("no helm binary (make tools builds it)")
    template = ["template", "r", str(CHART), "--show-only", "templates/grafana-dashboard.yaml"]
    rendered = subprocess.run(
        [helm, *template, "--set", "grafanaDashboard.enabled=true"],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout
    configmap = yaml.safe_load(rendered)
    assert configmap["kind"] == "ConfigMap"
    assert configmap["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert json.loads(configmap["data"]["colony.json"]) == _dashboard()
    disabled = subprocess.run([helm, *template], capture_output=True, text=True, check=False, timeout=60)
    assert "ConfigMap" not in disabled.stdout
