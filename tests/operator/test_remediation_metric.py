"""The remediation series the chart's remediation alerts notify from.

Covers: a round (`plan_round`, `settle_round`, `operator_metrics.measure_round`) that
restarts a hung executor and cordons a node exports one
`hangwatch_operator_remediation_timestamp_seconds` series each, valued with the
round's time and labelled with the executor's namespace, application, executor, pod,
node, verdict, action and the brokers its pods could not use (`none` when none; the
node's for a cordon); `alert` actions, dry runs and suppressed or failed remediations
export nothing; the `broker` label names at most three brokers; a series is dropped an
hour after its remediation, at the next round. Property: whatever a pod's labels and its
sidecar's broker list hold (both written by the pod's owner), a remediation's labels
are exactly `REMEDIATION_LABELS`, `broker` is never empty and names at most the first
three of the pod's brokers, and the exposition Prometheus scrapes reads back the same values.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry, Gauge, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from hangwatch.contracts import Verdict
from hangwatch_operator import operator_metrics
from hangwatch_operator.decisions import Decision
from hangwatch_operator.history import History
from hangwatch_operator.operations import Operation, Outcome
from hangwatch_operator.rounds import plan_round, settle_round
from hangwatch_operator.watched import WatchedPod
from tests.operator.builders import NOW, pod, policy, reports

METRIC = "hangwatch_operator_remediation_timestamp_seconds"
KEYS = ("jobs/writers-metric-round", "jobs/writers-metric-kinds")


@pytest.fixture(autouse=True)
def _forget_series() -> Iterator[None]:
    """Leave the operator's registry without this module's series (they are in 2027)."""
    yield
    for labels, _ in [entry for key in KEYS for entry in _series(key).values()]:
        operator_metrics.REMEDIATIONS.remove(
            *(labels[name] for name in operator_metrics.REMEDIATION_LABELS)
        )


def _series(policy_key: str) -> dict[tuple[str, str], tuple[dict[str, str], float]]:
    """(action, node) -> (labels, value) of this policy's remediation series."""
    return {
        (s.labels["action"], s.labels["node"]): (s.labels, s.value)
        for metric in operator_metrics.REMEDIATIONS.collect()
        for s in metric.samples
        if s.name == METRIC and s.labels["policy"] == policy_key
    }


def test_a_round_exports_each_remediation_with_what_a_person_needs() -> None:
    key = KEYS[0]
    cordoning = policy(
        actions={"nodeNetworkFault": ["cordonNode", "alert"]},
        safety={"maxUnhealthyShare": 1.0, "maxConcurrent": 5},
    )
    plan = plan_round(
        reports(
            (pod("e-1", node="a"), Verdict.CLUSTER_UNREACHABLE),
            (pod("e-2", node="a"), Verdict.CLUSTER_UNREACHABLE),
            (pod("e-3", node="b"), Verdict.PRODUCER_HUNG),
            (pod("e-4", node="c"), Verdict.HEALTHY),
            (pod("e-5", node="d"), Verdict.HEALTHY),
        ),
        cordoning,
        History(),
        NOW,
        policy_key=key,
    )
    acted = list(plan.to_carry_out)
    assert {d.operation for d in acted} == {Operation.CORDON_NODE, Operation.RESTART}
    settled = settle_round(plan, acted)
    operator_metrics.measure_round(key, plan, settled)
    series = _series(key)
    assert set(series) == {("restart", "b"), ("cordonNode", "a")}
    restart, when = series["restart", "b"]
    assert when == NOW
    assert restart == {
        "policy": key,
        "namespace": "jobs",
        "application": "spark-app-1",
        "executor": "3",
        "pod": "e-3",
        "node": "b",
        "verdict": "producer_hung",
        "action": "restart",
        "broker": "none",
    }
    cordon, _ = series["cordonNode", "a"]
    assert cordon["namespace"] == "jobs" and cordon["pod"] == ""
    assert cordon["verdict"] == "node_network_fault"
    assert cordon["broker"] == "kafka-0:9092,kafka-1:9092,kafka-2:9092"


def _decision(target: WatchedPod, operation: Operation, outcome: Outcome) -> Decision:
    return Decision(operation, Verdict.METADATA_STALE, outcome, pod=target, node=target.node)


def test_only_remediations_carried_out_are_exported_and_each_for_an_hour() -> None:
    key = KEYS[1]
    brokers = tuple(f"kafka-{i}:9092" for i in range(5))
    done = dataclasses.replace(
        _decision(pod("e-1", node="n1"), Operation.RESTART, Outcome.ACTED), brokers=brokers
    )
    operator_metrics.mark_remediations(
        key,
        [
            done,
            _decision(pod("e-2", node="n2"), Operation.ALERT, Outcome.ACTED),
            _decision(pod("e-3", node="n3"), Operation.RESTART, Outcome.DRY_RUN),
            _decision(pod("e-4", node="n4"), Operation.RESTART, Outcome.SUPPRESSED),
            _decision(pod("e-5", node="n5"), Operation.DECOMMISSION, Outcome.FAILED),
        ],
        NOW,
    )
    series = _series(key)
    assert set(series) == {("restart", "n1")}
    assert series["restart", "n1"][0]["broker"] == "kafka-0:9092,kafka-1:9092,kafka-2:9092"
    later = NOW + operator_metrics.REMEDIATION_SERIES_SECONDS - 1
    decommission = _decision(pod("e-6", node="n6"), Operation.DECOMMISSION, Outcome.ACTED)
    operator_metrics.mark_remediations(key, [decommission], later)
    assert set(_series(key)) == {("restart", "n1"), ("decommission", "n6")}
    operator_metrics.mark_remediations(
        key, [], NOW + operator_metrics.REMEDIATION_SERIES_SECONDS + 1
    )
    assert set(_series(key)) == {("decommission", "n6")}


_TEXT = st.text(max_size=40)


@settings(max_examples=200)
@given(
    namespace=_TEXT.filter(bool),
    name=_TEXT.filter(bool),
    node=st.none() | _TEXT,
    app=st.none() | _TEXT,
    executor=st.none() | _TEXT,
    brokers=st.lists(_TEXT.filter(bool), max_size=8),
    on_node=st.booleans(),
)
def test_labels_from_whatever_the_pod_says(
    namespace: str,
    name: str,
    node: str | None,
    app: str | None,
    executor: str | None,
    brokers: list[str],
    on_node: bool,
) -> None:
    target = dataclasses.replace(
        pod("e-1"), namespace=namespace, name=name, node=node, application_id=app,
        executor_id=executor,
    )  # fmt: skip
    decision = Decision(
        Operation.CORDON_NODE if on_node else Operation.RESTART,
        Verdict.PRODUCER_HUNG,
        Outcome.ACTED,
        pod=None if on_node else target,
        node=node,
        brokers=tuple(sorted(brokers)),
    )
    labels = operator_metrics.remediation_labels("jobs/writers", decision)
    assert tuple(labels) == operator_metrics.REMEDIATION_LABELS
    first = sorted(brokers)[: operator_metrics.BROKERS_NAMED]
    assert labels["broker"] == (",".join(first) or operator_metrics.NO_BROKER)
    assert labels["namespace"] == ("jobs" if on_node else namespace)
    registry = CollectorRegistry()
    gauge = Gauge(METRIC, "test", operator_metrics.REMEDIATION_LABELS, registry=registry)
    gauge.labels(**labels).set(NOW)
    exposed = text_string_to_metric_families(generate_latest(registry).decode())
    assert [s.labels for f in exposed for s in f.samples] == [labels]
