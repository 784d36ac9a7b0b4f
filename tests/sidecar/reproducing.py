"""Replays of a client whose hang is a race: up to N replays, each on a fresh cluster,
until one reproduces; every replay that did not is held to what a client that went on
must show. Shared by the incident tests whose published hang the client reproduces only
sometimes (sarama 1.37.2 through an election, kafkajs 1.14.0 under refused ports)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from hangwatch_testing.incidents.model import Incident
from hangwatch_testing.incidents.replay import Replay, replay


def replay_until_reproduced(
    incident: Incident,
    attempts: int,
    reproduced: Callable[[Replay], bool],
    went_on: Callable[[Replay], None],
) -> Replay:
    """The first of up to `attempts` replays of `incident` that `reproduced`; each one
    before it is checked with `went_on` (its assertions), and its client is not restarted
    (nothing to fix). Skips when none reproduced:
    what the test holds hangwatch to then is `went_on`, checked on every replay."""
    for _ in range(attempts):
        result = replay(incident, restart_if=reproduced)
        if reproduced(result):
            return result
        went_on(result)
    pytest.skip(f"{incident.id} did not reproduce in {attempts} replays: {result.describe()}")
