"""values.yaml is documented and typed; bad values fail with a message naming the key.

Covers: every chart-defined key in values.yaml has a comment right above it (keys
inside free-form objects such as resources or securityContext belong to their parent's
comment); values.yaml and values.schema.json describe the same keys and every object
with fixed keys rejects unknown ones (`additionalProperties: false`); the defaults and
every ci/ scenario pass the schema; wrong types, unknown keys (top level and nested),
out-of-range numbers and invalid enums are rejected by the real Helm engine with a
message that names the offending path; more than one replica without peering is refused
by the chart with an explanation.
"""

from __future__ import annotations

import json
import re
from typing import Any

import helm_python as helm
import pytest
import yaml

from tests.chart.rendering import CHART, SCENARIOS, render, scenario_values

VALUES_TEXT = (CHART / "values.yaml").read_text()
SCHEMA: dict[str, Any] = json.loads((CHART / "values.schema.json").read_text())


def _node(path: list[str]) -> dict[str, Any] | None:
    """The schema node for a values path, or None inside a free-form object."""
    node = SCHEMA
    for key in path:
        props = node.get("properties")
        if props is None:
            return None
        node = props[key]
    return node


def test_every_chart_key_has_a_comment() -> None:
    lines = VALUES_TEXT.splitlines()
    stack: list[tuple[int, str]] = []
    undocumented = []
    for number, line in enumerate(lines):
        match = re.match(r"^(\s*)([A-Za-z][\w.-]*):", line)
        if not match:
            continue
        indent, key = len(match.group(1)), match.group(2)
        while stack and stack[-1][0] >= indent:
            stack.pop()
        parent = _node([k for _, k in stack])
        stack.append((indent, key))
        documented = lines[number - 1].strip().startswith("#")
        if parent is not None and "properties" in parent and not documented:
            undocumented.append(".".join(k for _, k in stack))
    assert undocumented == []


def _walk(values: Any, schema: dict[str, Any], path: str = "") -> list[str]:
    """Mismatches between a values tree and the schema's fixed-key objects."""
    problems = []
    if isinstance(values, dict) and "properties" in schema:
        if schema.get("additionalProperties") is not False:
            problems.append(f"{path or '<root>'}: unknown keys not rejected")
        declared = set(schema["properties"]) - {"global"}
        if values and set(values) != declared:  # an empty object is an unset option
            problems.append(
                f"{path or '<root>'}: values {sorted(values)} != schema {sorted(declared)}"
            )
        for key in values.keys() & declared:
            problems += _walk(values[key], schema["properties"][key], f"{path}.{key}".lstrip("."))
    return problems


def test_values_and_schema_have_the_same_keys() -> None:
    assert _walk(yaml.safe_load(VALUES_TEXT), SCHEMA) == []


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_defaults_and_scenarios_pass_the_schema(scenario: str) -> None:
    with helm.Chart.load(CHART) as chart:
        chart.validate_schema(chart.merge_values(scenario_values(scenario)))


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"operator": {"replicas": "two"}}, "at '/operator/replicas': got string, want integer"),
        ({"operatr": {"replicas": 2}}, "additional properties 'operatr' not allowed"),
        (
            {"monitoring": {"prometheusRule": {"enabeld": True}}},
            "at '/monitoring/prometheusRule': additional properties 'enabeld' not allowed",
        ),
        ({"webhook": {"failurePolicy": "Maybe"}}, "'Ignore', 'Fail'"),
        ({"webhook": {"timeoutSeconds": 45}}, "at '/webhook/timeoutSeconds'"),
        ({"sidecar": {"injectionMode": "sometimes"}}, "at '/sidecar/injectionMode'"),
        ({"sidecar": {"telemetryDir": "relative/dir"}}, "at '/sidecar/telemetryDir'"),
        ({"operator": {"metricsPort": 70000}}, "at '/operator/metricsPort'"),
        (
            {"operator": {"watch": {"namespaces": ["Not_A_Namespace"]}}},
            "/operator/watch/namespaces/0",
        ),
        (
            {"monitoring": {"alerts": {"overrides": {"HangwatchProducerHung": {"for": "soon"}}}}},
            "at '/monitoring/alerts/overrides/HangwatchProducerHung/for'",
        ),
        (
            {
                "monitoring": {
                    "alerts": {"overrides": {"HangwatchProducerHung": {"severity": "page"}}}
                }
            },
            "at '/monitoring/alerts/overrides/HangwatchProducerHung/severity'",
        ),
        (
            {"monitoring": {"grafana": {"alerts": {"orgId": "one"}}}},
            "/monitoring/grafana/alerts/orgId",
        ),
    ],
)
def test_bad_values_are_rejected_readably(values: dict[str, Any], message: str) -> None:
    with pytest.raises(helm.HelmValuesError) as caught:
        render(values)
    text = str(caught.value)
    assert "values don't meet the specifications of the schema" in text
    assert message in text


def test_replicas_without_peering_are_refused() -> None:
    with pytest.raises(helm.HelmRenderError, match=r"needs operator\.peering\.enabled=true"):
        render({"operator": {"replicas": 2, "peering": {"enabled": False}}})
