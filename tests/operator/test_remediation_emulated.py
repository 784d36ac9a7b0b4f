"""The operator end to end: real sidecar servers, kmock's Kubernetes, `hangwatch operator`.

One operator process (`python -m hangwatch operator --standalone --all-namespaces`)
runs against kmock's emulator; each scenario is its own policy in its own namespace,
created after the operator started, with executor pods as the webhook injected them,
whose `hangwatch` port points at a real sidecar HTTP server the test controls.
Policies poll every 2 s (the CRD's smallest valid probe interval).

Covers: a policy created -> status filled (watched, verdict counts, conditions); a
sidecar reporting `producer_hung` -> the pod deleted once, a HangwatchRestart Event,
lastAction, metrics; the same during a storm, in dry run, past the rate limit, while
another pod cannot reach Kafka, during a leader election, and for a driver -> no
deletion and a HangwatchSuppressed/HangwatchDryRun Event naming the limit; a node
fault (two pods on one node cut off from the brokers, pods on two others fine) -> the
node cordoned, tainted, annotated, an Event on the node and alerts on the pods;
sidecars that refuse or never answer -> `sidecar_unreachable` in status, Events and
metrics, no action, and they do not stop the restart of a hung pod beside them (no
storm); the operator's /metrics carries the contract's names and labels; pods and
nodes are watched through server-side label selectors only.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass, field
from typing import Any

import pytest

from hangwatch.contracts import Verdict
from hangwatch_testing.emulated_cluster import OperatorRun
from hangwatch_testing.remediation_cluster import (
    FAST,
    NODES,
    PODS,
    POLICIES,
    STATUS_TIMEOUT_SECONDS,
    FakeSidecar,
    RemediationCluster,
    poll_rounds,
    remediating_operator,
    scrape,
    stored_policy,
    watched_executor,
)
from tests.chart.known_metrics import OPERATOR_DECISION_METRICS

HUNG = Verdict.PRODUCER_HUNG
OK = Verdict.HEALTHY


@dataclass
class Scenario:
    """One namespace: a policy, its pods (name -> body) and their sidecars."""

    namespace: str
    pods: dict[str, dict[str, Any]] = field(default_factory=dict)

    def name(self, index: int) -> str:
        return list(self.pods)[index]


@dataclass
class Lab:
    cluster: RemediationCluster
    operator: OperatorRun
    metrics_port: int
    scenarios: dict[str, Scenario]

    def status(self, namespace: str) -> dict[str, Any]:
        return self.cluster.policy_status(namespace, "writers")

    def events(self, namespace: str, reason: str) -> list[dict[str, Any]]:
        return self.cluster.events(namespace, reason)

    def wait_for_event(self, namespace: str, reason: str) -> dict[str, Any]:
        found: list[dict[str, Any]] = self.operator.wait_for(
            f"{reason} in {namespace}", lambda: self.events(namespace, reason)
        )
        return found[0]

    def wait_for_verdict_count(self, namespace: str, verdict: str, count: int) -> dict[str, Any]:
        """The policy's status once it counts `count` pods with `verdict`."""
        status: dict[str, Any] = self.operator.wait_for(
            f"{count} {verdict} in the status of {namespace}",
            lambda: (
                self.status(namespace).get("verdictCounts", {}).get(verdict) == count
                and self.status(namespace)
            ),
        )
        return status

    def pod_exists(self, namespace: str, name: str) -> bool:
        return self.cluster.get(PODS, namespace, name) is not None

    def rounds(self, namespace: str) -> float:
        return poll_rounds(self.metrics_port, f"{namespace}/writers")

    def wait_rounds(self, namespace: str, count: int) -> None:
        start = self.rounds(namespace)
        self.operator.wait_for(
            f"{count} more rounds", lambda: self.rounds(namespace) >= start + count
        )


