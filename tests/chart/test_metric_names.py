"""Alerts, Grafana alert rules and the dashboard use only metrics hangwatch exports.

Covers: the sidecar and operator parts of known_metrics.py are exactly the families
the real exporters serve (the sidecar's `registry_for` over a `SidecarState`, the
operator's `operator_metrics.REGISTRY`; text format, counters with `_total`,
prometheus_client's `_created` companions left out); every metric name in the
PrometheusRule's expressions, in the Grafana alert rules' queries and in every
dashboard target (and variable query) is a known sidecar or operator metric (or
Prometheus's own `up`); the PromQL reader used for this finds metric names and ignores
functions, labels, keywords and ranges.
"""

from __future__ import annotations

import json
import re
from typing import Any

import yaml
from prometheus_client import generate_latest

from hangwatch_sidecar.metrics import registry_for
from hangwatch_sidecar.state import SidecarState
from tests.chart.known_metrics import OPERATOR_METRICS, SIDECAR_METRICS, is_known
from tests.chart.rendering import CHART, metric_names, only, prometheus_rule_groups, render


def test_sidecar_list_matches_the_real_exporter() -> None:
    text = generate_latest(registry_for(lambda: SidecarState(started_ts=0))).decode()
    exported = set(re.findall(r"^# TYPE (\S+) ", text, flags=re.MULTILINE))
    assert exported == set(SIDECAR_METRICS)


def test_operator_list_matches_the_real_exporter() -> None:
    from hangwatch_operator.operator_metrics import REGISTRY

    text = generate_latest(REGISTRY).decode()
    exported = set(re.findall(r"^# TYPE (\S+) ", text, flags=re.MULTILINE))
    assert {name for name in exported if not name.endswith("_created")} == set(OPERATOR_METRICS)


def test_metric_reader() -> None:
    expr = (
        'histogram_quantile(0.95, sum by (le) (rate(a_bucket{job="x", le!="1"}[5m]))) '
        '/ on (pod) group_left (verdict) (b == bool 1) or vector(0) and absent(up{job=~"y"})'
    )
    assert metric_names(expr) == {"a_bucket", "b", "up"}


def _unknown(exprs: list[str]) -> dict[str, set[str]]:
    found = {e: {m for m in metric_names(e) if not is_known(m)} for e in exprs}
    return {e: names for e, names in found.items() if names}


def test_prometheus_rules_use_known_metrics() -> None:
    exprs = [rule["expr"] for group in prometheus_rule_groups() for rule in group["rules"]]
    assert all(metric_names(e) for e in exprs)
    assert _unknown(exprs) == {}


def test_grafana_rules_use_known_metrics() -> None:
    values = {"monitoring": {"grafana": {"alerts": {"enabled": True}}}}
    config_map = only(render(values), "ConfigMap", "hangwatch-grafana-alerts")
    provisioning: dict[str, Any] = yaml.safe_load(config_map["data"]["hangwatch-alerts.yaml"])
    exprs = [
        query["model"]["expr"]
        for group in provisioning["groups"]
        for rule in group["rules"]
        for query in rule["data"]
        if "expr" in query["model"]
    ]
    assert len(exprs) >= 12
    assert _unknown(exprs) == {}


def test_dashboard_uses_known_metrics() -> None:
    for path in (CHART / "files" / "dashboards").glob("*.json"):
        dashboard = json.loads(path.read_text())
        exprs = [t["expr"] for p in dashboard["panels"] for t in p.get("targets", [])]
        exprs += [
            re.sub(r"^label_values\((.*),\s*\w+\)$", r"\1", v["query"])
            for v in dashboard["templating"]["list"]
            if v["type"] == "query"
        ]
        assert len(exprs) > 20
        assert _unknown(exprs) == {}, path.name
