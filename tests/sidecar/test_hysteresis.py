"""Hysteresis: a verdict changes only after it has held for N evaluations in a row.

Covers: a single contrary evaluation never flips the verdict; alternating candidates
never take over; N in a row do, and `since` records when; hold=1 switches at once;
verdicts whose evidence already held for a threshold (producer_hung, metadata_stale)
take over at once, and leaving them still needs N evaluations.
"""

from __future__ import annotations

from hangwatch.contracts import Verdict as V
from hangwatch_sidecar.verdicts import Debouncer


def test_single_blip_is_ignored() -> None:
    d = Debouncer(hold=2)
    d.update(V.HEALTHY, 0)
    d.update(V.HEALTHY, 1)
    assert d.current is V.HEALTHY
    assert not d.update(V.BROKER_DEGRADED, 2)
    assert not d.update(V.HEALTHY, 3)
    assert d.current is V.HEALTHY


def test_alternating_candidates_never_take_over() -> None:
    d = Debouncer(hold=2, current=V.HEALTHY, since=0)
    for t, v in enumerate([V.BROKER_DEGRADED, V.CLUSTER_UNREACHABLE] * 5, start=1):
        assert not d.update(v, t)
    assert d.current is V.HEALTHY


def test_holding_for_n_evaluations_switches_and_records_since() -> None:
    d = Debouncer(hold=3, current=V.HEALTHY, since=0)
    assert not d.update(V.BROKER_DEGRADED, 10)
    assert not d.update(V.BROKER_DEGRADED, 11)
    assert d.update(V.BROKER_DEGRADED, 12)
    assert (d.current, d.since) == (V.BROKER_DEGRADED, 12)


def test_hold_one_switches_immediately() -> None:
    d = Debouncer(hold=1)
    assert d.update(V.CLUSTER_UNREACHABLE, 5)
    assert d.current is V.CLUSTER_UNREACHABLE


def test_threshold_held_verdicts_take_over_at_once_and_leave_slowly() -> None:
    d = Debouncer(hold=2, current=V.HEALTHY, since=0)
    assert d.update(V.PRODUCER_HUNG, 1)
    assert not d.update(V.HEALTHY, 2)
    assert d.current is V.PRODUCER_HUNG
    assert d.update(V.HEALTHY, 3)
