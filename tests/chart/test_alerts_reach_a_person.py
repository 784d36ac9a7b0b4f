"""A hang the operator fixes within seconds still reaches a person, end to end.

Covers: a real Apache Kafka lab (one broker), a real `hangwatch sidecar` process watching
a real producer (the wrapper, `hangwatch_demo.workload`), the operator's own rounds run
locally as the demo runs them (`hangwatch_demo.local_operator.LocalOperator`: /status
polled over HTTP, `plan_round`, `settle_round`, `operator_metrics.measure_round`) with
the operator's registry served over HTTP as the operator serves it, a real Prometheus
(Debian's `prometheus`) loading the chart's rules rendered by the real Helm engine and
scraping both (the operator's target with the Prometheus Operator's namespace/pod target
labels and the chart ServiceMonitor's `honorLabels`), a real Alertmanager (Debian's
`prometheus-alertmanager`) routing with examples/alertmanager/routes.yaml to a webhook
receiver served on 127.0.0.1. The producer's poll thread is blocked (seed S4); the
sidecar says producer_hung; the operator restarts the producer (as it deletes the
executor pod and Spark replaces it); the verdict is healthy again long before
HangwatchProducerHung's 2 minutes, so that alert never fires. HangwatchExecutorRemediated
arrives at the `team` receiver (severity warning), grouped by alertname, namespace and
application, naming namespace, application, executor, pod, node, verdict, action, broker
and the runbook link; nothing reaches the `pager` receiver. Order: wedge, then restart,
then the notification.

Test-only overrides: every rule group is evaluated every second (the chart: 30 s; `for`
and expressions are the chart's), Prometheus scrapes every second, and the example's
group_wait and group_interval are 1 s (it ships 30 s and 5 m). Every process (lab,
sidecar, producer, Prometheus, Alertmanager, receiver, metrics endpoint) is stopped by
the exit stack, on every exit path.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from prometheus_client import start_http_server

from hangwatch.child_processes import stop_process
from hangwatch_demo.harness import start_workload
from hangwatch_demo.local_operator import POLICY_KEY, LocalOperator
from hangwatch_demo.scenarios import Timing
from hangwatch_operator import operator_metrics
from hangwatch_operator.decisions import Decision
from hangwatch_operator.operations import Operation
from hangwatch_operator.watched import WatchedPod
from hangwatch_testing.waiting import wait_for
from tests.chart.lab_sidecar import sidecar_on_lab
from tests.chart.prometheus_server import Job, Notification, alert_pipeline
from tests.chart.rendering import ALERTS_ON, only, render

ALERT = "HangwatchExecutorRemediated"
STATE_ALERT = "HangwatchProducerHung"
POD = WatchedPod(
    namespace="demo",
    name="etl-exec-1",
    uid="uid-etl-exec-1",
    policy="demo",
    role="executor",
    node="node-a",
    ip="127.0.0.1",
    application_id="spark-7f3a",
    executor_id="1",
)
POD_LABELS = {
    "namespace": POD.namespace,
    "pod": POD.name,
    "node": "node-a",
    "application": "spark-7f3a",
    "executor": "1",
    "policy": POD.policy,
}
"""The chart PodMonitor's target labels for this executor's sidecar."""
OPERATOR_LABELS = {"namespace": "hangwatch-system", "pod": "hangwatch-operator-0", "node": "n-9"}
"""The operator target's labels under the Prometheus Operator (it adds namespace; the
chart's ServiceMonitor relabels pod and node): they must not replace the executor's."""


def honor_labels() -> bool:
    """What the chart's ServiceMonitor sets for the operator's scrape."""
    monitor = only(render(ALERTS_ON), "ServiceMonitor")
    return bool(monitor["spec"]["endpoints"][0].get("honorLabels", False))


@contextlib.contextmanager
def operator_metrics_endpoint() -> Iterator[str]:
    """The operator's registry over HTTP, as `handlers` serves it; host:port."""
    server, thread = start_http_server(0, addr="127.0.0.1", registry=operator_metrics.REGISTRY)
    try:
        yield f"127.0.0.1:{server.server_port}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


def _ours(notification: Notification, alertname: str) -> list[dict[str, Any]]:
    """The notification's alerts named `alertname` about this test's executor."""
    return [
        a
        for a in notification.body["alerts"]
        if a["labels"].get("alertname") == alertname and a["labels"].get("pod") == POD.name
    ]


