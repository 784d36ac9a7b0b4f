"""The alerts: valid for Prometheus, unit-tested with promtool, identical in Grafana.

Covers: the PrometheusRule's groups pass `promtool check rules`; `promtool test rules`
runs tests/chart/rules_test.yaml (completed with the expected annotations rendered from
the rules' templates, `alertname: "*"` expanded to every alert) and every alert has a
case where it fires, including that a 1-2 s leader election fires nothing; every `for`
is at least 2 minutes, but for the remediation alerts, which read only the operator's
remediation series and group by its labels (`operator_metrics.REMEDIATION_LABELS`);
every verdict, class, action and reason an expression matches is a contract value;
annotations use only `{{ $labels.x }}` of labels the expression
keeps and no `$value`; the Grafana-managed rules (alerting file provisioning,
`apiVersion: 1`) are structurally valid and express the same alerts as the
PrometheusRule (names/titles, expressions, for, labels with severity, annotations), also
after `monitoring.alerts` overrides, disabled alerts and extra labels; the uids are
unique and valid Grafana uids; HangwatchOperatorDown only exists with the operator
ServiceMonitor; docs/chart.md has a runbook section per alert at the runbook_url anchor.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from tests.chart.rendering import (
    ALERTS_ON,
    ROOT,
    metric_names,
    only,
    prometheus_rule_groups,
    render,
)
from tests.chart.schemas import DURATION, closed, non_empty

PROMTOOL = shutil.which("promtool")
HERE = Path(__file__).resolve().parent
LABEL_REF = re.compile(r"\{\{\s*\$labels\.(\w+)\s*\}\}")


def _promtool() -> str:
    if PROMTOOL is None:
        pytest.fail("promtool is missing: apt-get install prometheus (see scripts/setup.sh)")
    return PROMTOOL


def _rules() -> list[dict[str, Any]]:
    return [rule for group in prometheus_rule_groups() for rule in group["rules"]]


def _write_rules(directory: Path) -> Path:
    path = directory / "rules.yaml"
    path.write_text(yaml.safe_dump({"groups": prometheus_rule_groups()}, sort_keys=False))
    return path


def _expand(template: str, labels: dict[str, str]) -> str:
    def label(match: re.Match[str]) -> str:
        assert match.group(1) in labels, f"{template!r} uses a label the alert lacks"
        return labels[match.group(1)]

    return LABEL_REF.sub(label, template)


def completed_unit_tests() -> dict[str, Any]:
    """rules_test.yaml with exp_annotations filled in and `*` expanded."""
    spec: dict[str, Any] = yaml.safe_load((HERE / "rules_test.yaml").read_text())
    rules = {rule["alert"]: rule for rule in _rules()}
    for case in spec["tests"]:
        expanded = []
        for check in case["alert_rule_test"]:
            names = sorted(rules) if check["alertname"] == "*" else [check["alertname"]]
            for name in names:
                for alert in check["exp_alerts"]:
                    alert["exp_labels"] = {k: str(v) for k, v in alert["exp_labels"].items()}
                    alert["exp_annotations"] = {
                        key: _expand(text, alert["exp_labels"])
                        for key, text in rules[name]["annotations"].items()
                    }
                expanded.append({**check, "alertname": name})
        case["alert_rule_test"] = expanded
    return spec


def test_promtool_check_rules(tmp_path: Path) -> None:
    result = subprocess.run(
        [_promtool(), "check", "rules", str(_write_rules(tmp_path))],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"SUCCESS: {len(_rules())} rules found" in result.stdout


def test_promtool_unit_tests(tmp_path: Path) -> None:
    _write_rules(tmp_path)
    tests = tmp_path / "rules_test.yaml"
    tests.write_text(yaml.safe_dump(completed_unit_tests(), sort_keys=False))
    result = subprocess.run(
        [_promtool(), "test", "rules", str(tests)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout


def test_every_alert_has_a_firing_case() -> None:
    spec = completed_unit_tests()
    fired = {
        check["alertname"]
        for case in spec["tests"]
        for check in case["alert_rule_test"]
        if check["exp_alerts"]
    }
    assert fired == {rule["alert"] for rule in _rules()}


def _seconds(duration: str) -> int:
    units = {"s": 1, "m": 60, "h": 3600}
    return sum(int(n) * units[u] for n, u in re.findall(r"(\d+)([smh])", duration))


REMEDIATION_METRIC = "hangwatch_operator_remediation_timestamp_seconds"
REMEDIATION_ALERTS = {"HangwatchExecutorRemediated", "HangwatchNodeCordoned"}


def test_no_alert_can_fire_within_an_election() -> None:
    """Alerts on a state wait 2 minutes; only the remediation alerts, which read nothing
    but what the operator did (after its own election and outage limits), fire at once."""
    for rule in _rules():
        if rule["alert"] in REMEDIATION_ALERTS:
            assert metric_names(rule["expr"]) == {REMEDIATION_METRIC}, rule["alert"]
            continue
        assert _seconds(rule["for"]) >= 120, rule["alert"]


def test_remediation_alerts_keep_the_operators_labels() -> None:
    """The remediation alerts group by labels the operator's series has (one definition:
    `operator_metrics.REMEDIATION_LABELS`), name only operations that notify, and end
    before the operator drops the series."""
    from hangwatch_operator.operator_metrics import (
        REMEDIATION_LABELS,
        REMEDIATION_OPERATIONS,
        REMEDIATION_SERIES_SECONDS,
    )

    rules = {rule["alert"]: rule for rule in _rules()}
    notified = set()
    for name in REMEDIATION_ALERTS:
        kept = re.search(r"max by \(([^)]*)\)", rules[name]["expr"])
        assert kept is not None, name
        assert {label.strip() for label in kept.group(1).split(",")} <= set(REMEDIATION_LABELS)
        actions = re.search(r'action=~?"([^"]*)"', rules[name]["expr"])
        assert actions is not None, name
        notified |= set(actions.group(1).split("|"))
        window = re.search(r"\) < (\d+)$", rules[name]["expr"])
        assert window is not None, name
        assert int(window.group(1)) < REMEDIATION_SERIES_SECONDS, name
    assert notified == {str(op) for op in REMEDIATION_OPERATIONS}


def test_alerts_match_on_contract_values() -> None:
    """Every verdict, reachability class and action an expression matches on is one of
    hangwatch.contracts' (or the operator's operations), so a renamed value fails here."""
    from hangwatch.contracts import Reachability, Verdict
    from hangwatch_operator.operations import Operation, Suppression

    allowed = {
        "verdict": {str(v) for v in Verdict},
        "class": {str(r) for r in Reachability},
        "action": {str(o) for o in Operation},
        "reason": {str(s) for s in Suppression},
    }
    seen = set()
    for rule in _rules():
        for label, values in re.findall(r'(\w+)(?:=~|!~|!=|=)"([^"]*)"', rule["expr"]):
            if label in allowed:
                seen.add(label)
                assert set(values.split("|")) <= allowed[label], (rule["alert"], label, values)
    assert seen == set(allowed)


def test_annotations_use_only_labels_the_expression_keeps() -> None:
    for rule in _rules():
        kept = re.search(r"(?:count|max|sum) by \(([^)]*)\)", rule["expr"])
        for text in rule["annotations"].values():
            assert "$value" not in text, rule["alert"]
            assert "{{" not in LABEL_REF.sub("", text), rule["alert"]
            if kept:
                allowed = {label.strip() for label in kept.group(1).split(",")}
                assert set(LABEL_REF.findall(text)) <= allowed, rule["alert"]


GRAFANA_PROVISIONING = closed(
    {
        "apiVersion": {"const": 1},
        "groups": non_empty(
            closed(
                {
                    "orgId": {"type": "integer"},
                    "name": {"type": "string"},
                    "folder": {"type": "string"},
                    "interval": DURATION,
                    "rules": non_empty(
                        closed(
                            {
                                "uid": {"type": "string", "pattern": "^[a-zA-Z0-9_-]{1,40}$"},
                                "title": {"type": "string"},
                                "condition": {"type": "string"},
                                "data": {
                                    "type": "array",
                                    "items": closed(
                                        {
                                            "refId": {"type": "string"},
                                            "datasourceUid": {"type": "string"},
                                            "relativeTimeRange": {
                                                "type": "object",
                                                "required": ["from", "to"],
                                            },
                                            "model": {"type": "object", "required": ["refId"]},
                                        },
                                        "refId",
                                        "datasourceUid",
                                        "model",
                                    ),
                                },
                                "noDataState": {"enum": ["OK", "NoData", "Alerting", "KeepLast"]},
                                "execErrState": {"enum": ["OK", "Error", "Alerting", "KeepLast"]},
                                "for": DURATION,
                                "labels": {"type": "object"},
                                "annotations": {"type": "object"},
                                "isPaused": {"type": "boolean"},
                            },
                            *("uid", "title", "condition", "data", "for"),
                        )
                    ),
                },
                *("orgId", "name", "folder", "interval", "rules"),
            )
        ),
    },
    "apiVersion",
    "groups",
)


def _grafana(values: dict[str, Any]) -> dict[str, Any]:
    config_map = only(render(values), "ConfigMap", "hangwatch-grafana-alerts")
    assert config_map["metadata"]["labels"]["grafana_alert"] == "1"
    provisioning: dict[str, Any] = yaml.safe_load(config_map["data"]["hangwatch-alerts.yaml"])
    jsonschema.validate(provisioning, GRAFANA_PROVISIONING)
    return provisioning


def _both(values: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """Alert name -> comparable form, from the PrometheusRule and from Grafana."""
    merged = {
        "monitoring": {
            **values.get("monitoring", {}),
            **ALERTS_ON["monitoring"],
            "grafana": {"alerts": {"enabled": True, "datasourceUid": "prom-main"}},
        }
    }
    rule = only(render(merged), "PrometheusRule")
    prometheus = {
        r["alert"]: {
            "group": g["name"],
            "expr": r["expr"],
            "for": r["for"],
            "labels": r["labels"],
            "annotations": r["annotations"],
        }
        for g in rule["spec"]["groups"]
        for r in g["rules"]
    }
    grafana = {}
    for group in _grafana(merged)["groups"]:
        for r in group["rules"]:
            data = {d["refId"]: d for d in r["data"]}
            assert data["A"]["datasourceUid"] == "prom-main"
            assert data["A"]["model"]["instant"] is True
            assert data[r["condition"]]["datasourceUid"] == "__expr__"
            assert data[r["condition"]]["model"]["type"] == "math"
            assert r["noDataState"] == "OK"
            grafana[r["title"]] = {
                "group": group["name"],
                "expr": data["A"]["model"]["expr"],
                "for": r["for"],
                "labels": r["labels"],
                "annotations": r["annotations"],
            }
    return prometheus, grafana


def test_grafana_rules_are_the_prometheus_rules() -> None:
    prometheus, grafana = _both({})
    assert len(prometheus) == 20
    assert grafana == prometheus
    for alert in prometheus.values():
        assert alert["labels"]["severity"] in {"critical", "warning"}


def test_values_change_both_alike() -> None:
    values = {
        "monitoring": {
            "alerts": {
                "disabled": ["HangwatchRemediationRateHigh"],
                "overrides": {"HangwatchProducerHung": {"for": "5m", "severity": "warning"}},
                "extraLabels": {"team": "data-platform"},
                "runbookBaseUrl": "https://wiki.example/hangwatch",
            }
        }
    }
    prometheus, grafana = _both(values)
    assert grafana == prometheus
    assert "HangwatchRemediationRateHigh" not in prometheus
    hung = prometheus["HangwatchProducerHung"]
    assert (hung["for"], hung["labels"]["severity"]) == ("5m", "warning")
    assert hung["annotations"]["runbook_url"] == (
        "https://wiki.example/hangwatch#hangwatchproducerhung"
    )
    assert all(a["labels"]["team"] == "data-platform" for a in prometheus.values())


def test_grafana_uids_are_unique() -> None:
    values = {"monitoring": {**ALERTS_ON["monitoring"], "grafana": {"alerts": {"enabled": True}}}}
    uids = [r["uid"] for g in _grafana(values)["groups"] for r in g["rules"]]
    assert len(uids) == len(set(uids)) == 20
    assert "hangwatch-producer-hung" in uids


def test_operator_down_needs_the_operator_service_monitor() -> None:
    rule = only(render({"monitoring": {"prometheusRule": {"enabled": True}}}), "PrometheusRule")
    names = {r["alert"] for g in rule["spec"]["groups"] for r in g["rules"]}
    assert "HangwatchOperatorDown" not in names
    assert len(names) == 19


def test_runbook_section_per_alert() -> None:
    docs = (ROOT / "docs" / "chart.md").read_text()
    headings = set(re.findall(r"^#### (Hangwatch\w+)$", docs, flags=re.MULTILINE))
    names = {rule["alert"] for rule in _rules()}
    assert headings == names
    for rule in _rules():
        assert rule["annotations"]["runbook_url"].endswith("docs/chart.md#" + rule["alert"].lower())
