"""The operator's decision code, run locally against one sidecar's /status document.

The demo has no Kubernetes: each producer process stands for an executor pod. This
module feeds the sidecar's `/status` JSON through exactly what the operator runs in a
cluster — `sidecar_status.parse_status`, `correlation.correlate`, `decisions.decide`
with a real `ProducerHealthPolicy` (parsed by `policies.parse_policy`) and the
operator's `History` — and returns the decisions. The caller carries out `restart`
by replacing the producer process, as Spark replaces a deleted executor pod.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from hangwatch_operator.correlation import correlate
from hangwatch_operator.decisions import Decision, decide
from hangwatch_operator.history import ActionRecord, History, Outcome
from hangwatch_operator.policies import Policy, parse_policy
from hangwatch_operator.sidecar_status import PodReport, parse_status
from hangwatch_operator.watched import WatchedPod

DEMO_POLICY: dict[str, Any] = {
    "apiVersion": "hangwatch.dev/v1alpha1",
    "kind": "ProducerHealthPolicy",
    "metadata": {"name": "demo", "namespace": "demo"},
    "spec": {
        "selector": {"matchLabels": {"spark-role": "executor"}},
        "roles": ["executor"],
        "kafka": {"bootstrapServers": ["127.0.0.1:9092"], "topics": ["events"]},
        "probes": {
            "probeIntervalSeconds": 1,
            "connectTimeoutSeconds": 1,
            "requestTimeoutSeconds": 1,
        },
        "detection": {
            "stallSeconds": 5,
            "heartbeatSeconds": 4,
            "metadataMaxAgeSeconds": 90,
            "electionGraceSeconds": 5,
            "timeToErrorBudgetSeconds": 60,
        },
        "actions": {
            "producerHung": ["restart", "alert"],
            "metadataStale": ["restart", "alert"],
            "brokerDegraded": ["alert"],
            "clusterUnreachable": ["alert"],
            "leaderElection": ["alert"],
            "nodeNetworkFault": ["cordonNode", "alert"],
            "unknown": [],
        },
        "safety": {
            "dryRun": False,
            "maxConcurrent": 1,
            "maxUnhealthyShare": 0.5,
            "maxActionsPerApplicationPerHour": 6,
            "podCooldownSeconds": 60,
            "allowDriverDeletion": False,
        },
    },
}
"""The demo's policy: restart hung and stale producers, only alert otherwise (the
policy schema refuses `restart` for cluster_unreachable and leader_election)."""


def demo_policy() -> Policy:
    return parse_policy(DEMO_POLICY)


def executor_pod(number: int) -> WatchedPod:
    """The pod a local producer process stands for."""
    return WatchedPod(
        namespace="demo",
        name=f"demo-exec-{number}",
        uid=f"uid-{number}",
        policy="demo",
        role="executor",
        node="local",
        ip="127.0.0.1",
        port=0,
        application_id="demo-app",
        executor_id=str(number),
    )


class LocalOperator:
    """Decides on one executor's sidecar status, remembering what it did."""

    def __init__(self, policy: Policy | None = None) -> None:
        self.policy = policy or demo_policy()
        self.history = History()

    def decide(self, status: Mapping[str, Any], pod: WatchedPod, now: float) -> list[Decision]:
        """The operator's decisions for this pod now (stale status counts as unreachable)."""
        report = PodReport(pod=pod, status=parse_status(status, now=now, stale_after_seconds=30))
        return decide(correlate([report]), self.policy, self.history, now)

    def acted(self, decision: Decision, now: float) -> None:
        """Record that `decision` was carried out (starts its cooldown, counts for rates)."""
        record = ActionRecord(
            time=now,
            operation=decision.operation,
            verdict=decision.verdict,
            outcome=Outcome.ACTED,
            pod=decision.pod.key if decision.pod else None,
            application_id=decision.pod.application_id if decision.pod else None,
        )
        self.history = dataclasses.replace(self.history, records=(record, *self.history.records))