# namespace -> (policy spec, [(verdict or None for a dead port, reachable, node, role)])
SCENARIOS: dict[str, tuple[dict[str, Any], list[tuple[Verdict | None, bool, str, str]]]] = {
    "quiet": ({}, [(OK, True, "node-a", "executor")] * 2),
    "hung": ({}, [(HUNG, True, "node-a", "executor"), *[(OK, True, "node-b", "executor")] * 2]),
    "storm": ({}, [(HUNG, True, "node-a", "executor")] * 2 + [(OK, True, "node-a", "executor")]),
    "dry-run": (
        {"safety": {"dryRun": True}},
        [(HUNG, True, "node-a", "executor"), *[(OK, True, "node-a", "executor")] * 2],
    ),
    "rate": (
        {"safety": {"maxActionsPerApplicationPerHour": 1, "maxConcurrent": 3}},
        [(HUNG, True, "node-a", "executor")] * 2 + [(OK, True, "node-a", "executor")] * 3,
    ),
    "unreachable": (
        {},
        [
            (HUNG, True, "node-a", "executor"),
            (Verdict.CLUSTER_UNREACHABLE, False, "node-a", "executor"),
            *[(OK, True, "node-a", "executor")] * 3,
        ],
    ),
    "election": (
        {},
        [
            (HUNG, True, "node-a", "executor"),
            (Verdict.LEADER_ELECTION, True, "node-a", "executor"),
            *[(OK, True, "node-a", "executor")] * 3,
        ],
    ),
    "driver": (
        {"roles": ["executor", "driver"]},
        [(HUNG, True, "node-a", "driver"), *[(OK, True, "node-a", "executor")] * 3],
    ),
    "node-fault": (
        {"actions": {"nodeNetworkFault": ["cordonNode", "alert"]}},
        [
            *[(Verdict.CLUSTER_UNREACHABLE, False, "nf-a", "executor")] * 2,
            *[(OK, True, "nf-b", "executor")] * 2,
            (OK, True, "nf-c", "executor"),  # witnesses on two other nodes
        ],
    ),
    "silent": ({}, [(None, True, "node-a", "executor"), *[(OK, True, "node-a", "executor")] * 3]),
    "silent-and-hung": (
        {},
        [(HUNG, True, "node-a", "executor"), *[(None, True, "node-a", "executor")] * 2],
    ),
}


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    workdir = tmp_path_factory.mktemp("remediation")
    with ExitStack() as stack:
        cluster = stack.enter_context(RemediationCluster())
        for node in ("nf-a", "nf-b", "nf-c"):
            cluster.add_node(node)
        operator, metrics_port = stack.enter_context(remediating_operator(cluster, workdir))
        scenarios = {ns: _create(stack, cluster, ns, *spec) for ns, spec in SCENARIOS.items()}
        yield Lab(cluster, operator, metrics_port, scenarios)


def _create(
    stack: ExitStack,
    cluster: RemediationCluster,
    namespace: str,
    spec: dict[str, Any],
    pods: list[tuple[Verdict | None, bool, str, str]],
) -> Scenario:
    """Pods first, the policy last: its first round sees them all (no partial view)."""
    policy = stored_policy(namespace, "writers", **FAST, **spec)
    scenario = Scenario(namespace)
    for index, (verdict, reachable, node, role) in enumerate(pods, start=1):
        if verdict is None:
            mute = stack.enter_context(socket.socket())  # accepts, never answers
            mute.bind(("127.0.0.1", 0))
            mute.listen(8)
            port = mute.getsockname()[1]
        else:
            sidecar = FakeSidecar().start()
            stack.callback(sidecar.close)
            sidecar.set(
                verdict, reachable=reachable, reasons=(f"sidecar of pod {index}: {verdict}",)
            )
            port = sidecar.port
        body = watched_executor(policy, index, port, node=node, role=role)
        cluster.create(PODS, namespace, body)
        scenario.pods[body["metadata"]["name"]] = body
    cluster.create(POLICIES, namespace, policy)
    return scenario


def _both_healthy(status: dict[str, Any]) -> bool:
    return status.get("watched") == 2 and (status.get("verdictCounts") or {}).get("healthy") == 2


def test_a_new_policy_gets_its_status_filled(lab: Lab) -> None:
    """The quiet policy's two healthy sidecars: its status filled, conditions all clear,
    no action. (The lab asks each sidecar with a short timeout, for the silent scenario's
    sake: on a machine loaded by the rest of the suite a healthy sidecar can miss it, seen
    once in CI, and the operator then says so, truthfully, with a Warning Event. So the
    test waits for a round that read both, and allows those Events and no other.)"""
    status = lab.operator.wait_for(
        "quiet status with both sidecars read healthy",
        lambda: _both_healthy(lab.status("quiet")) and lab.status("quiet"),
    )
    assert status["unhealthy"] == 0
    assert (
        status["verdictCounts"]["healthy"] == 2
        and status["verdictCounts"]["sidecar_unreachable"] == 0
    )
    conditions = {c["type"]: (c["status"], c["reason"]) for c in status["conditions"]}
    assert conditions == {
        "Ready": ("True", "Polling"),
        "ActionsSuppressed": ("False", "ActionsAllowed"),
        "SidecarsReachable": ("True", "AllAnswer"),
        "NodeNetworkFault": ("False", "NoNodeFault"),
    }
    assert status["observedGeneration"] == 1
    events = lab.cluster.items("v1/events", "quiet")
    assert {e["reason"] for e in events} <= {"HangwatchSidecarUnreachable"}, events


