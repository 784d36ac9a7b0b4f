"""The operator's decision code, run locally against the demo executors' sidecars.

The demo has no Kubernetes: each Spark executor JVM stands for an executor pod and its
sidecar process for the injected container. This module does what the operator does
each round in a cluster — `status_polling.poll_sidecars` (HTTP `/status` of every
sidecar), `correlation.correlate`, `decisions.decide` with a real
`ProducerHealthPolicy` (parsed by `policies.parse_policy`) and the operator's
`History`, kept with `history.remember` and `reporting.action_record` — and returns
the decisions. The caller carries out `restart` by killing the executor JVM, as the
operator deletes the pod and Spark replaces it.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Sequence
from typing import Any

import aiohttp

from hangwatch.contracts import Verdict
from hangwatch_operator.correlation import correlate
from hangwatch_operator.decisions import Decision, decide
from hangwatch_operator.history import History, remember
from hangwatch_operator.policies import Policy, parse_policy, stale_after_seconds
from hangwatch_operator.reporting import action_record, decision_message
from hangwatch_operator.sidecar_status import PodReport
from hangwatch_operator.status_polling import poll_sidecars
from hangwatch_operator.watched import WatchedPod

STATUS_TIMEOUT_SECONDS = 2.0
"""The operator's default `status_timeout_seconds`."""

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
    """Polls the executors' sidecars and decides, remembering what it did."""

    def __init__(self, policy: Policy | None = None) -> None:
        self.policy = policy or demo_policy()
        self.history = History()

    def poll(self, pods: Sequence[WatchedPod]) -> list[PodReport]:
        """Every pod's sidecar `/status`, as the operator polls it (errors in the report)."""
        return asyncio.run(self._poll(pods))

    async def _poll(self, pods: Sequence[WatchedPod]) -> list[PodReport]:
        async with aiohttp.ClientSession() as session:
            return await poll_sidecars(
                session,
                pods,
                timeout_seconds=STATUS_TIMEOUT_SECONDS,
                concurrency=8,
                stale_after_seconds=stale_after_seconds(self.policy),
            )

    def decide(self, reports: Sequence[PodReport], now: float) -> list[Decision]:
        """The operator's decisions for these pods now; like the operator's round, it then
        remembers elections and node faults seen (the election grace counts from them)."""
        findings = correlate(reports)
        decisions = decide(findings, self.policy, self.history, now)
        self.history = remember(
            self.history,
            current=decisions,
            reported=[],
            records=[],
            election_seen=bool(findings.with_verdict(Verdict.LEADER_ELECTION)),
            faulty_nodes=findings.faulty_nodes,
            now=now,
        )
        return decisions

    def acted(self, decision: Decision, now: float) -> None:
        """Record that `decision` was carried out (starts its cooldown, counts for rates)."""
        record = action_record(decision, decision_message(decision, POLICY_KEY), now)
        self.history = dataclasses.replace(self.history, records=(record, *self.history.records))
