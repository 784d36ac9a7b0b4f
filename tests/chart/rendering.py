"""Renders the chart with the real Helm v4 engine (helm-python-sdk), and reads PromQL.

Not a test module: helpers for the chart tests. Scenarios are the chart's own
`ci/*-values.yaml` files plus `default` (no values); each renders once per session.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import helm_python as helm
import yaml

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "charts" / "hangwatch"
RELEASE = "hangwatch"
NAMESPACE = "hangwatch-system"
SCENARIOS = [
    "default",
    *sorted(p.name.removesuffix("-values.yaml") for p in (CHART / "ci").glob("*-values.yaml")),
]

ALERTS_ON = {
    "monitoring": {"prometheusRule": {"enabled": True}, "operatorServiceMonitor": {"enabled": True}}
}
"""Values that render every alert (HangwatchOperatorDown needs the operator ServiceMonitor)."""


@dataclass(frozen=True)
class Rendered:
    """One object of a rendered release, with the template that produced it."""

    template: str
    obj: dict[str, Any]

    @property
    def kind(self) -> str:
        return str(self.obj["kind"])

    @property
    def name(self) -> str:
        return str(self.obj["metadata"]["name"])


def scenario_values(scenario: str) -> dict[str, Any]:
    if scenario == "default":
        return {}
    loaded: dict[str, Any] = yaml.safe_load((CHART / "ci" / f"{scenario}-values.yaml").read_text())
    return loaded


def render_raw(values: dict[str, Any], namespace: str = NAMESPACE) -> dict[str, str]:
    """Template path -> rendered text, as `helm template` would print it."""
    with helm.Chart.load(CHART) as chart:
        return chart.render(values, name=RELEASE, namespace=namespace, is_install=True)


def render(values: dict[str, Any], namespace: str = NAMESPACE) -> list[Rendered]:
    """Every object the chart renders for these values (NOTES.txt left out)."""
    objects = []
    for template, text in sorted(render_raw(values, namespace).items()):
        if template.endswith("NOTES.txt"):
            continue
        for doc in yaml.safe_load_all(text):
            if doc:
                objects.append(Rendered(template.removeprefix(f"{RELEASE}/"), doc))
    return objects


@functools.cache
def _scenario(scenario: str) -> tuple[Rendered, ...]:
    return tuple(render(scenario_values(scenario)))


def rendered(scenario: str) -> list[Rendered]:
    return list(_scenario(scenario))


def only(objects: list[Rendered], kind: str, name: str | None = None) -> dict[str, Any]:
    """The single object of a kind (and name); fails listing what there is."""
    found = [o.obj for o in objects if o.kind == kind and (name is None or o.name == name)]
    assert len(found) == 1, f"expected one {kind} {name or ''}, got {len(found)}: " + ", ".join(
        f"{o.kind}/{o.name}" for o in objects
    )
    return found[0]


def kinds(objects: list[Rendered]) -> set[str]:
    return {o.kind for o in objects}


@functools.cache
def _prometheus_rule() -> dict[str, Any]:
    return only(render(ALERTS_ON), "PrometheusRule")


def prometheus_rule_groups() -> list[dict[str, Any]]:
    """The rule groups of the PrometheusRule (a Prometheus rule file's `groups`)."""
    groups: list[dict[str, Any]] = _prometheus_rule()["spec"]["groups"]
    return groups


_PROMQL_KEYWORDS = {
    "by",
    "without",
    "on",
    "ignoring",
    "group_left",
    "group_right",
    "and",
    "or",
    "unless",
    "bool",
    "offset",
}


def metric_names(expr: str) -> set[str]:
    """Metric names a PromQL expression reads (functions, labels and keywords left out)."""
    text = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)
    text = re.sub(r"\{[^}]*\}", " ", text)
    text = re.sub(r"\[[^\]]*\]", " ", text)
    text = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", text)
    names = set()
    for match in re.finditer(r"(?<![\w$.])([a-zA-Z_:][a-zA-Z0-9_:]*)\s*(\(?)", text):
        word, call = match.group(1), match.group(2)
        if not call and word not in _PROMQL_KEYWORDS:
            names.add(word)
    return names