def test_the_operator_asks_only_for_labelled_pods_and_nodes(lab: Lab) -> None:
    lab.operator.wait_for("a status", lambda: lab.status("quiet"))
    selectors = {
        (path, "watch" in params, params.get("labelSelector"))
        for method, path, params in lab.cluster.requests()
        if method.upper() == "GET" and path in {"/api/v1/pods", "/api/v1/nodes"}
    }
    assert selectors == {
        ("/api/v1/pods", False, "hangwatch.dev/policy"),  # the initial list
        ("/api/v1/pods", True, "hangwatch.dev/policy"),  # the watch
        ("/api/v1/nodes", False, "hangwatch.dev/cordoned"),
        ("/api/v1/nodes", True, "hangwatch.dev/cordoned"),
    }


def test_a_hung_producer_gets_its_pod_deleted_once(lab: Lab) -> None:
    hung = lab.scenarios["hung"].name(0)
    lab.operator.wait_for("the hung pod deleted", lambda: not lab.pod_exists("hung", hung))
    event = lab.wait_for_event("hung", "HangwatchRestart")
    assert event["involvedObject"]["name"] == hung and event["type"] == "Warning"
    assert event["message"].startswith("producer_hung: restart done: pod deleted with a 30 s grace")
    assert "sidecar of pod 1: producer_hung" in event["message"]
    lab.wait_rounds("hung", 2)
    assert len(lab.events("hung", "HangwatchRestart")) == 1
    assert all(lab.pod_exists("hung", name) for name in list(lab.scenarios["hung"].pods)[1:])
    status = lab.status("hung")
    assert (status["watched"], status["unhealthy"]) == (2, 0)
    last = status["lastAction"]
    assert (last["action"], last["pod"], last["decision"], last["outcome"]) == (
        "restart",
        hung,
        "acted",
        "done",
    )
    assert last["summary"] == f"restart {hung} (producer_hung)"
    metrics = scrape(lab.metrics_port)
    acted = (
        ("action", "restart"),
        ("outcome", "acted"),
        ("policy", "hung/writers"),
        ("verdict", "producer_hung"),
    )
    assert metrics[("hangwatch_operator_decisions_total", acted)] == 1
    assert (
        metrics[
            (
                "hangwatch_operator_actions_total",
                (("action", "restart"), ("policy", "hung/writers")),
            )
        ]
        == 1
    )


@pytest.mark.parametrize(
    ("namespace", "reason", "limit"),
    [
        ("storm", "HangwatchSuppressed", "suppressed by storm: 2 of 3 watched pods are unhealthy"),
        ("dry-run", "HangwatchDryRun", "not done, dry run (safety.dryRun is true"),
        ("unreachable", "HangwatchSuppressed", "suppressed by cluster_unreachable"),
        (
            "election",
            "HangwatchSuppressed",
            "suppressed by leader_election: partitions are leaderless",
        ),
        ("driver", "HangwatchSuppressed", "suppressed by driver_protected: drivers are protected"),
    ],
)
def test_no_deletion_when_a_limit_holds(lab: Lab, namespace: str, reason: str, limit: str) -> None:
    event = lab.wait_for_event(namespace, reason)
    assert event["message"].startswith("producer_hung: restart ")
    assert limit in event["message"] and "Reasons: sidecar of pod" in event["message"]
    lab.wait_rounds(namespace, 1)
    assert all(lab.pod_exists(namespace, name) for name in lab.scenarios[namespace].pods)
    assert lab.events(namespace, "HangwatchRestart") == []
    suppressed_by = event["message"].split("suppressed by ")[-1].split(":")[0]
    recent = next(r for r in lab.status(namespace)["recentActions"] if r["action"] != "alert")
    if namespace == "dry-run":
        assert recent["dryRun"] is True and recent["decision"] == "dry_run"
        assert lab.status(namespace)["lastAction"]["decision"] == "dry_run"
    else:
        assert recent["suppressedBy"] == suppressed_by
        last = lab.status(namespace).get("lastAction", {})  # an alert at most
        assert last.get("decision") != "suppressed" and last.get("action") in {None, "alert"}


def test_the_rate_limit_lets_one_restart_through(lab: Lab) -> None:
    first, second = lab.scenarios["rate"].name(0), lab.scenarios["rate"].name(1)
    event = lab.wait_for_event("rate", "HangwatchSuppressed")
    assert event["involvedObject"]["name"] == second
    assert "suppressed by rate_limit: application spark-" in event["message"]
    assert "(maxActionsPerApplicationPerHour 1)" in event["message"]
    assert not lab.pod_exists("rate", first) and lab.pod_exists("rate", second)
    metrics = scrape(lab.metrics_port)
    assert (
        metrics[
            (
                "hangwatch_operator_suppressions_total",
                (("policy", "rate/writers"), ("reason", "rate_limit")),
            )
        ]
        >= 1
    )


