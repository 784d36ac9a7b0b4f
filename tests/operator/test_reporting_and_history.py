"""What gets reported, and what is remembered: Events, policy status, history (pure).

Covers: an unchanged decision is reported once and again only after
`renotify_seconds`, a changed one (suppressed -> acted) at once, and a pod that
recovers and breaks again at once; `remember` keeps records newest first for one
hour, the last election and node faults; `seed_history` rebuilds cooldown/rate-limit
records from `status.recentActions` (what a restarted or newly elected replica reads)
and skips junk; Events are valid core/v1 Events (kubernetes-validate) named
`<object>.<suffix>`, with a Hangwatch* reason per outcome and a message naming the
verdict, the limit and the reasons, cut to 1024 characters, Node Events in `default`;
the policy status validates against the CRD's status schema, counts every verdict and
silent sidecars, keeps at most 20 recent actions newest first, never shows a
suppression as lastAction, keeps a condition's lastTransitionTime while unchanged and
says which policy-wide limit holds; an invalid policy gets Ready=False InvalidSpec.
With sharding, the status of the whole fleet (`reporting.Fleet`): the other replicas'
published counts added to the writer's own, their silent sidecars in
SidecarsReachable, and their operations from the limits ledger in `recentActions`
once each, by time, never again once shown and dropped.
"""

from __future__ import annotations

import dataclasses
import functools

import jsonschema
import kubernetes_validate

from hangwatch.contracts import Verdict
from hangwatch_operator.decisions import Decision, assess_gates, decide
from hangwatch_operator.history import ActionRecord, History, newsworthy, remember, seed_history
from hangwatch_operator.operations import Operation, Outcome, Suppression
from hangwatch_operator.reporting import (
    Fleet,
    action_record,
    build_status,
    decision_message,
    event_body,
    event_reason,
    invalid_status,
    involved_object,
    record_entry,
)
from hangwatch_testing.structural import to_json_schema, version_schema
from tests.operator.builders import NOW, findings, fleet, pod, policy

HUNG = Verdict.PRODUCER_HUNG
STATUS_SCHEMA = to_json_schema(version_schema()["properties"]["status"])


def restart(name: str = "e1", outcome: Outcome = Outcome.ACTED, **more: object) -> Decision:
    base = Decision(
        Operation.RESTART, HUNG, outcome, pod=pod(name), node="node-a", reasons=("stuck 75 s",)
    )
    return dataclasses.replace(base, **more)  # type: ignore[arg-type]


def storm_suppressed(name: str = "e1") -> Decision:
    return restart(
        name, Outcome.SUPPRESSED, suppression=Suppression.STORM, limit="3 of 4 unhealthy"
    )


def _after(
    history: History, decisions: list[Decision], now: float, reported: list[Decision]
) -> History:
    return remember(
        history,
        current=decisions,
        reported=reported,
        records=[],
        election_seen=False,
        faulty_nodes=(),
        now=now,
    )


def test_an_unchanged_decision_is_reported_once_then_after_the_repeat_interval() -> None:
    decision = storm_suppressed()
    history = History()
    assert newsworthy([decision], history, NOW, 600) == [decision]
    history = _after(history, [decision], NOW, [decision])
    assert newsworthy([decision], history, NOW + 10, 600) == []
    history = _after(history, [decision], NOW + 10, [])
    assert newsworthy([decision], history, NOW + 599, 600) == []
    assert newsworthy([decision], history, NOW + 600, 600) == [decision]


def test_a_changed_decision_or_a_relapse_is_reported_at_once() -> None:
    first = storm_suppressed()
    history = _after(History(), [first], NOW, [first])
    acted = restart()
    assert newsworthy([acted], history, NOW + 1, 600) == [acted]
    healed = _after(history, [], NOW + 2, [])  # the pod is healthy: nothing current
    assert newsworthy([first], healed, NOW + 3, 600) == [first]


def test_remember_keeps_an_hour_of_records_the_last_election_and_node_faults() -> None:
    old = ActionRecord(NOW - 3700, Operation.RESTART, HUNG, Outcome.ACTED, pod="jobs/old")
    recent = ActionRecord(NOW - 60, Operation.RESTART, HUNG, Outcome.ACTED, pod="jobs/recent")
    new = ActionRecord(NOW, Operation.RESTART, HUNG, Outcome.ACTED, pod="jobs/new")
    history = remember(
        History(records=(recent, old)),
        current=[],
        reported=[],
        records=[new],
        election_seen=True,
        faulty_nodes=["node-a"],
        now=NOW,
    )
    assert [r.pod for r in history.records] == ["jobs/new", "jobs/recent"]
    assert history.last_election_ts == NOW
    assert history.node_fault_ts == {"node-a": NOW}


