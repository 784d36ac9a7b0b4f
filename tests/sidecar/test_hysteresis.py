"""Hysteresis: a verdict changes only after it has held for N evaluations in a row.

Covers: a single contrary evaluation never flips the verdict; alternating candidates
never take over; N in a row do, and `since` records when; hold=1 switches at once;
verdicts whose evidence already held for a threshold (producer_hung, metadata_stale)
take over at once, and leaving them still needs N evaluations; producer_silent takes
over at once only when its assessment is held (silence past a declared write interval),
other verdicts never because of that flag.
"""

from __future__ import annotations

from hangwatch.contracts import Verdict as V
from hangwatch_sidecar.hysteresis import HELD_BY_THRESHOLD, Debouncer


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


def test_silence_past_a_declared_interval_is_taken_at_once_other_silence_is_not() -> None:
    held = Debouncer(hold=2, current=V.HEALTHY, since=0)
    assert held.update(V.PRODUCER_SILENT, 1, held=True)
    assert not held.update(V.HEALTHY, 2)  # leaving still needs N evaluations
    assert held.current is V.PRODUCER_SILENT
    unheld = Debouncer(hold=2, current=V.HEALTHY, since=0)
    assert not unheld.update(V.PRODUCER_SILENT, 1)
    assert unheld.update(V.PRODUCER_SILENT, 2)


def test_the_held_flag_takes_no_other_verdict_at_once() -> None:
    for verdict in set(V) - {V.HEALTHY, V.PRODUCER_SILENT} - HELD_BY_THRESHOLD:
        d = Debouncer(hold=2, current=V.HEALTHY, since=0)
        assert not d.update(verdict, 1, held=True), verdict
