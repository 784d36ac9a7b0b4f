"""Decisions under every safety limit, alone and together (pure, fake time).

Covers `decisions.decide` and `assess_gates` table-driven: a hung executor among
healthy ones is restarted; dry run reports instead; a storm (share above
maxUnhealthyShare, never a single pod) stops everything disruptive, and silent
sidecars never make one (they stay in the whole: any number of them cannot switch
remediation off); a pod that cannot reach Kafka, an ongoing leader election and the
grace after it stop restarts; drivers are protected unless allowed; cooldown per pod
(dry runs and alerts start none); rate per application per rolling hour (old and
suppressed records do not count, this round's do); maxConcurrent counts actions still
in progress (a node the policy holds cordoned included, another policy's not) and
this round's plan; the first limit in the documented order is the one reported; the
longest-unhealthy pod goes first; alerts are never suppressed; `unknown` does nothing;
node faults cordon once (not twice, not a node another policy cordoned) and are
limited like restarts, and by the policy's and the operator's caps on cordoned nodes
(0 switches cordoning off); auto-uncordon waits for a quiet node and is on by default.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from hangwatch.contracts import Verdict
from hangwatch_operator.correlation import Findings
from hangwatch_operator.decisions import Decision, assess_gates, decide
from hangwatch_operator.history import ActionRecord, History
from hangwatch_operator.operations import Operation, Outcome, Suppression
from tests.operator.builders import NOW, findings, fleet, pod, policy, report
from tests.operator.builders import reports as make_reports

HUNG = Verdict.PRODUCER_HUNG
OK = Verdict.HEALTHY
CUT = Verdict.CLUSTER_UNREACHABLE
ACTED, DRY, SUPPRESSED = Outcome.ACTED, Outcome.DRY_RUN, Outcome.SUPPRESSED


def restart_record(
    name: str, ago: float, outcome: Outcome = ACTED, app: str = "spark-app-1"
) -> ActionRecord:
    return ActionRecord(
        time=NOW - ago,
        operation=Operation.RESTART,
        verdict=HUNG,
        outcome=outcome,
        pod=f"jobs/{name}",
        node="node-a",
        application_id=app,
    )


@dataclass
class Case:
    id: str
    pods: list[Any]
    expected: list[tuple[str, str, Outcome, Suppression | None]]
    """(target name, operation, outcome, suppression) of every non-alert decision, in order."""
    spec: dict[str, Any] = field(default_factory=dict)
    history: History = field(default_factory=History)


def hung_among(healthy: int, *hung: str) -> list[Any]:
    return [*[(pod(n), HUNG) for n in hung], *fleet(healthy, start=100)]


CASES = [
    Case("hung-among-healthy-is-restarted", hung_among(3, "e1"), [("e1", "restart", ACTED, None)]),
    Case(
        "dry-run-reports-instead",
        hung_among(3, "e1"),
        [("e1", "restart", DRY, Suppression.DRY_RUN)],
        spec={"safety": {"dryRun": True}},
    ),
    Case(
        "storm-stops-all",
        hung_among(1, "e1", "e2"),
        [
            ("e1", "restart", SUPPRESSED, Suppression.STORM),
            ("e2", "restart", SUPPRESSED, Suppression.STORM),
        ],
    ),
    Case("one-pod-alone-is-never-a-storm", hung_among(0, "e1"), [("e1", "restart", ACTED, None)]),
    Case(
        "exactly-the-share-is-not-a-storm",
        hung_among(2, "e1", "e2"),
        [("e1", "restart", ACTED, None), ("e2", "restart", SUPPRESSED, Suppression.MAX_CONCURRENT)],
    ),
    Case(
        "a-silent-sidecar-does-not-make-a-storm",
        [(pod("e1"), HUNG), (pod("e2"), None), (pod("e3"), OK)],
        [("e1", "restart", ACTED, None)],
    ),
    Case(
        "many-silent-sidecars-cannot-switch-remediation-off",
        [(pod("e1"), HUNG), *[(pod(f"mute-{i}"), None) for i in range(20)]],
        [("e1", "restart", ACTED, None)],
    ),
    Case(
        "silent-sidecars-are-still-watched-pods-in-the-share",
        [(pod("e1"), HUNG), (pod("e2"), HUNG), (pod("e3"), None), (pod("e4"), None)],
        [("e1", "restart", ACTED, None), ("e2", "restart", SUPPRESSED, Suppression.MAX_CONCURRENT)],
    ),
    Case(
        "a-cordoned-node-is-an-action-in-progress",
        hung_among(3, "e1"),
        [("e1", "restart", SUPPRESSED, Suppression.MAX_CONCURRENT)],
        history=History(cordoned={"node-z": NOW - 60}),
    ),
    Case(
        "another-policys-cordon-is-not-ours",
        hung_among(3, "e1"),
        [("e1", "restart", ACTED, None)],
        history=History(cordoned_elsewhere=frozenset({"node-z"})),
    ),
    Case(
        "a-raised-share-lets-it-act",
        hung_among(1, "e1", "e2"),
        [("e1", "restart", ACTED, None), ("e2", "restart", ACTED, None)],
        spec={"safety": {"maxUnhealthyShare": 1.0, "maxConcurrent": 2}},
    ),
    Case(
        "cluster-unreachable-somewhere-stops-restarts",
        [(pod("e1"), HUNG), (pod("e2"), CUT), *fleet(4, start=100)],
        [("e1", "restart", SUPPRESSED, Suppression.CLUSTER_UNREACHABLE)],
    ),
    Case(
        "ongoing-election-stops-restarts",
        [(pod("e1"), HUNG), (pod("e2"), Verdict.LEADER_ELECTION), *fleet(4, start=100)],
        [("e1", "restart", SUPPRESSED, Suppression.LEADER_ELECTION)],
    ),
    Case(
        "within-election-grace",
        hung_among(3, "e1"),
        [("e1", "restart", SUPPRESSED, Suppression.LEADER_ELECTION)],
        history=History(last_election_ts=NOW - 10),
    ),
    Case(
        "after-election-grace",
        hung_among(3, "e1"),
        [("e1", "restart", ACTED, None)],
        history=History(last_election_ts=NOW - 31),
    ),
    Case(
        "driver-is-protected",
        [(pod("drv", role="driver"), HUNG), *fleet(3, start=100)],
        [("drv", "restart", SUPPRESSED, Suppression.DRIVER_PROTECTED)],
        spec={"roles": ["executor", "driver"]},
    ),
    Case(
        "driver-deletion-when-allowed",
        [(pod("drv", role="driver"), HUNG), *fleet(3, start=100)],
        [("drv", "restart", ACTED, None)],
        spec={"roles": ["executor", "driver"], "safety": {"allowDriverDeletion": True}},
    ),
    Case(
        "driver-protection-comes-before-storm-and-dry-run",
        [(pod("drv", role="driver"), HUNG), (pod("e2"), HUNG)],
        [
            ("drv", "restart", SUPPRESSED, Suppression.DRIVER_PROTECTED),
            ("e2", "restart", SUPPRESSED, Suppression.STORM),
        ],
        spec={"roles": ["executor", "driver"], "safety": {"dryRun": True}},
    ),
    Case(
        "cooldown-per-pod",
        hung_among(3, "e1"),
        [("e1", "restart", SUPPRESSED, Suppression.COOLDOWN)],
        history=History(records=(restart_record("e1", 100, Outcome.FAILED),)),
    ),
    Case(
        "an-alert-starts-no-cooldown",
        hung_among(3, "e1"),
        [("e1", "restart", ACTED, None)],
        history=History(
            records=(
                ActionRecord(NOW - 8, Operation.ALERT, HUNG, ACTED, pod="jobs/e1"),
                restart_record("e1", 9, SUPPRESSED),
            )
        ),
    ),
    Case(
        "cooldown-over",
        hung_among(3, "e1"),
        [("e1", "restart", ACTED, None)],
        history=History(records=(restart_record("e1", 601, Outcome.FAILED),)),
    ),
    Case(
        "a-dry-run-starts-no-cooldown-and-does-not-rate-limit-its-own-pod",
        hung_among(3, "e1"),
        [("e1", "restart", DRY, Suppression.DRY_RUN)],
        spec={"safety": {"dryRun": True, "maxActionsPerApplicationPerHour": 1}},
        history=History(records=(restart_record("e1", 100, DRY), restart_record("e1", 700, DRY))),
    ),
    Case(
        "dry-runs-of-other-pods-count-for-the-rate",
        hung_among(3, "e1"),
        [("e1", "restart", SUPPRESSED, Suppression.RATE_LIMIT)],
        spec={"safety": {"dryRun": True, "maxActionsPerApplicationPerHour": 1}},
        history=History(records=(restart_record("e0", 100, DRY),)),
    ),
    Case(
        "rate-limit-per-application",
        hung_among(3, "e1"),
        [("e1", "restart", SUPPRESSED, Suppression.RATE_LIMIT)],
        history=History(records=tuple(restart_record(f"old-{i}", 600 + i) for i in range(6))),
    ),
    Case(
        "rate-window-rolls-and-ignores-suppressed-and-other-apps",
        hung_among(3, "e1"),
        [("e1", "restart", ACTED, None)],
        history=History(
            records=(
                *(restart_record(f"old-{i}", 3601 + i) for i in range(6)),
                *(restart_record(f"sup-{i}", 60, SUPPRESSED) for i in range(6)),
                *(restart_record(f"other-{i}", 60, app="spark-app-2") for i in range(6)),
            )
        ),
    ),
    Case(
        "rate-limit-counts-this-round",
        hung_among(5, "e1", "e2"),
        [("e1", "restart", ACTED, None), ("e2", "restart", SUPPRESSED, Suppression.RATE_LIMIT)],
        spec={"safety": {"maxActionsPerApplicationPerHour": 1, "maxConcurrent": 5}},
    ),
    Case(
        "max-concurrent-counts-actions-in-progress",
        [*hung_among(3, "e1"), (pod("e0", terminating=True), None)],
        [("e1", "restart", SUPPRESSED, Suppression.MAX_CONCURRENT)],
        history=History(records=(restart_record("e0", 5),)),
    ),
    Case(
        "an-action-is-done-once-its-pod-is-gone",
        hung_among(3, "e1"),
        [("e1", "restart", ACTED, None)],
        history=History(records=(restart_record("e0", 5),)),
    ),
    Case(
        "dry-run-still-spends-the-budget",
        hung_among(5, "e1", "e2"),
        [
            ("e1", "restart", DRY, Suppression.DRY_RUN),
            ("e2", "restart", SUPPRESSED, Suppression.MAX_CONCURRENT),
        ],
        spec={"safety": {"dryRun": True}},
    ),
    Case(
        "storm-is-reported-before-cooldown-and-rate",
        hung_among(1, "e1", "e2"),
        [
            ("e1", "restart", SUPPRESSED, Suppression.STORM),
            ("e2", "restart", SUPPRESSED, Suppression.STORM),
        ],
        history=History(records=tuple(restart_record("e1", 10 + i) for i in range(6))),
    ),
    Case("unknown-does-nothing", [(pod("e1"), Verdict.UNKNOWN), *fleet(3, start=100)], []),
    Case(
        "decommission-when-configured",
        hung_among(3, "e1"),
        [("e1", "decommission", ACTED, None)],
        spec={"actions": {"producerHung": ["decommission", "alert"]}},
    ),
]


def _summary(decisions: list[Decision]) -> list[tuple[str, str, Outcome, Suppression | None]]:
    return [
        (d.pod.name if d.pod else d.node or "", str(d.operation), d.outcome, d.suppression)
        for d in decisions
        if d.operation is not Operation.ALERT
    ]


def _findings(pods: list[Any]) -> Findings:
    return findings(*pods)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_safety_limits(case: Case) -> None:
    decisions = decide(_findings(case.pods), policy(**case.spec), case.history, NOW)
    assert _summary(decisions) == case.expected
    for decision in decisions:
        if decision.outcome is SUPPRESSED:
            assert decision.limit and decision.reasons  # the Event can name both


def test_longest_unhealthy_pod_goes_first() -> None:
    older = (pod("e-new"), report(HUNG, since=NOW - 60))
    newer = (pod("e-old"), report(HUNG, since=NOW - 600))
    from hangwatch_operator.correlation import correlate
    from hangwatch_operator.sidecar_status import PodReport

    result = correlate(
        [PodReport(p, r) for p, r in (older, newer)] + make_reports(*fleet(3, start=100))
    )
    decisions = decide(result, policy(), History(), NOW)
    assert _summary(decisions) == [
        ("e-old", "restart", ACTED, None),
        ("e-new", "restart", SUPPRESSED, Suppression.MAX_CONCURRENT),
    ]


def test_a_silent_producer_is_alerted_never_restarted_unless_the_policy_says_so() -> None:
    silent = findings((pod("e1"), Verdict.PRODUCER_SILENT), *fleet(3, start=100))
    decisions = decide(silent, policy(), History(), NOW)
    assert [(d.operation, d.outcome) for d in decisions] == [(Operation.ALERT, ACTED)]
    opted_in = policy(actions={"producerSilent": ["restart"]})
    assert _summary(decide(silent, opted_in, History(), NOW)) == [("e1", "restart", ACTED, None)]


def test_alerts_are_never_suppressed() -> None:
    outage = findings((pod("e1", node="a"), CUT), (pod("e2", node="b"), CUT))
    decisions = decide(outage, policy(), History(), NOW)
    assert [(d.operation, d.outcome) for d in decisions] == [(Operation.ALERT, ACTED)] * 2
    stormy = findings(*hung_among(0, "e1", "e2"))
    spec = {"actions": {"producerHung": ["restart", "alert"]}}
    alerts = [
        d for d in decide(stormy, policy(**spec), History(), NOW) if d.operation is Operation.ALERT
    ]
    assert [d.outcome for d in alerts] == [ACTED, ACTED]


def test_gates_name_their_cause() -> None:
    outage = findings((pod("e1", node="a"), CUT), (pod("e2", node="b"), CUT))
    gates = assess_gates(outage, policy(), History(), NOW)
    assert gates.cluster_unreachable is not None and "outage" in gates.cluster_unreachable
    stormy = findings(*hung_among(1, "e1", "e2"))
    storm = assess_gates(stormy, policy(), History(), NOW).storm
    assert storm == (
        "2 of 3 watched pods are unhealthy, more than maxUnhealthyShare 0.5: "
        "a shared cause, not a hang"
    )


NODE_FAULT = [
    (pod("a1", node="node-a"), CUT),
    (pod("a2", node="node-a"), CUT),
    *fleet(3, node="node-b", start=100),
    *fleet(1, node="node-c", start=200),
]
CORDON = {"actions": {"nodeNetworkFault": ["cordonNode", "restart", "alert"]}}


def test_node_fault_cordons_the_node_first_then_limits_restarts() -> None:
    decisions = decide(findings(*NODE_FAULT), policy(**CORDON), History(), NOW)
    assert _summary(decisions) == [
        ("node-a", "cordonNode", ACTED, None),
        ("a1", "restart", SUPPRESSED, Suppression.MAX_CONCURRENT),
        ("a2", "restart", SUPPRESSED, Suppression.MAX_CONCURRENT),
    ]
    cordon = decisions[0]
    assert cordon.verdict is Verdict.NODE_NETWORK_FAULT and "node node-a" in cordon.reasons[0]


def test_a_cordoned_node_is_not_cordoned_again() -> None:
    for history in (
        History(cordoned={"node-a": NOW - 60}),
        History(cordoned_elsewhere=frozenset({"node-a"})),
    ):
        decisions = decide(findings(*NODE_FAULT), policy(**CORDON), history, NOW)
        assert "cordonNode" not in [str(d.operation) for d in decisions]


def test_cordon_is_limited_like_any_disruptive_action() -> None:
    many = [*NODE_FAULT[:2], (pod("a3", node="node-a"), CUT)]
    many += [*fleet(1, node="node-b", start=100), *fleet(1, node="node-c", start=200)]
    # 3 of 5 unhealthy: storm
    decisions = decide(findings(*many), policy(**CORDON), History(), NOW)
    assert _summary(decisions)[0] == ("node-a", "cordonNode", SUPPRESSED, Suppression.STORM)
    dry = {**CORDON, "safety": {"dryRun": True}}
    decisions = decide(findings(*NODE_FAULT), policy(**dry), History(), NOW)
    assert _summary(decisions)[0] == ("node-a", "cordonNode", DRY, Suppression.DRY_RUN)


UNCORDON = {"actions": {"autoUncordon": {"enabled": True, "healthyForSeconds": 900}}}


@pytest.mark.parametrize(
    ("spec", "pods", "fault_ago", "expected"),
    [
        (UNCORDON, fleet(3), 901, [("node-a", "uncordonNode", ACTED, None)]),
        (UNCORDON, fleet(3), 600, []),  # not quiet long enough
        ({"actions": {"autoUncordon": {"enabled": False}}}, fleet(3), 5000, []),  # opted out
        ({}, fleet(3), 901, [("node-a", "uncordonNode", ACTED, None)]),  # on by default
        (UNCORDON, [(pod("e1", node="a"), CUT), (pod("e2", node="b"), CUT)], 5000, []),  # outage
        (
            {**UNCORDON, "safety": {"dryRun": True}},
            fleet(3),
            901,
            [("node-a", "uncordonNode", DRY, Suppression.DRY_RUN)],
        ),
    ],
    ids=["quiet-node", "too-soon", "disabled", "on-by-default", "during-outage", "dry-run"],
)
def test_auto_uncordon(
    spec: dict[str, Any], pods: list[Any], fault_ago: float, expected: list[Any]
) -> None:
    history = History(cordoned={"node-a": NOW - 6000}, node_fault_ts={"node-a": NOW - fault_ago})
    decisions = decide(findings(*pods), policy(**spec), history, NOW)
    assert _summary(decisions) == expected


def test_a_node_still_at_fault_is_not_uncordoned() -> None:
    history = History(cordoned={"node-a": NOW - 6000}, node_fault_ts={"node-a": NOW - 5000})
    decisions = decide(findings(*NODE_FAULT), policy(**UNCORDON), history, NOW)
    assert "uncordonNode" not in [str(d.operation) for d in decisions]


TWO_FAULTS = [
    *NODE_FAULT,
    (pod("d1", node="node-d"), CUT),
    (pod("d2", node="node-d"), CUT),
]
ROOMY = {**CORDON, "safety": {"maxConcurrent": 10, "maxCordonedNodes": 5}}


@pytest.mark.parametrize(
    ("spec", "history", "operator_cap", "expected", "limit"),
    [
        (CORDON, History(), 1, [ACTED, SUPPRESSED], "this policy holds 1 cordoned node(s)"),
        (
            CORDON,
            History(cordoned={"node-x": NOW - 60}),
            5,
            [SUPPRESSED, SUPPRESSED],
            "(safety.maxCordonedNodes 1)",
        ),
        (
            ROOMY,
            History(cordoned_elsewhere=frozenset({"node-x"})),
            1,
            [SUPPRESSED, SUPPRESSED],
            "hangwatch holds 1 cordoned node(s) across all policies "
            "(operator max_cordoned_nodes 1)",
        ),
        (ROOMY, History(), 2, [ACTED, ACTED], None),
        (ROOMY, History(), 1, [ACTED, SUPPRESSED], "across all policies"),
        (ROOMY, History(), 0, [SUPPRESSED, SUPPRESSED], "cordoning is off in this operator"),
        (
            {**ROOMY, "safety": {"maxCordonedNodes": 0}},
            History(),
            5,
            [SUPPRESSED, SUPPRESSED],
            "(safety.maxCordonedNodes 0)",
        ),
    ],
    ids=[
        "policy-cap-one",
        "policy-cap-counts-held-cordons",
        "operator-cap-counts-other-policies",
        "room-for-two",
        "operator-cap-in-this-round",
        "operator-cap-zero",
        "policy-cap-zero",
    ],
)
def test_cordons_are_capped_per_policy_and_across_the_operator(
    spec: dict[str, Any],
    history: History,
    operator_cap: int,
    expected: list[Outcome],
    limit: str | None,
) -> None:
    decisions = decide(
        findings(*TWO_FAULTS), policy(**spec), history, NOW, operator_max_cordoned=operator_cap
    )
    cordons = [d for d in decisions if d.operation is Operation.CORDON_NODE]
    assert [d.node for d in cordons] == ["node-a", "node-d"]
    assert [d.outcome for d in cordons] == expected
    capped = [d for d in cordons if d.outcome is SUPPRESSED]
    if limit is not None:
        assert capped and all(d.suppression is Suppression.MAX_CORDONED for d in capped)
        assert limit in capped[-1].limit
