"""The limits counted across sharded replicas: the pure parts.

Covers `sharding`'s Lease bodies (`lease_body` read back by `read_lease`, a spec
without renewTime or duration is no Lease), the replicas' tallies (`encode_tally`,
`decode_tally`, `summed`) and `live_replicas`; `limits_ledger` (entries written by
`encode` read back by `decode`, those older than an hour and dry runs left out;
`merged` adds the ledger's entries of the policy once, its own replica's too: a
restarted container keeps the name, not the memory; an operation both remembered and
entered counts once; `pending_cordons` undone by a later uncordon);
`decisions.assess_gates` with the other replicas' tallies: a storm no replica sees
alone, and the rate limit of an application counting the restart another replica
entered in the ledger.

`maxConcurrent` across replicas (`limits_ledger.in_progress`, `decide`'s
`busy_elsewhere`): another replica's restart counts while its pod is in the cluster,
not once it is gone nor once it is entered again as failed; a replica's own failed
restart, whose `acted` twin the ledger holds, holds neither its `maxConcurrent` nor
its rate limit. Dry runs in the ledger: entered again each round as one entry (first
record, `seen` moved on), counted in the rate limit and, while fresh, in
`maxConcurrent` of the other replicas, so a dry run is suppressed where the real run
would be.

Verdict counts published per replica (`encode_counts`, `decode_counts`,
`summed_counts`), which the status writer adds up.

Hypothesis: any annotation text (tallies, verdict counts, ledger: anyone allowed to
update Leases can write them) decodes without raising, to counts and records `decide`
can use; for any ledger of other replicas' operations, the operations a round plans
never exceed `maxConcurrent` less the ones in progress elsewhere.
"""

from __future__ import annotations

import dataclasses
import json

from hypothesis import given
from hypothesis import strategies as st

from hangwatch.contracts import Verdict
from hangwatch_operator import limits_ledger
from hangwatch_operator.decisions import Decision, assess_gates, decide
from hangwatch_operator.history import History, remember
from hangwatch_operator.limits_ledger import Entry
from hangwatch_operator.operations import Operation, Outcome, Suppression
from hangwatch_operator.sharding import (
    Lease,
    LeaseKind,
    decode_counts,
    decode_tally,
    encode_counts,
    encode_tally,
    lease_body,
    live_replicas,
    read_lease,
    summed,
    summed_counts,
)
from tests.operator.builders import NOW, findings, fleet, pod, policy
from tests.operator.test_decisions import restart_record

HUNG = Verdict.PRODUCER_HUNG
KEY = "jobs/writers"


def test_a_lease_body_reads_back_as_the_lease_written() -> None:
    body = lease_body("hangwatch-shard-3", LeaseKind.SHARD, "replica-a", NOW + 0.25, 15)
    assert body["metadata"]["labels"] == {"hangwatch.dev/lease": "shard"}
    assert "resourceVersion" not in body["metadata"]  # a create
    lease = read_lease(body)
    assert lease == Lease("replica-a", NOW + 0.25, 15.0)
    replace = lease_body("x", LeaseKind.SHARD, "", NOW, 15, resource_version="42")
    assert replace["metadata"]["resourceVersion"] == "42"
    assert read_lease(replace) == Lease("", NOW, 15.0)  # released: free
    assert read_lease({"spec": {"holderIdentity": "a"}}) is None
    assert read_lease({"spec": {"renewTime": "2026-01-01T00:00:00Z"}}) is None


def test_live_replicas_are_the_ones_whose_own_lease_is_not_expired() -> None:
    members = {"a": Lease("a", NOW - 5, 15.0), "b": Lease("b", NOW - 16, 15.0)}
    assert live_replicas(members, NOW) == {"a"}


def test_tallies_round_trip_and_add_up() -> None:
    mine = {KEY: (40, 3), "other/p": (5, 0)}
    assert decode_tally(encode_tally(mine)) == mine
    assert summed([mine, {KEY: (60, 1)}, {}], KEY) == (100, 4)
    # more unhealthy than judged, negatives, floats, booleans: left out
    bad = json.dumps({"a": [1, 2], "b": [-1, 0], "c": [1.5, 0], "d": [True, 0], "e": "x"})
    assert decode_tally(bad) == {}


@given(st.one_of(st.text(), st.binary().map(lambda b: b.decode("latin-1")), st.none()))
def test_any_tally_text_decodes_to_valid_counts(text: str | None) -> None:
    for judged, unhealthy in decode_tally(text).values():
        assert 0 <= unhealthy <= judged


