"""Passive-first probing on the lab: kept connections, fresh connects, classification.

A `SidecarLoop` (the sidecar's own code) with no producer in the pod, so every broker is
probed on its kept connection. Covered: over many rounds each broker costs one new
connection and one ApiVersions per round; a broker taken down is `refused` in the same
round (its kept connection closed, a new one refused); a broker that accepts and never
answers (mock RTT) is `unresponsive`, a blackholed one `timeout` (the kept request not
even acknowledged by TCP), told on the kept connection alone: no new connect to the
blackholed broker in that round (a connect would cost the connect timeout on top);
`--probe-mode fresh` connects afresh every round, as before; the loop's close leaves no
kept connection open.
"""

from __future__ import annotations

import tempfile
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from hangwatch.contracts import Reachability
from hangwatch_lab import Lab
from hangwatch_sidecar.loop import SidecarLoop
from tests.sidecar.lab_loop import fast_loop

pytestmark = pytest.mark.xdist_group("lab-timing")


@pytest.fixture
def telemetry() -> Iterator[Path]:
    with tempfile.TemporaryDirectory() as tmp:
        yield Path(tmp)


def _reachability(loop: SidecarLoop, address: str) -> Reachability:
    state = loop.state()
    assert state.cluster is not None
    (broker,) = [b for b in state.cluster.brokers if b.address == address]
    return broker.reachability


def test_kept_connections_cost_one_connect_per_broker(lab: Lab, telemetry: Path) -> None:
    loop = fast_loop(lab.bootstrap, "t", telemetry)
    passive: Counter[str] = Counter()
    try:
        for _ in range(6):
            state = loop.round()
            assert state.cluster is not None
            # a broker that just answered a connection of this process (the lab's own
            # admin client counts: it is not the sidecar's) needs no probe that round
            passive.update(b.address for b in state.cluster.brokers if b.detail)
        counts = loop.state().probe_counts
        assert set(counts.connects.values()) == {1}, counts
        every_round = {a: counts.requests.get(a, 0) + passive[a] for a in counts.connects}
        assert set(every_round.values()) == {6}, (counts, passive)
        assert len(loop.prober.kept) == 3
    finally:
        loop.close()
    assert loop.prober.kept == {}


def test_fresh_mode_connects_every_round(lab: Lab, telemetry: Path) -> None:
    loop = fast_loop(lab.bootstrap, "t", telemetry, probe_mode="fresh")
    try:
        for _ in range(4):
            loop.round()
        assert set(loop.state().probe_counts.connects.values()) == {4}
        assert loop.prober.kept == {}
    finally:
        loop.close()


def test_down_broker_is_refused_in_the_same_round(lab: Lab, telemetry: Path) -> None:
    loop = fast_loop(lab.bootstrap, "t", telemetry)
    try:
        loop.round()
        lab.down(2)
        loop.round()
        assert _reachability(loop, lab.brokers[2].address) is Reachability.REFUSED
        assert _reachability(loop, lab.brokers[1].address) is Reachability.OK
    finally:
        loop.close()


def test_unresponsive_and_blackholed_on_the_kept_connection(
    lab: Lab, telemetry: Path, kernel_faults: None
) -> None:
    loop = fast_loop(lab.bootstrap, "t", telemetry)
    try:
        before = loop.round().probe_counts
        lab.unresponsive(1)
        lab.blackhole(2)
        state = loop.round()
        after = state.probe_counts
        blackholed = lab.brokers[2].address  # classified on the kept connection
        assert after.connects[blackholed] == before.connects[blackholed], (before, after)
        assert after.requests[blackholed] == before.requests[blackholed] + 1, (before, after)
        assert _reachability(loop, lab.brokers[1].address) is Reachability.UNRESPONSIVE
        assert _reachability(loop, lab.brokers[2].address) is Reachability.TIMEOUT
        assert _reachability(loop, lab.brokers[3].address) is Reachability.OK
        (detail,) = [b.detail for b in state.cluster.brokers if b.address == lab.brokers[2].address]  # type: ignore[union-attr]
        assert "not acknowledged by TCP" in detail
    finally:
        loop.close()
