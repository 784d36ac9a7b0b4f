"""`tests.sidecar.reproducing.replays`: the racy incident tests' replays bounded by count
and by time. A fake clock that each loop body advances stands in for the replays."""

from __future__ import annotations

import pytest

from tests.sidecar import reproducing


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    now = [1000.0]
    monkeypatch.setattr(reproducing.time, "monotonic", lambda: now[0])
    return now


def _run(clock: list[float], durations: list[float], attempts: int, budget: float) -> list[int]:
    ran = []
    for attempt in reproducing.replays(attempts, budget):
        ran.append(attempt)
        clock[0] += durations[attempt]
    return ran


def test_fast_replays_run_as_many_times_as_asked(clock: list[float]) -> None:
    assert _run(clock, [10.0, 10.0, 10.0], 3, 200.0) == [0, 1, 2]


def test_a_replay_starts_only_when_the_longest_so_far_still_fits(clock: list[float]) -> None:
    # two of 100 s fit; a third would end at 300 s, past the 200
    assert _run(clock, [100.0, 100.0, 100.0], 3, 200.0) == [0, 1]
    assert _run(clock, [101.0, 10.0, 10.0], 3, 200.0) == [0]


def test_the_first_replay_always_runs(clock: list[float]) -> None:
    assert _run(clock, [500.0, 1.0], 2, 200.0) == [0]
    assert _run(clock, [1.0], 1, 0.0) == [0]
    assert _run(clock, [], 0, 200.0) == []
