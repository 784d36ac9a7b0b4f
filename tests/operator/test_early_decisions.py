"""Deciding while the poll goes on, pure: `rolling.RollingRound`, `rounds.early_slice`,
`rounds.after_early` and the partial settling, simulated read by read.

Covers: 10,000 healthy reads (and a pod hung in both rounds) make no plan due; a new
restart-class verdict is due once, and only once every pod on its node has been read
this round and no watched pod is left never read (those are read first, then node by
node); a pod cut off from every broker is left to the round's end. The hostile node
fault: the first pod read on a faulty node says `producer_hung` from a cut-off pod
while its peers still show last round's `healthy`: a plan over that snapshot would
restart it (shown), the rolling round never plans it early, and the end-of-round plan
blames the node instead; nor is it planned early once its node is read through but a
witness node is not (shown too). Hypothesis, over random fleets, previous and current
verdicts, reachability, read orders, `maxConcurrent` and cooldowns (0 included): every
pod acted on early has the effective verdict the end-of-round correlation gives it and
is on no node it blames, no pod is acted on twice in a round, the round never has more
operations in progress than `maxConcurrent`, and the end-of-round plan decides,
reports and carries out nothing on the pods decided early. A partial settling keeps the
other pods' notices, the last election and the node faults. Gates closed by what was
read this round hold early plans; the documented staleness: a gate that a pod not yet
read this round will close is not seen by an early plan, except the unhealthy share,
which is also judged over the pods read this round alone: the start of a shared fault
read on the first node holds early plans although the snapshot's share is diluted. A
pod restarted early counts against `maxConcurrent` until it is gone from the cluster,
then no longer. Dry runs are decided early too (reported once).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from hypothesis import given, settings, target
from hypothesis import strategies as st

from hangwatch.contracts import Verdict
from hangwatch_operator.correlation import correlate
from hangwatch_operator.decisions import Decision
from hangwatch_operator.history import History, Notice
from hangwatch_operator.operations import DISRUPTIVE, Operation, Outcome, Suppression
from hangwatch_operator.policies import Policy
from hangwatch_operator.rolling import RollingRound, restarting_verdicts
from hangwatch_operator.rounds import (
    Plan,
    Settled,
    after_early,
    early_slice,
    plan_round,
    settle_round,
    storm_in_sample,
)
from hangwatch_operator.sidecar_status import PodReport
from hangwatch_operator.watched import WatchedPod
from tests.operator.builders import NOW, pod, policy, report

HUNG = Verdict.PRODUCER_HUNG
CUT = Verdict.CLUSTER_UNREACHABLE
OK = Verdict.HEALTHY
KEY = "jobs/writers"
END = NOW + 8.0
"""The end of the round: the early plans happen at NOW."""


def _read(the_pod: WatchedPod, verdict: Verdict | None, reachable: bool = True) -> PodReport:
    if verdict is None:
        return PodReport(the_pod, error="no answer within 2 s")
    return PodReport(the_pod, report(verdict, reachable=reachable))


@dataclasses.dataclass
class Round:
    """One simulated round: early plans as the reads arrive, then the end-of-round plan."""

    early: list[Settled]
    early_plans: list[Plan]
    final: Plan
    settled: Settled
    dues: int


def _done(decision: Decision) -> Decision:
    return dataclasses.replace(decision, note="done")


def simulate(
    pods: Sequence[WatchedPod],
    previous: dict[str, PodReport],
    current: dict[str, PodReport],
    the_policy: Policy,
    history: History | None = None,
    order: Sequence[str] | None = None,
) -> Round:
    """Read `current` in `order` (default: the rolling round's), plan when due, carry
    out everything planned (each carried out: note "done"), then end the round."""
    history = history or History()
    rolling = RollingRound(pods, previous, restarting_verdicts(the_policy))
    keys = order if order is not None else [p.key for p in rolling.poll_order()]
    early: list[Settled] = []
    plans: list[Plan] = []
    dues = 0
    for key in keys:
        if not rolling.read(current[key]):
            continue
        dues += 1
        due = rolling.take_due()
        if storm_in_sample(rolling.sample(), the_policy) is not None:
            continue  # held for the round's end, as `remediation` holds it
        whole = plan_round(rolling.snapshot(), the_policy, history, NOW, policy_key=KEY)
        part = early_slice(whole, due)
        if not part.decisions:
            continue
        plans.append(part)
        settled = settle_round(part, [_done(d) for d in part.to_carry_out])
        history = settled.history
        early.append(settled)
    assert rolling.complete()
    decided = [d for s in early for d in s.decisions]
    whole = plan_round(rolling.snapshot(), the_policy, history, END, policy_key=KEY)
    final = after_early(whole, decided)
    settled = settle_round(final, [_done(d) for d in final.to_carry_out])
    return Round(early, plans, final, settled, dues)


def _by_key(reports: Sequence[PodReport]) -> dict[str, PodReport]:
    return {r.pod.key: r for r in reports}


def test_ten_thousand_healthy_reads_plan_nothing() -> None:
    pods = [pod(f"exec-{i}", node=f"n{i % 50}") for i in range(10_000)]
    hung = pods[7]
    previous = _by_key([_read(p, HUNG if p is hung else OK) for p in pods])
    rolling = RollingRound(pods, previous, restarting_verdicts(policy()))
    due = [rolling.read(_read(p, HUNG if p is hung else OK)) for p in rolling.poll_order()]
    assert not any(due), "unchanged reports, a pod hung in both rounds included"
    assert rolling.take_due() == frozenset()
    assert rolling.complete()


def test_a_new_hung_verdict_is_due_once_its_whole_node_is_read() -> None:
    a, b, c = (pod(f"e{i}", node="n0") for i in range(3))
    elsewhere = pod("e9", node="n1")
    pods = [a, b, c, elsewhere]
    rolling = RollingRound(
        pods, _by_key([_read(p, OK) for p in pods]), restarting_verdicts(policy())
    )
    assert [p.name for p in rolling.poll_order()] == ["e0", "e1", "e2", "e9"]
    assert not rolling.read(_read(a, HUNG))
    assert not rolling.read(_read(b, OK))
    assert rolling.read(_read(c, OK)), "n0 is read through: a's news is due"
    assert rolling.take_due() == {a.key}
    assert rolling.take_due() == frozenset(), "handed out once"
    assert not rolling.read(_read(elsewhere, OK))
    assert not rolling.read(_read(a, HUNG)), "a second read of a pod in one round is ignored"


def test_no_early_plan_while_a_pod_was_never_read_and_those_are_read_first() -> None:
    old = [pod(f"e{i}", node=f"n{i}") for i in range(3)]
    new = pod("e7", node="n9")
    rolling = RollingRound(
        [*old, new], _by_key([_read(p, OK) for p in old]), restarting_verdicts(policy())
    )
    assert rolling.poll_order()[0] is new
    assert not rolling.read(_read(old[0], HUNG)), "e7 was never read: the share is not known"
    assert "not read yet" in (rolling.snapshot()[3].error or "")
    assert rolling.read(_read(new, OK))
    assert rolling.take_due() == {old[0].key}


def test_a_cut_off_pod_is_left_to_the_rounds_end() -> None:
    a = pod("e0", node="n0")
    rolling = RollingRound([a], {a.key: _read(a, OK)}, restarting_verdicts(policy()))
    assert not rolling.read(_read(a, HUNG, reachable=False))


def test_hostile_node_fault_first_read_hung_peers_still_healthy() -> None:
    """n0's network fails; its first pod read says producer_hung (and reaches no broker)
    while its peers' reports are last round's. A plan over that snapshot restarts it;
    the rolling round does not plan it early and the round's end blames the node."""
    spec = {"actions": {"producerHung": ["restart"], "nodeNetworkFault": ["cordonNode"]}}
    the_policy = policy(**spec)
    faulty = [pod(f"f{i}", node="n0") for i in range(3)]
    witnesses = [pod(f"w{i}", node=f"n{i + 1}") for i in range(4)]
    pods = [*faulty, *witnesses]
    previous = _by_key([_read(p, OK) for p in pods])
    current = _by_key(
        [
            _read(faulty[0], HUNG, reachable=False),
            *(_read(p, CUT) for p in faulty[1:]),
            *(_read(p, OK) for p in witnesses),
        ]
    )
    naive = plan_round(
        [current[faulty[0].key], *(previous[p.key] for p in pods[1:])],
        the_policy,
        History(),
        NOW,
        policy_key=KEY,
    )
    assert [d.target for d in naive.to_carry_out] == ["jobs/f0"], "what acting too soon does"
    order = [p.key for p in pods]  # the hung pod first
    result = simulate(pods, previous, current, the_policy, order=order)
    assert result.early == [] and result.dues == 0
    assert [(d.operation, d.node) for d in result.final.to_carry_out] == [
        (Operation.CORDON_NODE, "n0")
    ]
    assert {f.verdict for f in result.final.findings.pods if f.pod.node == "n0"} == {
        Verdict.NODE_NETWORK_FAULT
    }


def test_a_cut_off_pod_waits_for_the_witnesses_read_this_round() -> None:
    """n0's pods are hung and cut off; of the witness nodes, n1's pod was cut off last
    round and reaches the brokers now. Over n0 read through and n1 as it was, one
    witness node is too few to blame n0, so its pods would be restarted; the round's
    end, with n1 read, blames n0. Cut-off pods are never decided early."""
    faulty = [pod(f"f{i}", node="n0") for i in range(2)]
    recovered = pod("r0", node="n1")
    steady = [pod(f"s{i}", node="n2") for i in range(6)]
    pods = [*faulty, *steady, recovered]
    previous = _by_key(
        [
            *(_read(p, OK) for p in [*faulty, *steady]),
            _read(recovered, OK, reachable=False),
        ]
    )
    current = _by_key(
        [
            *(_read(p, HUNG, reachable=False) for p in faulty),
            *(_read(p, OK) for p in [*steady, recovered]),
        ]
    )
    the_policy = policy(safety={"maxConcurrent": 2})
    early_view = plan_round(
        [*(current[p.key] for p in [*faulty, *steady]), previous[recovered.key]],
        the_policy,
        History(),
        NOW,
        policy_key=KEY,
    )
    assert [d.target for d in early_view.to_carry_out] == ["jobs/f0", "jobs/f1"]
    result = simulate(pods, previous, current, the_policy, order=[p.key for p in pods])
    assert result.early == [] and result.dues == 0
    assert set(result.final.findings.faulty_nodes) == {"n0"}
    assert result.final.to_carry_out == ()


def test_a_hung_pod_is_acted_on_early_once_and_the_round_end_leaves_it() -> None:
    pods = [pod(f"e{i}", node=f"n{i % 3}") for i in range(9)]
    previous = _by_key([_read(p, OK) for p in pods])
    current = {**previous, pods[4].key: _read(pods[4], HUNG)}
    the_policy = policy(
        actions={"producerHung": ["restart", "alert"]},
        safety={"podCooldownSeconds": 0, "maxConcurrent": 2},
    )
    result = simulate(pods, previous, current, the_policy)
    (early,) = result.early
    assert [(d.target, d.operation, d.note) for d in early.decisions] == [
        ("jobs/e4", Operation.RESTART, "done"),
        ("jobs/e4", Operation.ALERT, ""),
    ]
    assert [e.reason for e in early.events] == ["HangwatchRestart", "HangwatchAlert"]
    assert result.final.decisions == () and result.settled.events == ()
    assert result.settled.records == ()
    notified = result.settled.history.notified
    assert {"jobs/e4#restart", "jobs/e4#alert"} <= set(notified), "still current: kept"
    # Without `after_early`, the end-of-round plan would restart e4 again (no cooldown).
    again = plan_round(list(current.values()), the_policy, early.history, END, policy_key=KEY)
    assert [d.target for d in again.to_carry_out] == ["jobs/e4"]


def test_partial_settling_keeps_other_notices_the_election_and_node_faults() -> None:
    pods = [pod(f"e{i}", node=f"n{i}") for i in range(4)]
    previous = _by_key([_read(p, OK) for p in pods])
    history = History(
        notified={"jobs/zz#alert": Notice(("alert", "producer_silent", "acted", ""), NOW - 50)},
        last_election_ts=NOW - 500,
        node_fault_ts={"n7": NOW - 30},
    )
    rolling = RollingRound(pods, previous, restarting_verdicts(policy()))
    for p in rolling.poll_order():
        if rolling.read(_read(p, HUNG if p is pods[1] else OK)):
            break
    part = early_slice(
        plan_round(rolling.snapshot(), policy(), history, NOW, policy_key=KEY), rolling.take_due()
    )
    settled = settle_round(part, [_done(d) for d in part.to_carry_out])
    kept = settled.history
    assert kept.notified["jobs/zz#alert"] == history.notified["jobs/zz#alert"]
    assert "jobs/e1#restart" in kept.notified
    assert kept.last_election_ts == NOW - 500 and kept.node_fault_ts == {"n7": NOW - 30}
    assert [r.pod for r in kept.records] == ["jobs/e1"]


def test_a_gate_closed_by_this_rounds_reads_holds_early_plans() -> None:
    electing, hung = pod("e0", node="n0"), pod("e1", node="n1")
    pods = [electing, hung, pod("e2", node="n2")]
    previous = _by_key([_read(p, OK) for p in pods])
    current = {**previous, electing.key: _read(electing, Verdict.LEADER_ELECTION)}
    current[hung.key] = _read(hung, HUNG)
    result = simulate(pods, previous, current, policy(), order=[p.key for p in pods])
    assert result.dues == 1 and result.early == [], "due, planned, suppressed: nothing early"
    (restart,) = [d for d in result.final.decisions if d.operation is Operation.RESTART]
    assert restart.suppression is Suppression.LEADER_ELECTION


def test_a_shared_fault_read_first_on_one_node_holds_early_plans() -> None:
    """The start of a shared fault: 60 of 100 pods (6 on each node) turn hung at once.
    Once the first node is read, the rolling snapshot (the other 90 pods as last round)
    has an unhealthy share of 6 %, and a plan over it would restart one (shown); the
    pods read this round have 60 %, above `maxUnhealthyShare` (0.5): nothing is acted on
    early, and the round's end closes the gate over every pod."""
    pods = [pod(f"e{n}{i}", node=f"n{n}") for n in range(10) for i in range(10)]
    previous = _by_key([_read(p, OK) for p in pods])
    current = {p.key: _read(p, HUNG if int(p.name[2]) < 6 else OK) for p in pods}
    the_policy = policy()

    rolling = RollingRound(pods, previous, restarting_verdicts(the_policy))
    for p in pods[:10]:
        rolling.read(current[p.key])
    assert rolling.take_due() and storm_in_sample(rolling.sample(), the_policy) is not None
    diluted = plan_round(rolling.snapshot(), the_policy, History(), NOW, policy_key=KEY)
    assert any(d.operation is Operation.RESTART for d in diluted.to_carry_out)

    result = simulate(pods, previous, current, the_policy, order=[p.key for p in pods])
    assert result.dues >= 1 and result.early == []
    restarts = [d for d in result.final.decisions if d.operation is Operation.RESTART]
    assert restarts and all(d.suppression is Suppression.STORM for d in restarts)


def test_a_gate_closed_by_a_pod_not_read_yet_is_seen_at_the_rounds_end_only() -> None:
    """The documented staleness: an early plan sees pods not yet read this round as
    they were last round."""
    electing, hung = pod("e0", node="n0"), pod("e1", node="n1")
    pods = [electing, hung, pod("e2", node="n2")]
    previous = _by_key([_read(p, OK) for p in pods])
    current = {**previous, electing.key: _read(electing, Verdict.LEADER_ELECTION)}
    current[hung.key] = _read(hung, HUNG)
    order = [hung.key, pods[2].key, electing.key]
    result = simulate(pods, previous, current, policy(), order=order)
    (early,) = result.early
    assert [d.target for d in early.decisions] == ["jobs/e1"]


def test_a_pod_restarted_early_counts_in_progress_until_it_is_gone() -> None:
    """maxConcurrent 1: e0 is restarted early; e3's news later in the same round waits
    while e0 is still in the cluster, and is acted on early once e0 is gone."""
    pods = [pod(f"e{i}", node=f"n{i}") for i in range(6)]
    previous = _by_key([_read(p, OK) for p in pods])
    the_policy = policy()
    for gone, expected in ((frozenset(), []), (frozenset({"jobs/e0"}), ["jobs/e3"])):
        history = History()
        rolling = RollingRound(pods, previous, restarting_verdicts(the_policy))
        acted = []
        for p in rolling.poll_order():
            if not rolling.read(_read(p, HUNG if p.name in {"e0", "e3"} else OK)):
                continue
            due = rolling.take_due()
            after = gone if acted else frozenset()
            whole = plan_round(rolling.snapshot(after), the_policy, history, NOW, policy_key=KEY)
            part = early_slice(whole, due)
            settled = settle_round(part, [_done(d) for d in part.to_carry_out])
            history = settled.history
            acted += [d.target for d in part.to_carry_out]
        assert acted == ["jobs/e0", *expected]


def test_a_dry_run_is_decided_early_and_reported_once() -> None:
    pods = [pod(f"e{i}", node=f"n{i}") for i in range(3)]
    previous = _by_key([_read(p, OK) for p in pods])
    current = {**previous, pods[0].key: _read(pods[0], HUNG)}
    result = simulate(pods, previous, current, policy(safety={"dryRun": True}))
    (early,) = result.early
    assert [(d.target, d.outcome) for d in early.decisions] == [("jobs/e0", Outcome.DRY_RUN)]
    assert early.events and result.settled.events == ()


_VERDICTS = st.sampled_from(
    [*[OK] * 8, HUNG, HUNG, Verdict.METADATA_STALE, CUT, Verdict.LEADER_ELECTION, None]
)


@st.composite
def _fleets(
    draw: st.DrawFn,
) -> tuple[list[WatchedPod], dict[str, PodReport], dict[str, PodReport], list[str], Policy]:
    nodes = draw(st.integers(1, 5))
    pods = [
        pod(f"e{n}-{i}", node=f"n{n}", app=f"app-{i % 2}")
        for n in range(nodes)
        for i in range(draw(st.integers(1, 4)))
    ]
    previous: dict[str, PodReport] = {}
    current: dict[str, PodReport] = {}
    faulty = draw(st.sets(st.sampled_from([f"n{n}" for n in range(nodes)]), max_size=2))
    for p in pods:
        if draw(st.integers(0, 19)) > 0:  # now and then a pod new since last round
            verdict = draw(_VERDICTS)
            reachable = verdict is not CUT and draw(st.integers(0, 3)) > 0
            previous[p.key] = _read(p, verdict, reachable=reachable)
        if p.node in faulty:
            current[p.key] = _read(p, draw(st.sampled_from([HUNG, CUT])), reachable=False)
        else:
            verdict = draw(_VERDICTS)
            reachable = verdict is not CUT and draw(st.integers(0, 9)) > 0
            current[p.key] = _read(p, verdict, reachable=reachable)
    order = draw(st.permutations([p.key for p in pods]))
    the_policy = policy(
        actions={
            "producerHung": draw(
                st.sampled_from([["restart"], ["restart", "alert"], ["decommission"]])
            ),
            "nodeNetworkFault": ["cordonNode", "alert"],
        },
        safety={
            "maxConcurrent": draw(st.integers(1, 4)),
            "podCooldownSeconds": draw(st.sampled_from([0, 600])),
            "maxUnhealthyShare": draw(st.sampled_from([0.3, 0.5, 1.0])),
            "dryRun": draw(st.booleans()),
        },
    )
    return pods, previous, current, list(order), the_policy


@settings(max_examples=300)
@given(_fleets())
def test_early_decisions_agree_with_the_rounds_end_and_never_act_twice(
    fleet: tuple[list[WatchedPod], dict[str, PodReport], dict[str, PodReport], list[str], Policy],
) -> None:
    pods, previous, current, order, the_policy = fleet
    result = simulate(pods, previous, current, the_policy, order=order)
    fresh = correlate(
        list(current.values()), node_fault_min_pods=the_policy.safety.node_fault_min_pods
    )
    effective = {f.pod.key: f.verdict for f in fresh.pods}
    early_pods: list[str] = []
    for part in result.early_plans:
        seen = {f.pod.key: f.verdict for f in part.findings.pods}
        for decision in part.decisions:
            assert decision.pod is not None
            assert decision.operation is not Operation.CORDON_NODE
            key = decision.pod.key
            assert seen[key] == effective[key], "early correlation = the round end's"
            assert decision.pod.node not in fresh.faulty_nodes
            if decision.operation in DISRUPTIVE and decision.outcome is Outcome.ACTED:
                early_pods.append(key)
    late = [d.pod.key for d in result.final.decisions if d.pod is not None]
    assert not set(late) & {d.pod.key for s in result.early for d in s.decisions if d.pod}
    late_acted = [
        d.target for d in result.final.to_carry_out if d.operation in DISRUPTIVE and d.pod
    ]
    acted = [*early_pods, *late_acted]
    assert len(acted) == len(set(acted)), "no pod acted on twice in a round"
    cordons = [d for d in result.final.to_carry_out if d.operation is Operation.CORDON_NODE]
    assert len(acted) + len(cordons) <= the_policy.safety.max_concurrent
    if the_policy.safety.dry_run:
        assert acted == []
    target(float(len(early_pods)), label="pods acted on early")