def test_verdict_counts_round_trip_and_add_up() -> None:
    mine = {KEY: {"healthy": 40, "producer_hung": 1}, "other/p": {"healthy": 5}}
    assert decode_counts(encode_counts(mine)) == mine
    theirs = {KEY: {"healthy": 10, "sidecar_unreachable": 2}}
    assert summed_counts([mine, theirs, {}], KEY) == {
        "healthy": 50,
        "producer_hung": 1,
        "sidecar_unreachable": 2,
    }
    bad = json.dumps({KEY: {"healthy": -1, "x": 1.5, "y": True, "ok": 3}, "p": [1, 2]})
    assert decode_counts(bad) == {KEY: {"ok": 3}}


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)


@given(json_values)
def test_any_verdict_counts_text_decodes_to_counts(raw: object) -> None:
    for counts in decode_counts(json.dumps(raw)).values():
        assert all(type(v) is int and v >= 0 for v in counts.values())


@given(json_values)
def test_any_ledger_text_decodes_to_entered_records(raw: object) -> None:
    for entry in limits_ledger.decode(json.dumps(raw)):
        assert limits_ledger.entered(entry.record)
        assert "/" in entry.policy_key


@given(
    st.lists(
        st.fixed_dictionaries(
            {
                "policy": st.sampled_from([KEY, "jobs/other", "nope"]),
                "replica": st.text(max_size=5),
                "time": st.sampled_from(["2027-01-15T08:00:00Z", "bad", ""]),
                "action": st.sampled_from(["restart", "alert", "cordonNode", "x"]),
                "verdict": st.sampled_from([str(HUNG), "x"]),
                "decision": st.sampled_from(["acted", "failed", "dry_run", "suppressed"]),
                "pod": st.text(max_size=5),
                "seen": st.one_of(st.text(max_size=25), st.integers(), st.none()),
            }
        ),
        max_size=10,
    )
)
def test_ledger_entries_of_any_shape_decode_or_are_left_out(items: list[object]) -> None:
    entries = limits_ledger.decode(json.dumps(items))
    for entry in entries:
        assert entry.record.operation is not Operation.ALERT
        assert entry.record.outcome in {Outcome.ACTED, Outcome.FAILED, Outcome.DRY_RUN}
    elsewhere = frozenset(e.record.pod for e in entries if e.record.pod)
    assert limits_ledger.in_progress(entries, KEY, elsewhere, NOW, 20.0) <= elsewhere


def test_the_ledger_keeps_an_hour_of_carried_out_operations_and_dry_runs() -> None:
    fresh = restart_record("e1", 60)
    old = restart_record("e2", 3601)
    dry = restart_record("e3", 10, outcome=Outcome.DRY_RUN)
    suppressed = restart_record("e4", 10, outcome=Outcome.SUPPRESSED)
    entries = limits_ledger.appended((), KEY, "replica-a", [fresh, old, dry, suppressed])
    assert [e.record for e in entries] == [fresh, old, dry]
    back = limits_ledger.decode(limits_ledger.encode(entries, NOW))
    assert [(e.policy_key, e.replica, e.record.pod) for e in back] == [
        (KEY, "replica-a", "jobs/e3"),
        (KEY, "replica-a", "jobs/e1"),
    ]
    assert back[1].record.time == fresh.time


def test_merged_adds_the_ledgers_entries_of_the_policy_once() -> None:
    ours = restart_record("e1", 60)
    theirs = restart_record("e2", 30)
    entries = (
        Entry(KEY, "b", theirs),
        Entry(KEY, "a", ours),
        Entry("jobs/other", "b", restart_record("e9", 5)),
    )
    once = limits_ledger.merged(History(records=(ours,)), entries, KEY)
    assert once.records == (theirs, ours)
    after = remember(
        once, current=[], reported=[], records=[], election_seen=False, faulty_nodes=(), now=NOW
    )
    assert limits_ledger.merged(after, entries, KEY).records == (theirs, ours)
    # A replica restarted under the same name (its container) remembers nothing: its own
    # entries count again.
    assert limits_ledger.merged(History(), entries, KEY).records == (theirs, ours)


def test_an_operation_remembered_and_entered_counts_once() -> None:
    spec = {"safety": {"maxActionsPerApplicationPerHour": 2}}
    remembered = dataclasses.replace(restart_record("e7", 60), message="restart done")
    entered = (Entry(KEY, "a", restart_record("e7", 60)),)
    history = limits_ledger.merged(History(records=(remembered,)), entered, KEY)
    assert len(history.records) == 2
    found = findings((pod("e1"), HUNG), *fleet(9, start=100))
    restarts = [d for d in decide(found, policy(**spec), history, NOW) if d.operation == "restart"]
    assert [d.outcome for d in restarts] == [Outcome.ACTED]  # e7 counted once: 1 of 2


