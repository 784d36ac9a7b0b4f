"""The operator's own round, run locally against the demo executors' sidecars.

The demo has no Kubernetes: each Spark executor JVM stands for an executor pod and its
sidecar process for the injected container. Each round does what the operator does in
a cluster, with the operator's code: `status_polling.poll_sidecars` (HTTP `/status` of
every sidecar), then the two pure halves of `rounds` — `plan_round` (correlation,
decisions under every limit, with a real `ProducerHealthPolicy` parsed by
`policies.parse_policy`) and, once the caller has carried out what the plan asks,
`settle_round` (the history the next round starts from, trimmed as the operator's).
The caller carries out `restart` by killing the executor JVM, as the operator deletes
the pod and Spark replaces it; there are no nodes to cordon. Each round updates the
operator's metrics (`operator_metrics.measure_round`, the operator's registry), so a
caller serving that registry shows Prometheus what the operator would.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import Any

from hangwatch_operator import operator_metrics
from hangwatch_operator.decisions import Decision
from hangwatch_operator.history import History
from hangwatch_operator.policies import Policy, parse_policy, stale_after_seconds
from hangwatch_operator.rounds import plan_round, settle_round
from hangwatch_operator.settings import OperatorSettings
from hangwatch_operator.sidecar_status import PodReport
from hangwatch_operator.status_polling import poll_sidecars
from hangwatch_operator.watched import WatchedPod

CarryOut = Callable[[Decision], Decision]
"""Carries out one decision and returns it as it ended (a note, or outcome `failed`)."""

SETTINGS = OperatorSettings()
"""The operator's defaults: status timeout, re-notification, cap on cordoned nodes."""

DEMO_POLICY: dict[str, Any] = {
    "apiVersion": "hangwatch.dev/v1alpha1",
    "kind": "ProducerHealthPolicy",
    "metadata": {"name": "demo", "namespace": "demo"},
    "spec": {
        "selector": {"matchLabels": {"spark-role": "executor"}},
        "roles": ["executor"],
        "kafka": {"bootstrapServers": ["127.0.0.1:9092"], "topics": ["events"]},
        # The smallest values the CRD accepts. The demo's sidecars judge faster still
        # (`scenarios.Timing`: 1 s rounds, 4 s heartbeat); the operator's side reads only
        # the election grace and, for a wedged sidecar, the probe rhythm.
        "probes": {
            "probeIntervalSeconds": 2,
            "connectTimeoutSeconds": 1,
            "requestTimeoutSeconds": 1,
        },
        "detection": {
            "stallSeconds": 5,
            "heartbeatSeconds": 5,
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
            # Two executors: one hung executor is already half of them, and in S1 and
            # S2 every producer is stuck. The storm limit is for larger applications
            # (operator tests cover it); outage and election limits still apply.
            "maxUnhealthyShare": 1.0,
            "maxActionsPerApplicationPerHour": 6,
            "podCooldownSeconds": 60,
            "allowDriverDeletion": False,
        },
    },
}
"""The demo's policy: restart hung and stale producers, only alert otherwise (the
policy schema refuses `restart` for cluster_unreachable and leader_election). One
action at a time, 60 s cooldown per executor, at most 6 per application and hour."""


POLICY_KEY = "demo/demo"
"""`namespace/name` of the demo policy (as the operator names a policy in messages)."""


def demo_policy() -> Policy:
    return parse_policy(DEMO_POLICY)


class LocalOperator:
    """Polls the executors' sidecars and runs the operator's rounds, remembering them."""

    def __init__(self, policy: Policy | None = None) -> None:
        self.policy = policy or demo_policy()
        self.history = History()

    def poll(self, pods: Sequence[WatchedPod]) -> list[PodReport]:
        """Every pod's sidecar `/status`, as the operator polls it (errors in the report)."""
        return asyncio.run(self._poll(pods))

    async def _poll(self, pods: Sequence[WatchedPod]) -> list[PodReport]:
        return await poll_sidecars(
            pods,
            timeout_seconds=SETTINGS.status_timeout_seconds,
            concurrency=8,
            stale_after_seconds=stale_after_seconds(self.policy),
        )

    def decide(
        self, reports: Sequence[PodReport], now: float, carry_out: CarryOut
    ) -> list[Decision]:
        """One operator round on these reports: plan, `carry_out` what the plan asks,
        settle; returns every decision as it ended."""
        plan = plan_round(
            reports, self.policy, self.history, now, policy_key=POLICY_KEY, settings=SETTINGS
        )
        settled = settle_round(plan, [carry_out(d) for d in plan.to_carry_out])
        self.history = settled.history
        operator_metrics.measure_round(POLICY_KEY, plan, settled)
        return list(settled.decisions)