def test_history_is_rebuilt_from_the_status_a_previous_replica_wrote() -> None:
    decisions = [
        restart("e1"),
        storm_suppressed("e2"),
        restart("e3", Outcome.DRY_RUN, suppression=Suppression.DRY_RUN),
    ]
    entries = [
        record_entry(action_record(d, decision_message(d, "jobs/writers"), NOW - 30))
        for d in decisions
    ]
    junk = [
        {"action": "explode", "time": "2026-01-01T00:00:00Z"},
        {"action": "restart"},
        "nonsense",
    ]
    legacy = {**entries[0], "pod": "e4"}
    del legacy["decision"]
    history = seed_history({"recentActions": [*entries, *junk, legacy]}, "jobs")
    assert [(r.pod, r.outcome, r.suppression) for r in history.records] == [
        ("jobs/e1", Outcome.ACTED, None),
        ("jobs/e2", Outcome.SUPPRESSED, Suppression.STORM),
        ("jobs/e3", Outcome.DRY_RUN, Suppression.DRY_RUN),
        ("jobs/e4", Outcome.ACTED, None),
    ]
    assert (
        history.records[0].time == NOW - 30 and history.records[0].application_id == "spark-app-1"
    )
    again = decide(findings((pod("e1"), HUNG), *fleet(3, start=100)), policy(), history, NOW)
    assert again[0].suppression is Suppression.COOLDOWN  # the cooldown survived the restart


def test_events_are_valid_core_v1_events_that_name_verdict_limit_and_reasons() -> None:
    decision = storm_suppressed()
    kind, reason = event_reason(decision)
    message = decision_message(decision, "jobs/writers")
    body = event_body(
        involved_object(decision, policy()),
        kind=kind,
        reason=reason,
        message=message,
        now=NOW,
        suffix="17f",
    )
    kubernetes_validate.validate(body, "1.29", strict=True)
    assert body["metadata"] == {"name": "e1.17f", "namespace": "jobs"}
    assert body["involvedObject"] == {
        "apiVersion": "v1",
        "kind": "Pod",
        "name": "e1",
        "namespace": "jobs",
        "uid": "uid-e1",
    }
    assert (body["type"], body["reason"]) == ("Warning", "HangwatchSuppressed")
    assert body["message"] == (
        "producer_hung: restart suppressed by storm: 3 of 4 unhealthy. Reasons: stuck 75 s. "
        "Policy jobs/writers."
    )
    long = event_body(
        involved_object(decision, policy()),
        kind=kind,
        reason=reason,
        message="x" * 5000,
        now=NOW,
        suffix="1",
    )
    assert len(long["message"]) == 1024


def test_event_reasons_per_outcome_and_node_events_in_default() -> None:
    cordon = Decision(
        Operation.CORDON_NODE, Verdict.NODE_NETWORK_FAULT, Outcome.ACTED, node="node-a"
    )
    assert event_reason(restart()) == ("Warning", "HangwatchRestart")
    assert event_reason(restart(outcome=Outcome.DRY_RUN))[1] == "HangwatchDryRun"
    assert event_reason(restart(outcome=Outcome.FAILED))[1] == "HangwatchActionFailed"
    assert event_reason(cordon) == ("Warning", "HangwatchCordonNode")
    body = event_body(
        involved_object(cordon, policy()),
        kind="Warning",
        reason="HangwatchCordonNode",
        message="m",
        now=NOW,
        suffix="2",
    )
    assert body["metadata"]["namespace"] == "default" and body["involvedObject"]["kind"] == "Node"
    assert "failed: HTTP 403: forbidden" in decision_message(
        restart(outcome=Outcome.FAILED, note="HTTP 403: forbidden"), "p"
    )