def test_a_pending_cordon_is_undone_by_a_later_uncordon() -> None:
    def node_record(operation: Operation, ago: float) -> Entry:
        record = restart_record("x", ago)
        return Entry(
            KEY, "b", record.__class__(NOW - ago, operation, HUNG, Outcome.ACTED, node="n1")
        )

    cordon = node_record(Operation.CORDON_NODE, 30)
    assert [c.name for c in limits_ledger.pending_cordons((cordon,), NOW)] == ["n1"]
    uncordon = node_record(Operation.UNCORDON_NODE, 10)
    assert limits_ledger.pending_cordons((uncordon, cordon), NOW) == []
    assert limits_ledger.pending_cordons((node_record(Operation.CORDON_NODE, 500),), NOW) == []


def test_a_storm_no_replica_sees_alone_closes_the_gate_on_each() -> None:
    # This replica judges 10 pods, 1 unhealthy; the others 30 pods, 20 unhealthy: 21 of
    # 40 is above the default share (0.5), though 1 of 10 is not.
    found = findings((pod("e1"), HUNG), *fleet(9, start=100))
    alone = assess_gates(found, policy(), History(), NOW)
    assert alone.storm is None
    shared = assess_gates(found, policy(), History(), NOW, elsewhere=(30, 20))
    assert shared.storm is not None and "21 of 40" in shared.storm


def test_a_restart_another_replica_entered_counts_in_the_rate_limit() -> None:
    spec = {"safety": {"maxActionsPerApplicationPerHour": 1}}
    found = findings((pod("e1"), HUNG), *fleet(9, start=100))
    alone = [d for d in decide(found, policy(**spec), History(), NOW) if d.operation == "restart"]
    assert [d.outcome for d in alone] == [Outcome.ACTED]
    entries = (Entry(KEY, "b", restart_record("e7", 60)),)
    history = limits_ledger.merged(History(), entries, KEY)
    shared = [d for d in decide(found, policy(**spec), history, NOW) if d.operation == "restart"]
    assert [(d.outcome, d.suppression) for d in shared] == [
        (Outcome.SUPPRESSED, Suppression.RATE_LIMIT)
    ]


MAX2 = {"safety": {"maxConcurrent": 2, "maxActionsPerApplicationPerHour": 100}}


def restarts(decisions: list[Decision]) -> list[tuple[str, Outcome, Suppression | None]]:
    return [(d.target, d.outcome, d.suppression) for d in decisions if d.operation == "restart"]


def through_the_lease(entries: tuple[Entry, ...]) -> tuple[Entry, ...]:
    """The entries as another replica reads them (whole seconds, no messages)."""
    return limits_ledger.decode(limits_ledger.encode(entries, NOW))


def test_another_replicas_restart_counts_in_max_concurrent_until_its_pod_is_gone() -> None:
    found = findings((pod("e1"), HUNG), *fleet(9, start=100))
    theirs = through_the_lease((Entry(KEY, "b", restart_record("e50", 4)),))
    # e50 is judged by replica b and still in the cluster (terminating): in progress.
    busy = limits_ledger.in_progress(theirs, KEY, {"jobs/e50", "jobs/e51"}, NOW, 20)
    assert busy == {"jobs/e50"}
    history = limits_ledger.merged(History(), theirs, KEY)
    held = decide(found, policy(), history, NOW, busy_elsewhere=len(busy))
    assert restarts(held) == [("jobs/e1", Outcome.SUPPRESSED, Suppression.MAX_CONCURRENT)]
    assert "1 on other replicas' pods" in held[0].limit
    # Gone from the cluster: no longer in progress, e1 is restarted.
    assert limits_ledger.in_progress(theirs, KEY, {"jobs/e51"}, NOW, 20) == frozenset()
    assert restarts(decide(found, policy(), history, NOW)) == [("jobs/e1", Outcome.ACTED, None)]
    # Another policy's operations are not this policy's.
    assert limits_ledger.in_progress(theirs, "jobs/other", {"jobs/e50"}, NOW, 20) == frozenset()


def test_a_restart_entered_then_failed_is_not_in_progress_anywhere() -> None:
    acted = restart_record("e50", 4.4)  # entered before it was carried out
    failed = dataclasses.replace(acted, outcome=Outcome.FAILED, message="403 Forbidden")
    ledger = limits_ledger.appended((), KEY, "b", [acted])
    ledger = through_the_lease(limits_ledger.appended(ledger, KEY, "b", [failed]))
    assert limits_ledger.in_progress(ledger, KEY, {"jobs/e50"}, NOW, 20) == frozenset()
    # On the replica that failed: its memory says failed (with the fraction of a
    # second), the ledger's twin says acted; neither maxConcurrent nor the rate limit
    # counts it.
    spec = {"safety": {"maxActionsPerApplicationPerHour": 1}}
    history = limits_ledger.merged(History(records=(failed,)), ledger[1:], KEY)
    assert [r.outcome for r in history.records] == [Outcome.FAILED, Outcome.ACTED]
    found = findings((pod("e1"), HUNG), (pod("e50"), HUNG), *fleet(8, start=100))
    decided = restarts(decide(found, policy(**spec), history, NOW))
    assert ("jobs/e1", Outcome.ACTED, None) in decided


