"""The Grafana dashboard: generated, committed, well-formed, shipped by the chart.

Covers: charts/hangwatch/files/dashboards/hangwatch.json is exactly what
scripts/generate_dashboard.py (Grafana Foundation SDK) produces now, so edits go through
the generator; panels have unique ids and do not overlap on the grid; rows group the
five areas (verdicts, brokers, producers, metadata, remediation); every non-row panel
and every target uses the `${datasource}` variable, which is a Prometheus data source
variable; every target has an expr and a refId unique within its panel; the namespace,
application and node variables feed every sidecar query; each panel title appears in
docs/chart.md's panel descriptions; the chart globs each JSON file into a ConfigMap
labelled grafana_dashboard (label and namespace configurable) carrying the same JSON.
"""

from __future__ import annotations

import json
from pathlib import Path
from types import ModuleType
from typing import Any

from hangwatch_testing import scripts
from tests.chart.known_metrics import SIDECAR_METRICS
from tests.chart.rendering import CHART, ROOT, metric_names, only, render

DASHBOARDS = CHART / "files" / "dashboards"
DATASOURCE = {"type": "prometheus", "uid": "${datasource}"}


def _generator() -> ModuleType:
    return scripts.load("generate_dashboard")


def _dashboard() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((DASHBOARDS / "hangwatch.json").read_text())
    return loaded


def test_committed_json_is_the_generated_one() -> None:
    generator = _generator()
    assert Path(generator.OUTPUT) == DASHBOARDS / "hangwatch.json"
    assert generator.render() == (DASHBOARDS / "hangwatch.json").read_text(), (
        "run: python scripts/generate_dashboard.py"
    )


def test_panels_have_unique_ids_and_do_not_overlap() -> None:
    panels = _dashboard()["panels"]
    ids = [p["id"] for p in panels]
    assert len(ids) == len(set(ids)) and all(isinstance(i, int) and i > 0 for i in ids)
    cells: set[tuple[int, int]] = set()
    for panel in panels:
        grid = panel["gridPos"]
        assert grid["x"] + grid["w"] <= 24, panel["title"]
        area = {
            (x, y)
            for x in range(grid["x"], grid["x"] + grid["w"])
            for y in range(grid["y"], grid["y"] + grid["h"])
        }
        assert not cells & area, panel["title"]
        cells |= area


def test_rows_cover_the_five_areas() -> None:
    rows = [p["title"] for p in _dashboard()["panels"] if p["type"] == "row"]
    assert rows == [
        "Verdicts",
        "Brokers as seen from the pods",
        "Producers",
        "Metadata",
        "Remediation",
    ]


def test_datasource_variable_and_targets() -> None:
    dashboard = _dashboard()
    variables = {v["name"]: v for v in dashboard["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource"
    assert variables["datasource"]["query"] == "prometheus"
    for name in ("namespace", "application", "node"):
        assert variables[name]["type"] == "query"
        assert variables[name]["datasource"] == DATASOURCE
        assert variables[name]["includeAll"] and variables[name]["multi"]
    panels = [p for p in dashboard["panels"] if p["type"] != "row"]
    assert len(panels) >= 18
    for panel in panels:
        assert panel["datasource"] == DATASOURCE, panel["title"]
        assert panel["targets"], panel["title"]
        assert panel["description"], panel["title"]
        refs = [t["refId"] for t in panel["targets"]]
        assert len(refs) == len(set(refs)), panel["title"]
        for target in panel["targets"]:
            assert target["datasource"] == DATASOURCE, panel["title"]
            assert target["expr"].strip(), panel["title"]
            if metric_names(target["expr"]) & set(SIDECAR_METRICS):
                for name in ("namespace", "application", "node"):
                    assert f"${name}" in target["expr"], (panel["title"], target["expr"])


def test_panels_are_described_in_the_docs() -> None:
    docs = (ROOT / "docs" / "chart.md").read_text()
    for panel in _dashboard()["panels"]:
        if panel["type"] != "row":
            assert f"**{panel['title']}**" in docs, panel["title"]


def test_chart_ships_the_dashboard() -> None:
    values = {
        "monitoring": {
            "grafana": {
                "dashboards": {
                    "enabled": True,
                    "labelKey": "dash",
                    "labelValue": "yes",
                    "namespace": "grafana",
                }
            }
        }
    }
    config_map = only(render(values), "ConfigMap", "hangwatch-dashboard-hangwatch")
    assert config_map["metadata"]["labels"]["dash"] == "yes"
    assert config_map["metadata"]["namespace"] == "grafana"
    assert json.loads(config_map["data"]["hangwatch.json"]) == _dashboard()
    default = only(
        render({"monitoring": {"grafana": {"dashboards": {"enabled": True}}}}), "ConfigMap"
    )
    assert default["metadata"]["labels"]["grafana_dashboard"] == "1"
