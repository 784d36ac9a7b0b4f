"""Fixtures of the producer-wrapper tests (opted into with `producer_env`, never autouse).

`producer_env` points HANGWATCH_TELEMETRY_DIR at a fresh directory, clears identity
variables a developer's shell might carry, and afterwards fails the test if any of
the wrapper's threads (`hangwatch-poll-*`, `hangwatch-telemetry-*`,
`hangwatch-callbacks-*`) is still alive: a closed producer leaves nothing behind.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from hangwatch_testing.waiting import wait_for

from .producer_helpers import IDENTITY_ENV, producer_threads


@pytest.fixture
def producer_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The telemetry directory of this test; checks no wrapper thread outlives the test."""
    directory = tmp_path / "telemetry"
    directory.mkdir()
    monkeypatch.setenv("HANGWATCH_TELEMETRY_DIR", str(directory))
    for name in IDENTITY_ENV:
        monkeypatch.delenv(name, raising=False)
    yield directory
    wait_for(lambda: not producer_threads(), 5.0, "wrapper threads to end")