def test_a_dry_run_is_entered_once_and_seen_again_each_round() -> None:
    first = restart_record("e3", 20, outcome=Outcome.DRY_RUN)
    again = restart_record("e3", 10, outcome=Outcome.DRY_RUN)
    once = limits_ledger.appended((), KEY, "a", [first])
    twice = through_the_lease(limits_ledger.appended(once, KEY, "a", [again]))
    assert [(e.record.time, e.last_seen) for e in twice] == [(first.time, again.time)]
    history = limits_ledger.merged(History(), twice, KEY)
    assert limits_ledger.merged(history, twice, KEY) == history  # merged once
    busy = limits_ledger.in_progress(twice, KEY, {"jobs/e3"}, NOW, 20)
    assert busy == {"jobs/e3"}  # seen 10 s ago: that replica still would restart it
    assert limits_ledger.in_progress(twice, KEY, {"jobs/e3"}, NOW + 15, 20) == frozenset()
    assert limits_ledger.in_progress(twice, KEY, {"jobs/e3"}, NOW - 11, 20) == frozenset()


def test_a_dry_run_obeys_the_limits_another_replicas_dry_run_spent() -> None:
    dry = {"safety": {"dryRun": True, "maxActionsPerApplicationPerHour": 1}}
    found = findings((pod("e1"), HUNG), *fleet(9, start=100))
    alone = restarts(decide(found, policy(**dry), History(), NOW))
    assert alone == [("jobs/e1", Outcome.DRY_RUN, Suppression.DRY_RUN)]
    theirs = through_the_lease(
        (Entry(KEY, "b", restart_record("e50", 5, outcome=Outcome.DRY_RUN)),)
    )
    history = limits_ledger.merged(History(), theirs, KEY)
    # The rate limit: b would have restarted e50 of the same application.
    assert restarts(decide(found, policy(**dry), history, NOW)) == [
        ("jobs/e1", Outcome.SUPPRESSED, Suppression.RATE_LIMIT)
    ]
    # maxConcurrent: b still would be restarting e50.
    roomy = {"safety": {"dryRun": True, "maxActionsPerApplicationPerHour": 100}}
    busy = limits_ledger.in_progress(theirs, KEY, {"jobs/e50"}, NOW, 20)
    assert restarts(decide(found, policy(**roomy), history, NOW, busy_elsewhere=len(busy))) == [
        ("jobs/e1", Outcome.SUPPRESSED, Suppression.MAX_CONCURRENT)
    ]


OTHER_PODS = [f"jobs/o{i}" for i in range(6)]


@given(
    st.lists(
        st.tuples(
            st.sampled_from(OTHER_PODS),
            st.sampled_from([Outcome.ACTED, Outcome.FAILED, Outcome.DRY_RUN]),
            st.floats(0, 4000),
            st.sampled_from([KEY, "jobs/other"]),
        ),
        max_size=12,
    ),
    st.sets(st.sampled_from(OTHER_PODS)),
    st.integers(1, 4),
    st.integers(0, 6),
)
def test_a_round_never_plans_past_max_concurrent_less_the_others_in_progress(
    written: list[tuple[str, Outcome, float, str]],
    present: set[str],
    cap: int,
    hung: int,
) -> None:
    entries: tuple[Entry, ...] = ()
    for name, outcome, ago, key in written:
        record = restart_record(name.split("/")[1], ago, outcome=outcome)
        entries = limits_ledger.appended(entries, key, "b", [record])
    entries = through_the_lease(entries)
    busy = limits_ledger.in_progress(entries, KEY, present, NOW, 20)
    assert busy <= present
    spec = {"safety": {"maxConcurrent": cap, "maxUnhealthyShare": 1.0}}
    spec["safety"]["maxActionsPerApplicationPerHour"] = 100
    found = findings(*fleet(hung, HUNG, start=1), *fleet(10, start=100))
    history = limits_ledger.merged(History(), entries, KEY)
    decided = decide(found, policy(**spec), history, NOW, busy_elsewhere=len(busy))
    planned = [d for d in decided if d.operation == "restart" and d.outcome is Outcome.ACTED]
    assert len(planned) == min(hung, max(0, cap - len(busy)))