def test_a_node_fault_cordons_and_taints_the_node(lab: Lab) -> None:
    node = lab.operator.wait_for(
        "nf-a cordoned",
        lambda: (
            (lab.cluster.get(NODES, None, "nf-a") or {}).get("spec", {}).get("unschedulable")
            and lab.cluster.get(NODES, None, "nf-a")
        ),
    )
    assert node["spec"]["taints"] == [
        {"key": "hangwatch.dev/network-fault", "value": "true", "effect": "NoSchedule"}
    ]
    assert node["metadata"]["annotations"]["hangwatch.dev/cordoned-by"] == "node-fault/writers"
    assert node["metadata"]["labels"] == {"hangwatch.dev/cordoned": "true"}
    assert (lab.cluster.get(NODES, None, "nf-b") or {})["spec"] == {}
    cordon = lab.wait_for_event("default", "HangwatchCordonNode")
    assert cordon["involvedObject"] == {"apiVersion": "v1", "kind": "Node", "name": "nf-a"}
    assert "node_network_fault: cordonNode done" in cordon["message"]
    assert "2 pod(s) on node nf-a reach none of kafka-0.kafka:9092" in cordon["message"]
    alerts = lab.operator.wait_for(
        "alerts", lambda: len(lab.events("node-fault", "HangwatchAlert")) == 2
    )
    assert alerts
    status = lab.wait_for_verdict_count("node-fault", "node_network_fault", 2)
    faults = {c["type"]: c for c in status["conditions"]}["NodeNetworkFault"]
    assert faults["status"] == "True" and "nf-a" in faults["message"]
    assert all(lab.pod_exists("node-fault", name) for name in lab.scenarios["node-fault"].pods)
    assert scrape(lab.metrics_port)[("hangwatch_operator_cordoned_nodes", ())] == 1


def test_a_silent_sidecar_is_reported_and_nothing_is_done(lab: Lab) -> None:
    silent = lab.scenarios["silent"].name(0)
    event = lab.wait_for_event("silent", "HangwatchSidecarUnreachable")
    assert event["involvedObject"]["name"] == silent
    assert (
        f"no answer within {STATUS_TIMEOUT_SECONDS:g} s" in event["message"]
        and "no verdict, so no action" in event["message"]
    )
    status = lab.wait_for_verdict_count("silent", "sidecar_unreachable", 1)
    reachable = {c["type"]: c for c in status["conditions"]}["SidecarsReachable"]
    assert (reachable["status"], reachable["message"]) == ("False", f"no answer from {silent}")
    lab.wait_rounds("silent", 1)
    assert len(lab.events("silent", "HangwatchSidecarUnreachable")) == 1  # not repeated every poll
    assert all(lab.pod_exists("silent", name) for name in lab.scenarios["silent"].pods)
    gauge = ("hangwatch_operator_sidecar_unreachable_pods", (("policy", "silent/writers"),))
    assert scrape(lab.metrics_port)[gauge] == 1


def test_metrics_carry_the_contract_names_and_labels(lab: Lab) -> None:
    lab.wait_for_event("storm", "HangwatchSuppressed")
    metrics = scrape(lab.metrics_port)
    names = {name for name, _ in metrics}
    per_refused_topic = {"hangwatch_operator_unwritable_topic_pods"}  # none refused here
    assert {
        *(set(OPERATOR_DECISION_METRICS) - per_refused_topic),
        "hangwatch_operator_status_poll_duration_seconds_bucket",
        "hangwatch_operator_cordoned_nodes",
    } <= names
    labels = {name: {k for k, _ in label} for name, label in metrics}
    assert labels["hangwatch_operator_decisions_total"] == {
        "policy",
        "verdict",
        "action",
        "outcome",
    }
    assert labels["hangwatch_operator_suppressions_total"] == {"policy", "reason"}
    assert labels["hangwatch_operator_unhealthy_pods"] == {"policy", "verdict"}
    assert metrics[("hangwatch_operator_watched_pods", (("policy", "storm/writers"),))] == 3
    storm = (("policy", "storm/writers"), ("verdict", "producer_hung"))
    assert metrics[("hangwatch_operator_unhealthy_pods", storm)] == 2


def test_silent_sidecars_do_not_stop_the_restart_of_a_hung_pod(lab: Lab) -> None:
    """1 hung and 2 silent of 3 watched pods: once a storm, now the hung pod is deleted."""
    hung = lab.scenarios["silent-and-hung"].name(0)
    lab.operator.wait_for(
        "the hung pod deleted", lambda: not lab.pod_exists("silent-and-hung", hung)
    )
    # The round posts its Events after it acted: wait for the two silent pods' ones.
    lab.operator.wait_for(
        "both silent sidecars reported",
        lambda: len(lab.events("silent-and-hung", "HangwatchSidecarUnreachable")) == 2,
    )
    assert lab.events("silent-and-hung", "HangwatchSuppressed") == []
