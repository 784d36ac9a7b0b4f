"""The chart's producer-hung alert fires and resolves in a real Prometheus.

Covers: a real `prometheus` server (Debian package) loads the rules extracted from the
rendered PrometheusRule and scrapes a real `hangwatch_sidecar.server.StatusServer`
(the sidecar's HTTP server with its real metric families) whose published
`SidecarState` the test switches healthy -> producer_hung -> healthy. Prometheus's HTTP
API shows the sidecar scraped with the PodMonitor's labels and no alert while healthy,
HangwatchProducerHung going to `firing` with the executor's labels, severity critical
and its annotations rendered, and the alert gone (rule `inactive`) after recovery.

A second test does the same end to end on the lab: a real `hangwatch sidecar` process
watches a real producer (the wrapper) whose poll thread gets blocked (seed S4); the
alert fires, and replacing the producer, as the operator's restart does, resolves it.

Test-only override: to run in seconds, the copy of the rule file given to Prometheus
has every group's `interval` set to 1s and HangwatchProducerHung's `for` set to 2s
(the chart ships 30s and 2m); expressions, labels and annotations are the chart's.
Prometheus scrapes and evaluates every second and is stopped by its context manager.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest

from hangwatch.contracts import Verdict
from hangwatch_sidecar.server import StatusServer
from hangwatch_sidecar.state import SidecarState
from hangwatch_testing.waiting import wait_for
from tests.chart.lab_sidecar import sidecar_on_lab
from tests.chart.prometheus_server import PrometheusServer, rule_file

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


def _rule_state(prometheus: PrometheusServer) -> str:
    for group in prometheus.api("rules")["groups"]:
        for rule in group["rules"]:
            if rule["name"] == ALERT:
                return str(rule["state"])
    raise AssertionError(f"{ALERT} not loaded")


def test_producer_hung_fires_then_resolves(tmp_path: Path, sidecar: Sidecar) -> None:
    target = f"127.0.0.1:{sidecar.server.port}"
    rules = rule_file(tmp_path, fors={ALERT: "2s"})
    with PrometheusServer(tmp_path, rules, {"hangwatch-sidecar": [(target, POD_LABELS)]}) as prom:
        healthy = wait_for(
            lambda: prom.query('hangwatch_verdict{verdict="healthy"} == 1'),
            30,
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
            30,
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
        wait_for(lambda: prom.alerts(ALERT) == [] or None, 30, f"{ALERT} to resolve")
        assert _rule_state(prom) == "inactive"


@pytest.fixture
def lab_with_sidecar_process(tmp_path: Path) -> Iterator[tuple[str, Path, Any]]:
    """A lab, and a real `hangwatch sidecar` process watching `tmp_path/telemetry`."""
    telemetry = tmp_path / "telemetry"
    telemetry.mkdir()
    with sidecar_on_lab(telemetry) as (target, lab):
        yield target, telemetry, lab


def test_real_sidecar_on_the_lab_fires_producer_hung_and_resolves(
    tmp_path: Path, lab_with_sidecar_process: tuple[str, Path, Any]
) -> None:
    """S4 on the lab: a real producer's I/O thread blocks -> the real sidecar process says
    producer_hung -> Prometheus fires HangwatchProducerHung; replacing the producer (what
    the operator's restart does) resolves it."""
    from hangwatch.child_processes import stop_process
    from hangwatch_demo.harness import start_workload
    from hangwatch_demo.scenarios import Timing

    target, telemetry, lab = lab_with_sidecar_process
    wedge = tmp_path / "wedge"
    rules = rule_file(tmp_path, fors={ALERT: "2s"})
    producer = start_workload(lab.bootstrap, telemetry, wedge, Timing())
    try:
        with PrometheusServer(
            tmp_path, rules, {"hangwatch-sidecar": [(target, POD_LABELS)]}
        ) as prom:
            wait_for(
                lambda: prom.query('hangwatch_verdict{verdict="healthy"} == 1'),
                60,
                "the real sidecar to report healthy",
            )
            assert prom.alerts(ALERT) == []
            wedge.touch()  # user code now blocks the producer's poll thread
            firing = wait_for(
                lambda: [a for a in prom.alerts(ALERT) if a["state"] == "firing"],
                60,
                f"{ALERT} to fire",
            )
            assert firing[0]["labels"]["executor"] == POD_LABELS["executor"]
            stop_process(producer, grace_seconds=2)
            wedge.unlink()
            producer = start_workload(lab.bootstrap, telemetry, wedge, Timing())
            wait_for(lambda: prom.alerts(ALERT) == [] or None, 60, f"{ALERT} to resolve")
    finally:
        stop_process(producer)
