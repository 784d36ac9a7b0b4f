"""Leaders that move: the sidecar checks its own metadata before it blames a producer.

The sidecar fetches cluster metadata every `metadata_interval_seconds` (30 s by default)
when all looks well, so after a clean leader move (no broker fails, no partition
leaderless) a producer can know the new leaders before the sidecar does. The first round
that sees a producer's leaders disagree with its own fetches metadata again in the next
round, whatever the interval; the producer is never judged on the sidecar's old view.
Mock engine: its leaders move at once when set, with no broker failing.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hangwatch.contracts import Verdict
from hangwatch_demo.harness import workload
from hangwatch_demo.scenarios import PARTITIONS, TOPIC, Timing
from hangwatch_lab import Lab
from hangwatch_sidecar.loop import SidecarLoop
from hangwatch_sidecar.state import SidecarState
from tests.sidecar.lab_loop import fast_loop

ROUNDS_MAX = 30


def _rounds(loop: SidecarLoop, until: Callable[[Any], object], what: str) -> SidecarState:
    for _ in range(ROUNDS_MAX):
        state = loop.round()
        assert state.verdict is not Verdict.METADATA_STALE, state.assessment
        if until(state):
            return state
        time.sleep(0.5)
    raise AssertionError(f"{what} not within {ROUNDS_MAX} rounds: {loop.state().assessment}")


def test_a_producer_that_learns_new_leaders_first_makes_the_sidecar_fetch_again() -> None:
    with (
        Lab(brokers=3, topics={TOPIC: PARTITIONS}, engine="mock") as lab,
        tempfile.TemporaryDirectory() as tmp,
    ):
        telemetry = Path(tmp) / "telemetry"
        telemetry.mkdir()
        with workload(lab.bootstrap, telemetry, Path(tmp) / "wedge", Timing()):
            loop = fast_loop(lab.bootstrap, TOPIC, telemetry, metadata_interval_seconds=600.0)
            try:
                before = _rounds(
                    loop,
                    lambda s: s.producers and len(s.producers[0].leaders) == PARTITIONS,
                    "the producer's leaders in its telemetry",
                )
                assert before.cluster is not None
                old = dict(before.cluster.leaders)
                moved = {tp: old[tp] % 3 + 1 for tp in old if tp[0] == TOPIC}
                for (topic, partition), broker in moved.items():
                    lab.move_leader(topic, partition, broker)
                fetched = loop.metadata.requests
                learned = _rounds(
                    loop,
                    lambda s: all(s.producers[0].leaders.get(tp) == b for tp, b in moved.items()),
                    "the producer learning the new leaders",
                )
                # the sidecar's own view is the old one until it fetches again (600 s away)
                seen = _rounds(
                    loop,
                    lambda s: all(s.cluster.leaders.get(tp) == b for tp, b in moved.items()),
                    "the sidecar fetching the new leaders",
                )
                assert loop.metadata.requests > fetched
                assert seen.rounds - learned.rounds <= 2, (learned.rounds, seen.rounds)
                assert seen.producers[0].disagreeing_seconds == 0.0
            finally:
                loop.close()
