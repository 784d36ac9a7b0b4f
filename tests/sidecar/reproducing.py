"""Replays of a client whose hang is a race: up to N replays, each on a fresh cluster,
until one reproduces; every replay that did not is held to what a client that went on
must show. Shared by the incident tests whose published hang the client reproduces only
sometimes (sarama 1.37.2 through an election, kafkajs 1.14.0 under refused ports).

`replays` bounds them by time as well as by count: another replay starts only when the
longest one so far still fits in BUDGET_SECONDS since the first began, so a slow host
gets fewer replays instead of pytest-timeout's failure."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator

import pytest

from hangwatch_testing.incidents.model import Incident
from hangwatch_testing.incidents.replay import Replay, replay

BUDGET_SECONDS = 200.0
"""The time a test's replays may take together: pytest-timeout ends a test at 300 s, and
one replay of sarama 1.37.2's election took about 100 s in the cold run of 7da1ef3 (three
took 299 s)."""


def replays(attempts: int, budget_seconds: float = BUDGET_SECONDS) -> Iterator[int]:
    """0, 1, ... up to `attempts` - 1: the loop's body (one replay) runs for each; the first
    always, a later one only when the longest so far fits in what is left of
    `budget_seconds`."""
    started, longest = time.monotonic(), 0.0
    for attempt in range(attempts):
        if attempt and time.monotonic() - started + longest > budget_seconds:
            return
        begun = time.monotonic()
        yield attempt
        longest = max(longest, time.monotonic() - begun)


def replay_until_reproduced(
    incident: Incident,
    attempts: int,
    reproduced: Callable[[Replay], bool],
    went_on: Callable[[Replay], None],
) -> Replay:
    """The first of up to `attempts` replays (`replays`) of `incident` that `reproduced`;
    each one before it is checked with `went_on` (its assertions), and its client is not
    restarted (nothing to fix). Skips when none reproduced: what the test holds hangwatch
    to then is `went_on`, checked on every replay."""
    tried = 0
    for _ in replays(attempts):
        tried += 1
        result = replay(incident, restart_if=reproduced)
        if reproduced(result):
            return result
        went_on(result)
    pytest.skip(f"{incident.id} did not reproduce in {tried} replays: {result.describe()}")
