"""The chart's producer-hung alert fires and resolves in a real Prometheus.

Covers: a real `prometheus` server (Debian package) loads the rules extracted from the
rendered PrometheusRule and scrapes a real `hangwatch_sidecar.server.StatusServer`
(the sidecar's HTTP server with its real metric families) whose published
`SidecarState` the test switches healthy -> producer_hung -> healthy. Prometheus's HTTP
API shows the sidecar scraped with the PodMonitor's labels and no alert while healthy,
HangwatchProducerHung going to `firing` with the executor's labels, severity critical
and its annotations rendered, and the alert gone (rule `inactive`) after recovery.

Test-only override: to run in seconds, the copy of the rule file given to Prometheus
has every group's `interval` set to 1s and HangwatchProducerHung's `for` set to 2s
(the chart ships 30s and 2m); expressions, labels and annotations are the chart's.
Prometheus scrapes and evaluates every second and is stopped by its context manager.
"""

from __future__ import annotations

import copy
import time
import urllib.parse
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest
import yaml

from hangwatch.contracts import Verdict
from hangwatch_sidecar.server import StatusServer
from hangwatch_sidecar.state import SidecarState
from tests.chart.prometheus_server import PrometheusServer
from tests.chart.rendering import prometheus_rule_groups

ALERT = "HangwatchProducerHung"
POD_LABELS = {
    "namespace": "analytics",
    "pod": "etl-exec-1",
    "node": "node-a",
    "application": "spark-7f3a",
    "executor": "1",
    "policy": "etl",
}
T = TypeVar("T")


class Sidecar:
    """A real sidecar HTTP server whose published state the test sets."""

    def __init__(self) -> None:
        self.state = self.make(Verdict.HEALTHY)
        self.server = StatusServer(lambda: self.state, 0, 60.0, host="127.0.0.1")

    @staticmethod
    def make(verdict: Verdict) -> SidecarState:
        now = time.time()
        changes = {str(verdict): 1}
        return SidecarState(
            started_ts=now - 60,
            verdict=verdict,
            since_ts=now,
            rounds=6,
            evaluated_ts=now,
            verdict_changes=changes,
        )

    def publish(self, verdict: Verdict) -> None:
        self.state = self.make(verdict)


@pytest.fixture
def sidecar() -> Iterator[Sidecar]:
    running = Sidecar()
    running.server.start()
    try:
        yield running
    finally:
        running.server.close()


def rules_with_test_timing(directory: Path) -> Path:
    """The chart's rules with the documented test-only timing override."""
    groups = copy.deepcopy(prometheus_rule_groups())
    for group in groups:
        group["interval"] = "1s"
        for rule in group["rules"]:
            if rule["alert"] == ALERT:
                rule["for"] = "2s"
    path = directory / "rules.yaml"
    path.write_text(yaml.safe_dump({"groups": groups}, sort_keys=False))
    return path


def wait_for(check: Callable[[], T | None], what: str, timeout_seconds: float = 30) -> T:
    deadline = time.monotonic() + timeout_seconds
    while time.monotonic() < deadline:
        result = check()
        if result:
            return result
        time.sleep(0.25)
    pytest.fail(f"timed out after {timeout_seconds} s waiting for {what}")


def _value(prometheus: PrometheusServer, expr: str) -> list[dict[str, Any]]:
    data = prometheus.api("query?query=" + urllib.parse.quote(expr))
    result: list[dict[str, Any]] = data["result"]
    return result


def _rule_state(prometheus: PrometheusServer) -> str:
    for group in prometheus.api("rules")["groups"]:
        for rule in group["rules"]:
            if rule["name"] == ALERT:
                return str(rule["state"])
    raise AssertionError(f"{ALERT} not loaded")


def test_producer_hung_fires_then_resolves(tmp_path: Path, sidecar: Sidecar) -> None:
    target = f"127.0.0.1:{sidecar.server.port}"
    rules = rules_with_test_timing(tmp_path)
    with PrometheusServer(tmp_path, rules, {"hangwatch-sidecar": [(target, POD_LABELS)]}) as prom:
        healthy = wait_for(
            lambda: _value(prom, 'hangwatch_verdict{verdict="healthy"} == 1'),
            "the healthy sidecar to be scraped",
        )
        assert healthy[0]["metric"]["job"] == "hangwatch-sidecar"
        assert POD_LABELS.items() <= healthy[0]["metric"].items()
        time.sleep(3)  # a few evaluations while healthy
        assert prom.alerts(ALERT) == []
        assert _rule_state(prom) == "inactive"

        sidecar.publish(Verdict.PRODUCER_HUNG)
        firing = wait_for(
            lambda: [a for a in prom.alerts(ALERT) if a["state"] == "firing"],
            f"{ALERT} to fire",
        )
        assert len(firing) == 1
        labels = firing[0]["labels"]
        assert labels["severity"] == "critical"
        assert {k: labels[k] for k in ("namespace", "application", "executor", "pod", "node")} == {
            k: POD_LABELS[k] for k in ("namespace", "application", "executor", "pod", "node")
        }
        annotations = firing[0]["annotations"]
        assert annotations["summary"] == "Kafka producer hung in analytics/etl-exec-1"
        assert (
            "Executor 1 of application spark-7f3a (pod etl-exec-1 on node node-a)"
            in (annotations["description"])
        )
        assert annotations["runbook_url"].endswith("docs/chart.md#hangwatchproducerhung")

        sidecar.publish(Verdict.HEALTHY)
        wait_for(lambda: prom.alerts(ALERT) == [] or None, f"{ALERT} to resolve")
        assert _rule_state(prom) == "inactive"
