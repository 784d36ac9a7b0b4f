"""`shrink` returns only once every kept broker's own metadata has dropped the removed ones.

Covers, with `KafkaLab._wait_shrunk` and metadata views given per broker: each broker
learns of a removed broker's fencing from the metadata log in its own time, so one may
still list it after another has dropped it; the wait asks each kept broker itself and
returns only after the last one agrees (not after the first, which a fresh-clone run
caught: the test's client then asked the lagging broker and saw the removed one), and
only once they have agreed for two session timeouts in a row (a removed broker listed
again after both had dropped it failed another fresh-clone run).
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from hangwatch_lab.kafka import KafkaLab
from hangwatch_lab.lab import BrokerState


def test_the_wait_ends_only_after_every_kept_broker_dropped_the_removed_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    lab = KafkaLab(brokers=3, topics={"t": 3})
    lab.brokers = {i: BrokerState(id=i, host="127.0.0.1", port=9000 + i) for i in (1, 2, 3)}
    asked: list[str] = []
    lagging_answers = {"127.0.0.1:9002": 3}  # broker 2 lists broker 3 three more times

    def metadata(bootstrap: str | None = None, timeout: float = 2.0) -> SimpleNamespace:
        assert bootstrap is not None, "each broker is asked on its own"
        asked.append(bootstrap)
        if lagging_answers.get(bootstrap, 0) > 0:
            lagging_answers[bootstrap] -= 1
            return SimpleNamespace(brokers={1: None, 2: None, 3: None})
        return SimpleNamespace(brokers={1: None, 2: None})

    monkeypatch.setattr(lab, "_metadata", metadata)
    _fake_clock(monkeypatch)
    lab._wait_shrunk({1, 2})
    assert lagging_answers["127.0.0.1:9002"] == 0  # waited out every lagging answer
    assert asked[-2:] == ["127.0.0.1:9001", "127.0.0.1:9002"]  # last round: both agreed
    assert "127.0.0.1:9003" not in asked  # the removed broker is never asked


def _fake_clock(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """`time.monotonic` of the faults module advanced only by its `time.sleep`."""
    now = [1000.0]
    clock = "hangwatch_lab.kafka.faults.time"
    monkeypatch.setattr(f"{clock}.monotonic", lambda: now[0])
    monkeypatch.setattr(f"{clock}.sleep", lambda s: now.__setitem__(0, now[0] + s))
    return now


def test_a_removed_broker_listed_again_restarts_the_settle_window(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    lab = KafkaLab(brokers=3, topics={"t": 3})
    lab.brokers = {i: BrokerState(id=i, host="127.0.0.1", port=9000 + i) for i in (1, 2, 3)}
    # per round (both kept brokers asked): agreed, agreed, broker 3 back, then agreed
    rounds = [{1, 2}, {1, 2}, {1, 2, 3}] + [{1, 2}] * 100
    answered: list[float] = []
    now = _fake_clock(monkeypatch)

    def metadata(bootstrap: str | None = None, timeout: float = 2.0) -> SimpleNamespace:
        view = rounds[len(answered) // 2]
        answered.append(now[0])
        return SimpleNamespace(brokers=dict.fromkeys(view))

    monkeypatch.setattr(lab, "_metadata", metadata)
    lab._wait_shrunk({1, 2})
    settle = 2 * lab.settings.session_timeout_ms / 1000
    back_at = answered[5]  # the round that listed broker 3 again
    assert now[0] - back_at >= settle  # the window counted from after it, not from round 1
    assert now[0] - back_at < settle + 1.0