def test_a_hang_fixed_within_seconds_reaches_a_person(tmp_path: Path) -> None:
    telemetry = tmp_path / "telemetry"
    telemetry.mkdir()
    wedge = tmp_path / "wedge"
    timing = Timing()
    with contextlib.ExitStack() as stack:
        target, lab = stack.enter_context(sidecar_on_lab(telemetry, engine="kafka", brokers=1))
        producers = [start_workload(lab.bootstrap, telemetry, wedge, timing)]
        stack.callback(lambda: stop_process(producers[-1]))
        operator_target = stack.enter_context(operator_metrics_endpoint())
        jobs = {
            "hangwatch-sidecar": Job([(target, POD_LABELS)]),
            "hangwatch-operator": Job([(operator_target, OPERATOR_LABELS)], honor_labels()),
        }
        prometheus, receiver = stack.enter_context(alert_pipeline(tmp_path, jobs))
        pod = dataclasses.replace(POD, port=int(target.rsplit(":", 1)[1]))
        operator = LocalOperator()
        restarts: list[float] = []

        def restart(decision: Decision) -> Decision:
            """What deleting the executor pod does: its producer is replaced."""
            assert decision.operation is Operation.RESTART, decision
            stop_process(producers[-1], grace_seconds=2)
            wedge.unlink(missing_ok=True)
            producers.append(start_workload(lab.bootstrap, telemetry, wedge, timing))
            restarts.append(time.time())
            return dataclasses.replace(decision, note="producer replaced")

        def operator_round() -> list[Decision]:
            return operator.decide(operator.poll([pod]), time.time(), restart)

        def healthy_scraped() -> bool:
            operator_round()
            return bool(prometheus.query('hangwatch_verdict{verdict="healthy"} == 1'))

        def both_scraped() -> bool:
            return healthy_scraped() and bool(prometheus.query('up{job="hangwatch-operator"} == 1'))

        wait_for(both_scraped, 90, "the sidecar healthy and the operator up", interval=1)
        assert restarts == []

        wedged_at = time.time()
        wedge.touch()  # user code now blocks the producer's poll thread (S4)
        wait_for(lambda: operator_round() and restarts, 90, "the operator's restart", interval=1)
        assert len(restarts) == 1 and restarts[0] > wedged_at

        def notified() -> list[Notification]:
            operator_round()
            return [n for n in receiver.received() if _ours(n, ALERT)]

        notification = wait_for(notified, 90, f"{ALERT} at the receiver", interval=1)[0]
        wait_for(healthy_scraped, 90, "the healthy verdict after the restart", interval=1)

        # Order: wedge, restart, notification; the alert started after the wedge.
        assert wedged_at < restarts[0] < notification.received
        alert = _ours(notification, ALERT)[0]
        started = datetime.datetime.fromisoformat(alert["startsAt"]).timestamp()
        assert started > wedged_at
        # Routed by severity, grouped, and naming everything a person needs.
        assert notification.path == "/team"
        body = notification.body
        assert (body["receiver"], body["status"], alert["status"]) == ("team", "firing", "firing")
        assert body["groupLabels"] == {
            "alertname": ALERT,
            "namespace": POD.namespace,
            "application": "spark-7f3a",
        }
        assert alert["labels"] == {
            "alertname": ALERT,
            "severity": "warning",
            "component": "operator",
            "policy": POLICY_KEY,
            "namespace": POD.namespace,
            "application": "spark-7f3a",
            "executor": "1",
            "pod": POD.name,
            "node": "node-a",
            "verdict": "producer_hung",
            "action": "restart",
            "broker": "none",
        }
        annotations = alert["annotations"]
        assert annotations["runbook_url"].endswith("docs/chart.md#hangwatchexecutorremediated")
        assert annotations["summary"] == (
            "hangwatch restart executor 1 of spark-7f3a in demo (producer_hung)"
        )
        assert "pod etl-exec-1" in annotations["description"]
        # The hang was fixed before its state alert could fire: only the remediation
        # reached a person, and nothing paged.
        assert not [a for a in prometheus.alerts(STATE_ALERT) if a["state"] == "firing"]
        received = receiver.received()
        assert not [n for n in received if _ours(n, STATE_ALERT)]
        assert not [n for n in received if n.path == "/pager" and _ours(n, ALERT)]
        print(
            f"wedge->restart {restarts[0] - wedged_at:.1f} s, "
            f"restart->notification {notification.received - restarts[0]:.1f} s; "
            f"notification: {notification.body}"
        )
