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

Hypothesis: any annotation text (tallies, ledger: anyone allowed to update Leases can
write them) decodes without raising, to counts and records `decide` can use.
"""

from __future__ import annotations

import dataclasses
import json

from hypothesis import given
from hypothesis import strategies as st

from hangwatch.contracts import Verdict
from hangwatch_operator import limits_ledger
from hangwatch_operator.decisions import assess_gates, decide
from hangwatch_operator.history import History, remember
from hangwatch_operator.limits_ledger import Entry
from hangwatch_operator.operations import Operation, Outcome, Suppression
from hangwatch_operator.sharding import (
    Lease,
    LeaseKind,
    decode_tally,
    encode_tally,
    lease_body,
    live_replicas,
    read_lease,
    summed,
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


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)


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
            }
        ),
        max_size=10,
    )
)
def test_ledger_entries_of_any_shape_decode_or_are_left_out(items: list[object]) -> None:
    for entry in limits_ledger.decode(json.dumps(items)):
        assert entry.record.operation is not Operation.ALERT
        assert entry.record.outcome in {Outcome.ACTED, Outcome.FAILED}


def test_the_ledger_keeps_an_hour_of_carried_out_operations() -> None:
    fresh = restart_record("e1", 60)
    old = restart_record("e2", 3601)
    dry = restart_record("e3", 10, outcome=Outcome.DRY_RUN)
    entries = limits_ledger.appended((), KEY, "replica-a", [fresh, old, dry])
    assert [e.record for e in entries] == [fresh, old]  # a dry run is not entered
    back = limits_ledger.decode(limits_ledger.encode(entries, NOW))
    assert [(e.policy_key, e.replica, e.record.pod) for e in back] == [
        (KEY, "replica-a", "jobs/e1")
    ]
    assert back[0].record.time == fresh.time


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