def test_status_counts_verdicts_bounds_recent_actions_and_hides_suppressions_from_last_action() -> (
    None
):
    found = findings((pod("e1"), HUNG), (pod("e2"), HUNG), (pod("e3"), None), *fleet(1, start=100))
    stormy = policy(safety={"maxUnhealthyShare": 0.4})  # 2 of 4 (the silent e3 is not one)
    gates = assess_gates(found, stormy, History(), NOW)
    records = [action_record(storm_suppressed(f"s{i}"), "m", NOW) for i in range(25)]
    previous_last = record_entry(action_record(restart("e0"), "earlier", NOW - 100))
    status = build_status(
        previous={"lastAction": previous_last},
        findings=found,
        gates=gates,
        policy=policy(),
        records=records,
        generation=3,
        now=NOW,
    )
    jsonschema.validate(status, STATUS_SCHEMA)
    assert (status["watched"], status["unhealthy"], status["observedGeneration"]) == (4, 2, 3)
    assert status["verdictCounts"]["producer_hung"] == 2
    assert status["verdictCounts"]["sidecar_unreachable"] == 1
    assert len(status["recentActions"]) == 20 and status["recentActions"][0]["pod"] == "s0"
    assert status["lastAction"] == previous_last
    conditions = {c["type"]: c for c in status["conditions"]}
    assert (
        conditions["ActionsSuppressed"]["status"],
        conditions["ActionsSuppressed"]["reason"],
    ) == ("True", "Storm")
    assert conditions["SidecarsReachable"]["message"] == "no answer from e3"


def test_conditions_keep_their_transition_time_while_unchanged() -> None:
    found = findings(*fleet(3))
    gates = assess_gates(found, policy(), History(), NOW)
    build = functools.partial(build_status, findings=found, gates=gates, records=[])
    first = build(previous=None, policy=policy(), generation=1, now=NOW)
    later = build(previous=first, policy=policy(), generation=1, now=NOW + 60)
    assert later == first
    dry = policy(safety={"dryRun": True})
    flipped = build(previous=first, policy=dry, generation=2, now=NOW + 90)
    times = {c["type"]: c["lastTransitionTime"] for c in flipped["conditions"]}
    assert times["ActionsSuppressed"] != times["Ready"]


def test_invalid_policy_status() -> None:
    status = invalid_status(
        None, "spec.kafka.bootstrapServers needs at least one host:port", 4, NOW
    )
    jsonschema.validate(status, STATUS_SCHEMA)
    (ready,) = status["conditions"]
    assert (ready["status"], ready["reason"]) == ("False", "InvalidSpec")


def test_the_status_describes_the_whole_fleet_of_sharded_replicas() -> None:
    found = findings((pod("e1"), HUNG), (pod("e3"), None), *fleet(2, start=100))
    gates = assess_gates(found, policy(), History(), NOW)
    ours = [action_record(restart("e1"), "restart done", NOW)]
    theirs = [
        dataclasses.replace(
            action_record(restart("e50"), "entered by operator replica b", NOW - 30), time=NOW - 30
        )
    ]
    others = Fleet(
        replicas=2,
        watched=96,
        unhealthy=1,
        counts={"healthy": 90, "producer_hung": 1, "sidecar_unreachable": 5, "bogus": 7},
        records=theirs,
    )
    build = functools.partial(
        build_status, findings=found, gates=gates, policy=policy(), generation=1
    )
    status = build(previous=None, records=ours, now=NOW, fleet=others)
    jsonschema.validate(status, STATUS_SCHEMA)
    assert (status["watched"], status["unhealthy"]) == (100, 2)
    counts = status["verdictCounts"]
    assert (counts["healthy"], counts["producer_hung"], counts["sidecar_unreachable"]) == (
        92,
        2,
        6,
    )
    assert "bogus" not in counts  # only the verdicts there are
    conditions = {c["type"]: c for c in status["conditions"]}
    assert (
        "polling 100 watched pod(s) (4 by this replica, 96 by 2 other replica(s))"
        in (conditions["Ready"]["message"])
    )
    assert conditions["SidecarsReachable"]["status"] == "False"
    assert (
        "5 pod(s) judged by other replicas do not answer"
        in (conditions["SidecarsReachable"]["message"])
    )
    assert [e["pod"] for e in status["recentActions"]] == ["e1", "e50"]  # by time
    # The next round: the other replica's operation is shown already, not again.
    later = build(previous=status, records=[], now=NOW + 10, fleet=others)
    assert [e["pod"] for e in later["recentActions"]] == ["e1", "e50"]
    # Once 20 newer entries pushed it out, it does not come back.
    newer = [action_record(restart(f"n{i}"), "m", NOW + 20 + i) for i in range(20)]
    full = build(previous=later, records=newer, now=NOW + 40, fleet=others)
    again = build(previous=full, records=[], now=NOW + 50, fleet=others)
    assert "e50" not in [e["pod"] for e in again["recentActions"]]
    assert again["recentActions"] == full["recentActions"]
