"""Acting while the poll goes on, end to end: a hung pod deleted before its round's poll ends.

`hangwatch operator` against kmock's emulator, sidecars read one at a time
(`status_poll_concurrency` 1, so a round reads its pods in `rolling.poll_order`: node
by node), with a 60 s status timeout. Pod e1 (node x1) has a real sidecar server; pod
e2 (node x2) one that holds every request until the test lets it go, so a round's poll
cannot end while the test holds it. Round 1 reads e1 `healthy`; while e2 holds that
round, e1's sidecar turns `producer_hung`; the test lets round 1 go. Round 2 reads e1
`producer_hung` and the operator deletes e1 while e2 still holds round 2: the round
count has not moved and the held request is still open when the deletion shows. Once
released, round 2 ends without a second decision on e1: one HangwatchRestart Event and
one restart in the policy's recentActions.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path

import pytest

from hangwatch.contracts import Verdict
from hangwatch_testing.remediation_cluster import (
    FAST,
    PODS,
    POLICIES,
    FakeSidecar,
    RemediationCluster,
    poll_rounds,
    remediating_operator,
    stored_policy,
    watched_executor,
)
from hangwatch_testing.silent_broker import SilentBroker

NAMESPACE = "early"


@pytest.fixture
def holding() -> Iterator[SilentBroker]:
    """A sidecar that holds every request until released."""
    with SilentBroker() as sidecar:
        yield sidecar


def test_a_hung_pod_is_deleted_before_its_rounds_poll_ends(
    tmp_path: Path, holding: SilentBroker
) -> None:
    with ExitStack() as stack:
        cluster = stack.enter_context(RemediationCluster())
        operator, metrics = stack.enter_context(
            remediating_operator(
                cluster, tmp_path, status_timeout_seconds=60.0, status_poll_concurrency=1
            )
        )
        policy = stored_policy(NAMESPACE, "writers", **FAST)
        hung = FakeSidecar().start()
        stack.callback(hung.close)
        e1 = watched_executor(policy, 1, hung.port, node="x1")
        e2 = watched_executor(policy, 2, holding.port, node="x2")
        for body in (e1, e2):
            cluster.create(PODS, NAMESPACE, body)
        cluster.create(POLICIES, NAMESPACE, policy)
        name = e1["metadata"]["name"]
        key = f"{NAMESPACE}/writers"

        operator.wait_for("round 1 held on e2", lambda: len(holding.peers) == 1)
        hung.set(Verdict.PRODUCER_HUNG, reasons=("test flips e1",))  # e1 was read: one at a time
        holding.release()
        operator.wait_for("round 1 ended", lambda: poll_rounds(metrics, key) == 1)
        operator.wait_for("round 2 held on e2", lambda: len(holding.peers) == 2)
        operator.wait_for("e1 deleted", lambda: cluster.get(PODS, NAMESPACE, name) is None)
        assert poll_rounds(metrics, key) == 1, "round 2 has not ended"
        assert holding.open_connections() == 1, "round 2 still waits for e2's sidecar"

        holding.release()
        operator.wait_for("round 2 ended", lambda: poll_rounds(metrics, key) >= 2)
        restarts = cluster.events(NAMESPACE, "HangwatchRestart")
        assert [e["involvedObject"]["name"] for e in restarts] == [name]
        actions = cluster.policy_status(NAMESPACE, "writers").get("recentActions") or []
        assert [(a["pod"], a["action"]) for a in actions if a.get("pod") == name] == [
            (name, "restart")
        ]
