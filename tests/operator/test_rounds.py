"""One round, pure: `rounds.plan_round` and `rounds.settle_round`, and the cordon walk.

Covers: the plan applies the operator's `--dry-run`, correlates with the policy's
`nodeFaultMinPods`, splits the cluster's cordons into this policy's and the others',
asks the driver to carry out only acted, non-alert decisions, and marks new decisions
due for reporting; settling puts each carried-out decision's end in place (a note, a
failure, one left out fails), reports what was carried out or is due (an unchanged
suppression once, not every round), writes Events (silent sidecars once) and records
newest first, and remembers elections and an hour of records. The cordon walk of
issue 13, simulated round by round on the pure round with a node that obeys the
carried-out cordons and uncordons: one pod per node, each round the next node's pod
cut off (10 nodes, 10 s rounds) cordons nothing now (it cordoned all 10 before); an
attacker with two pods per node gets at most one node cordoned at any time (the
policy's and the operator's caps, cordons in flight until lifted), for an hour with
auto-uncordon on, and so do three attacking policies together; a policy that lowers
`nodeFaultMinPods` to 1 or raises its own cap stays under the operator's cap.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest

from hangwatch.contracts import Verdict
from hangwatch_operator.decisions import Decision
from hangwatch_operator.history import History
from hangwatch_operator.operations import Operation, Outcome, Suppression
from hangwatch_operator.policies import Policy, stale_after_seconds
from hangwatch_operator.rounds import SILENCE_REASON, plan_round, settle_round
from hangwatch_operator.settings import OperatorSettings
from hangwatch_operator.watched import CordonedNode, WatchedPod
from tests.operator.builders import NOW, fleet, pod, policy, reports

HUNG = Verdict.PRODUCER_HUNG
CUT = Verdict.CLUSTER_UNREACHABLE
OK = Verdict.HEALTHY
KEY = "jobs/writers"


def _done(decision: Decision) -> Decision:
    return dataclasses.replace(decision, note="done")


def test_the_plan_applies_the_operators_dry_run() -> None:
    plan = plan_round(
        reports((pod("e1"), HUNG), *fleet(3, start=100)),
        policy(),
        History(),
        NOW,
        policy_key=KEY,
        settings=OperatorSettings(dry_run=True),
    )
    assert plan.policy.safety.dry_run
    assert plan.to_carry_out == ()
    (restart,) = [d for d in plan.decisions if d.operation is Operation.RESTART]
    assert restart.outcome is Outcome.DRY_RUN


def test_the_plan_blames_nodes_by_the_policys_minimum_and_splits_cordons() -> None:
    one_each = reports(*[(pod(f"e{i}", node=f"n{i}"), CUT if i == 0 else OK) for i in range(4)])
    cordons = [CordonedNode("n9", KEY, NOW - 60), CordonedNode("n8", "other/policy", NOW - 60)]
    spec = {"actions": {"nodeNetworkFault": ["cordonNode"]}}
    default = plan_round(one_each, policy(**spec), History(), NOW, policy_key=KEY, cordons=cordons)
    assert default.findings.faulty_nodes == {}
    assert dict(default.history.cordoned) == {"n9": NOW - 60}
    assert default.history.cordoned_elsewhere == {"n8"}
    lowered = policy(**spec, safety={"nodeFaultMinPods": 1, "maxConcurrent": 5})
    lowered_plan = plan_round(one_each, lowered, History(), NOW, policy_key=KEY, cordons=cordons)
    assert set(lowered_plan.findings.faulty_nodes) == {"n0"}
    (cordon,) = lowered_plan.decisions
    assert (cordon.node, cordon.outcome, cordon.suppression) == (
        "n0",
        Outcome.SUPPRESSED,
        Suppression.MAX_CORDONED,
    ), "n9 is this policy's cordon, n8 another's: both caps are full"


def test_only_acted_non_alert_decisions_are_carried_out_and_new_ones_are_due() -> None:
    spec = {"actions": {"producerHung": ["restart", "alert"]}}
    plan = plan_round(
        reports((pod("e1"), HUNG), (pod("e2"), HUNG), *fleet(3, start=100)),
        policy(**spec),
        History(),
        NOW,
        policy_key=KEY,
    )
    assert [(d.target, d.operation) for d in plan.to_carry_out] == [("jobs/e1", Operation.RESTART)]
    assert {d.key for d in plan.decisions} == plan.due  # all new


def test_settling_reports_what_was_carried_out_or_is_due_and_remembers_it() -> None:
    spec = {"actions": {"producerHung": ["restart", "alert"]}}
    pods = reports((pod("e1"), HUNG), (pod("e2"), HUNG), (pod("e3"), None), *fleet(3, start=100))
    plan = plan_round(pods, policy(**spec), History(), NOW, policy_key=KEY)
    settled = settle_round(plan, [_done(d) for d in plan.to_carry_out])
    summary = [(d.target, str(d.operation), d.outcome, d.note) for d in settled.reported]
    assert summary == [
        ("jobs/e1", "restart", Outcome.ACTED, "done"),
        ("jobs/e1", "alert", Outcome.ACTED, ""),
        ("jobs/e2", "restart", Outcome.SUPPRESSED, ""),
        ("jobs/e2", "alert", Outcome.ACTED, ""),
    ]
    assert [e.reason for e in settled.events] == [
        "HangwatchRestart",
        "HangwatchAlert",
        "HangwatchSuppressed",
        "HangwatchAlert",
        SILENCE_REASON,
    ]
    assert "restart done: done" in settled.events[0].message and KEY in settled.events[0].message
    assert [r.pod for r in settled.records] == ["jobs/e2", "jobs/e2", "jobs/e1", "jobs/e1"]
    assert settled.history.records == settled.records
    # The next round: e1 is gone; e2's unchanged suppression and the silence are not news.
    again = plan_round(
        [r for r in pods if r.pod.name != "e1"],
        policy(**spec),
        settled.history,
        NOW + 10,
        policy_key=KEY,
    )
    later = settle_round(again, [_done(d) for d in again.to_carry_out])
    assert [(d.target, d.outcome) for d in later.reported] == [("jobs/e2", Outcome.ACTED)]
    assert [e.reason for e in later.events] == ["HangwatchRestart"]


def test_a_failed_or_forgotten_decision_ends_failed() -> None:
    plan = plan_round(
        reports((pod("e1"), HUNG), *fleet(3, start=100)), policy(), History(), NOW, policy_key=KEY
    )
    (restart,) = plan.to_carry_out
    failed = dataclasses.replace(restart, outcome=Outcome.FAILED, note="HTTP 403: forbidden")
    assert settle_round(plan, [failed]).reported == (failed,)
    (forgotten,) = settle_round(plan, []).reported
    assert (forgotten.outcome, forgotten.note) == (Outcome.FAILED, "not carried out")


def test_settling_remembers_elections_and_trims_records_to_an_hour() -> None:
    plan = plan_round(
        reports((pod("e1"), HUNG), *fleet(3, start=100)), policy(), History(), NOW, policy_key=KEY
    )
    first = settle_round(plan, [_done(d) for d in plan.to_carry_out]).history
    assert [r.time for r in first.records] == [NOW]
    electing = reports((pod("e2"), Verdict.LEADER_ELECTION), *fleet(3, start=100))
    plan = plan_round(electing, policy(), first, NOW + 3600, policy_key=KEY)
    after = settle_round(plan, []).history
    assert after.last_election_ts == NOW + 3600
    assert [r.operation for r in after.records] == [Operation.ALERT], "the old restart is gone"


def _round(entries: list[Any], history: History, now: float) -> tuple[list[Decision], History]:
    plan = plan_round(reports(*entries), policy(), history, now, policy_key=KEY)
    settled = settle_round(plan, [_done(d) for d in plan.to_carry_out])
    return [d for d in settled.decisions if d.operation is Operation.RESTART], settled.history


def test_a_storm_holds_through_a_missed_answer_and_no_longer() -> None:
    """2 of 3 pods hung: a storm. One hung pod's sidecar then misses its answers: for as
    long as a /status stays believable it counts as it last answered, so the other hung
    pod is not restarted; past that, silence is no evidence and the other is restarted.
    A pod that answers healthy, or was never heard unhealthy, is not recalled."""
    e1, e2, e3 = pod("e1"), pod("e2"), pod("e3")
    window = stale_after_seconds(policy())
    restarts, history = _round([(e1, HUNG), (e2, HUNG), (e3, OK)], History(), NOW)
    assert [d.suppression for d in restarts] == [Suppression.STORM] * 2
    assert dict(history.unhealthy_seen) == {"jobs/e1": NOW, "jobs/e2": NOW}
    later = NOW + window - 1
    (held,), history = _round([(e1, None), (e2, HUNG), (e3, OK)], history, later)
    assert (held.pod, held.suppression) == (e2, Suppression.STORM)
    assert "2 of 3 watched pods are unhealthy (1 by its last answer" in held.limit
    assert dict(history.unhealthy_seen) == {"jobs/e1": NOW, "jobs/e2": later}
    (freed,), _ = _round([(e1, None), (e2, HUNG), (e3, OK)], history, NOW + window)
    assert (freed.pod, freed.outcome) == (e2, Outcome.ACTED)
    (healthy_now,), after = _round([(e1, OK), (e2, HUNG), (e3, None)], history, later + 1)
    assert healthy_now.outcome is Outcome.ACTED and dict(after.unhealthy_seen) == {
        "jobs/e2": later + 1
    }


# The cordon walk ------------------------------------------------------------------

NODES = [f"node-{i}" for i in range(10)]
ROUND_SECONDS = 10.0
CORDONING = {"actions": {"nodeNetworkFault": ["cordonNode", "alert"]}}


@dataclass
class Cluster:
    """Nodes that obey the cordons and uncordons the rounds carry out."""

    cordoned: dict[str, CordonedNode] = field(default_factory=dict)
    most: int = 0
    ever: set[str] = field(default_factory=set)

    def carry_out(self, policy_key: str, decision: Decision, now: float) -> Decision:
        node = decision.node or ""
        if decision.operation is Operation.CORDON_NODE:
            self.cordoned[node] = CordonedNode(node, policy_key, now)
            self.ever.add(node)
        elif decision.operation is Operation.UNCORDON_NODE:
            self.cordoned.pop(node, None)
        self.most = max(self.most, len(self.cordoned))
        return _done(decision)


@dataclass
class Tenant:
    """A policy whose pods the attacker runs, `per_node` on every node."""

    key: str
    policy: Policy
    per_node: int
    history: History = field(default_factory=History)

    def pods(self) -> list[WatchedPod]:
        namespace, _ = self.key.split("/")
        return [
            dataclasses.replace(pod(f"{node}-{i}", node=node), namespace=namespace)
            for node in NODES
            for i in range(self.per_node)
        ]


def _walk(
    tenants: list[Tenant],
    rounds: int,
    cut_off: Callable[[int, WatchedPod], bool],
    settings: OperatorSettings | None = None,
) -> Cluster:
    """`rounds` rounds of every tenant; in round r, the pods `cut_off(r, pod)` report
    cluster_unreachable (no broker answers), every other pod is healthy."""
    cluster = Cluster()
    for number in range(rounds):
        now = NOW + number * ROUND_SECONDS
        for tenant in tenants:
            polled = reports(*[(p, CUT if cut_off(number, p) else OK) for p in tenant.pods()])
            plan = plan_round(
                polled,
                tenant.policy,
                tenant.history,
                now,
                policy_key=tenant.key,
                cordons=list(cluster.cordoned.values()),
                settings=settings,
            )
            done = [cluster.carry_out(tenant.key, d, now) for d in plan.to_carry_out]
            tenant.history = settle_round(plan, done).history
    return cluster


def _next_node(number: int, the_pod: WatchedPod) -> bool:
    return the_pod.node == NODES[number % len(NODES)]


def test_one_pod_per_node_walking_the_nodes_cordons_nothing() -> None:
    tenant = Tenant("jobs/writers", policy(**CORDONING), per_node=1)
    cluster = _walk([tenant], rounds=len(NODES), cut_off=_next_node)
    assert (cluster.most, cluster.ever) == (0, set())


def _a_node_per_thousand_seconds(number: int, the_pod: WatchedPod) -> bool:
    return the_pod.node == NODES[int(number * ROUND_SECONDS) // 1000 % len(NODES)]


@pytest.mark.parametrize(
    ("spec", "per_node"),
    [
        ({}, 2),  # enough pods per node to blame it
        ({"safety": {"nodeFaultMinPods": 1}}, 1),  # the policy lowered the minimum
        ({"safety": {"maxCordonedNodes": 10, "maxConcurrent": 10}}, 2),  # its own cap raised
    ],
    ids=["two-pods-per-node", "min-pods-lowered", "policy-cap-raised"],
)
def test_an_attacker_walking_the_nodes_for_an_hour_holds_one_node_at_most(
    spec: dict[str, Any], per_node: int
) -> None:
    merged = {**CORDONING, **spec}
    hour = int(3600 / ROUND_SECONDS)
    walker = Tenant("jobs/writers", policy(**merged), per_node=per_node)
    cluster = _walk([walker], rounds=hour, cut_off=_next_node)
    assert (cluster.most, cluster.ever) == (1, {"node-0"}), (
        "the first node blamed stays cordoned while it keeps being blamed; no other is"
    )
    # Blaming one node after the other for 1000 s each: each cordon is lifted once its
    # node has been quiet for healthyForSeconds (900 s, auto-uncordon is on by default),
    # and only then may the next node be cordoned. One node at a time, three an hour.
    slow = Tenant("jobs/writers", policy(**merged), per_node=per_node)
    cluster = _walk([slow], rounds=hour, cut_off=_a_node_per_thousand_seconds)
    assert (cluster.most, cluster.ever) == (1, {"node-0", "node-1", "node-2"})


def test_three_attacking_policies_hold_one_node_between_them() -> None:
    roomy = {**CORDONING, "safety": {"maxCordonedNodes": 10, "maxConcurrent": 10}}
    tenants = [Tenant(f"team-{t}/writers", policy(**roomy), per_node=2) for t in ("a", "b", "c")]
    cluster = _walk(tenants, rounds=len(NODES) * 3, cut_off=_next_node)
    assert cluster.most == 1
    wider = _walk(
        [Tenant(t.key, t.policy, 2) for t in tenants],
        rounds=len(NODES) * 3,
        cut_off=_next_node,
        settings=OperatorSettings(max_cordoned_nodes=2),
    )
    assert wider.most == 2, "the operator's cap is the bound, and it is a setting"
