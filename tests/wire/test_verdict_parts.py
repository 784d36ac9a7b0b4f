"""Each verdict is declared once with all its parts, and every other place agrees with it.

Covers: `hangwatch.verdicts.VERDICTS` declares each `Verdict` exactly once, a table
missing one is refused naming it, and a declaration cannot be built without a part;
the operator's `spec.actions` fields, default actions, restart refusals and cordon rule
(`hangwatch_operator.policies`) and the verdicts a sidecar may not claim derive from it;
the CRD (crds/producerhealthpolicy.yaml; the chart's copy is checked identical
elsewhere) has exactly the declared `spec.actions` fields with the declared defaults,
CEL rules that refuse restart and decommission for exactly the verdicts a restart cannot
help, cordonNode for all but the node's, and verdict enums and counts of exactly the
declared verdicts; each declared alert is a rule of charts/hangwatch/files/alerts.yaml and
each alert on a verdict is declared by that verdict; the dashboard's per-verdict panels
are exactly the declared ones; the run report draws each verdict in its declared colour,
all distinct; docs/contracts.md carries the declared table.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from hangwatch.contracts import Operation, Verdict
from hangwatch.verdicts import (
    VERDICTS,
    DeclarationError,
    VerdictParts,
    _check,
    contracts_table,
    parts_of,
)
from hangwatch_demo.report.figures import verdict_colour
from hangwatch_operator.policies import (
    ACTION_FIELDS,
    DEFAULT_ACTIONS,
    InvalidPolicyError,
    parse_policy,
)
from hangwatch_operator.sidecar_status import OPERATOR_ONLY
from hangwatch_testing.structural import version_schema

ROOT = Path(__file__).resolve().parents[2]
ALERTS = ROOT / "charts" / "hangwatch" / "files" / "alerts.yaml"
DASHBOARD = ROOT / "charts" / "hangwatch" / "files" / "dashboards" / "hangwatch.json"
MATCHER = re.compile(r'verdict="([a-z_]+)"')
FIELD = re.compile(r"has\(self\.(\w+)\)")


def _fields(*, restart: bool | None = None, node: bool | None = None) -> set[str]:
    """The declared `spec.actions` fields, of the verdicts with these parts."""
    return {
        p.action_field
        for p in VERDICTS
        if p.action_field is not None
        and (restart is None or p.restart_may_help is restart)
        and (node is None or p.node_at_fault is node)
    }


def test_every_verdict_is_declared_once() -> None:
    assert [p.verdict for p in VERDICTS] == list(Verdict)
    assert all(parts_of(v).verdict is v for v in Verdict)
    with pytest.raises(DeclarationError, match="node_network_fault"):
        _check(VERDICTS[:-1])
    with pytest.raises(DeclarationError, match="once"):
        _check((*VERDICTS, VERDICTS[0]))


def test_a_declaration_lacking_a_part_does_not_build() -> None:
    parts: dict[str, Any] = {
        "verdict": Verdict.UNKNOWN,
        "meaning": "m",
        "judged_by": VERDICTS[0].judged_by,
        "default_actions": (),
        "restart_may_help": False,
        "node_at_fault": False,
        "colour": "#000000",
        "alerts": (),
        "panel": None,
    }
    VerdictParts(**parts)
    for name in parts:
        with pytest.raises(TypeError, match=name):
            VerdictParts(**{k: v for k, v in parts.items() if k != name})
    bad = VerdictParts(**{**parts, "colour": "red"})
    with pytest.raises(DeclarationError, match="colour"):
        _check(tuple(bad if p.verdict is Verdict.UNKNOWN else p for p in VERDICTS))


def test_the_operator_derives_its_actions_from_the_declaration() -> None:
    assert set(ACTION_FIELDS) == _fields()
    assert all(ACTION_FIELDS[f] is parts_of(ACTION_FIELDS[f]).verdict for f in ACTION_FIELDS)
    assert {
        p.verdict: p.default_actions for p in VERDICTS if p.default_actions is not None
    } == DEFAULT_ACTIONS
    assert {p.verdict for p in VERDICTS if p.judged_by.value == "operator"} == OPERATOR_ONLY


@pytest.mark.parametrize("field", sorted(_fields(restart=False)))
def test_the_operator_refuses_a_restart_for_each_verdict_a_restart_cannot_help(
    field: str,
) -> None:
    for action in (Operation.RESTART, Operation.DECOMMISSION):
        body = {"spec": {"kafka": {"bootstrapServers": ["k:9092"]}, "actions": {field: [action]}}}
        with pytest.raises(InvalidPolicyError, match=f"spec.actions.{field}: restarting"):
            parse_policy(body)


def _actions_schema() -> dict[str, Any]:
    schema: dict[str, Any] = version_schema()["properties"]["spec"]["properties"]["actions"]
    return schema


def test_the_crd_has_each_declared_action_field_with_its_default() -> None:
    properties = _actions_schema()["properties"]
    assert set(properties) - {"autoUncordon"} == _fields()
    for parts in VERDICTS:
        if parts.action_field is not None:
            declared = [str(a) for a in parts.default_actions or ()]
            assert properties[parts.action_field]["default"] == declared, parts.verdict


def _rule_fields(message: str) -> set[str]:
    rules = [r for r in _actions_schema()["x-kubernetes-validations"] if message in r["message"]]
    assert len(rules) == 1, message
    return set(FIELD.findall(rules[0]["rule"]))


def test_the_crd_rules_follow_each_verdicts_restart_and_node_parts() -> None:
    assert _rule_fields("restart and decommission are not allowed") == _fields(restart=False)
    assert _rule_fields("exclude each other") == _fields(restart=True)
    assert _rule_fields("cordonNode is only allowed") == _fields(node=False)
    message = next(
        " ".join(r["message"].split())
        for r in _actions_schema()["x-kubernetes-validations"]
        if "not allowed" in r["message"]
    )
    named = re.match(r"restart and decommission are not allowed for ([^:]+):", message)
    assert named is not None
    assert set(re.split(r",? or |, ", named.group(1))) == _fields(restart=False)


def test_the_crd_verdict_enums_and_counts_are_the_declared_verdicts() -> None:
    status = version_schema()["properties"]["status"]["properties"]
    counts = set(status["verdictCounts"]["properties"]) - {"sidecar_unreachable"}
    assert counts == {str(p.verdict) for p in VERDICTS}
    enum = status["lastAction"]["properties"]["verdict"]["enum"]
    assert enum == [str(p.verdict) for p in VERDICTS]


def _alerts() -> dict[str, str]:
    doc = yaml.safe_load(ALERTS.read_text())
    return {a["name"]: a["expr"] for g in doc["groups"] for a in g["alerts"]}


def test_each_declared_alert_is_a_chart_rule_and_each_verdict_alert_is_declared() -> None:
    alerts = _alerts()
    for parts in VERDICTS:
        for name in parts.alerts:
            assert name in alerts, f"{parts.verdict}: no alert {name} in {ALERTS.name}"
    for name, expr in alerts.items():
        for verdict in MATCHER.findall(expr):
            assert name in parts_of(Verdict(verdict)).alerts, f"{name} is not {verdict}'s"


def test_the_dashboards_verdict_panels_are_the_declared_ones() -> None:
    panels = json.loads(DASHBOARD.read_text())["panels"]
    shown = {
        p["title"]: MATCHER.findall(t["expr"])
        for p in panels
        for t in p.get("targets", [])
        if MATCHER.search(t["expr"])
    }
    declared = {p.panel.title: [str(p.verdict)] for p in VERDICTS if p.panel is not None}
    assert shown == declared


def test_the_report_draws_each_verdict_in_its_own_colour() -> None:
    colours = [verdict_colour(p.verdict) for p in VERDICTS]
    assert colours == [p.colour for p in VERDICTS]
    assert len(set(colours)) == len(colours)


def test_the_contracts_page_carries_the_declared_table() -> None:
    assert contracts_table() in (ROOT / "docs" / "contracts.md").read_text(), (
        "run: python3 scripts/generate_references.py"
    )
