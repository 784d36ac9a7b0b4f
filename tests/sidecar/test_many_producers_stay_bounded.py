"""Memory stays bounded with many producer processes in one pod.

Covers: with 80 live producers' telemetry files (each held by a real flock, as the
wrapper holds it) and `max_producers` 64, one evaluation round tracks exactly the 64
newest, reports the other 16 as a telemetry problem, and judges the pod normally; the
tracker's memory follows the files (producers whose lock is released are forgotten at
once, and their files are left alone: the sidecar never writes into the directory,
the next producer that opens there removes them).
"""

from __future__ import annotations

import fcntl
import json
import os
import time
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path

import pytest

from hangwatch_sidecar.loop import SidecarLoop
from hangwatch_sidecar.settings import SidecarSettings


def _telemetry(seq: int, wall: float) -> dict[str, object]:
    return {
        "schema": 1,
        "kind": "hangwatch.producer.telemetry",
        "seq": seq,
        "ts": wall,
        "last_delivery_ts": wall,
        "identity": {"pid": 1000 + seq},
        "counters": {
            "enqueued": 5,
            "delivered": 5,
            "failed": 0,
            "in_queue": 0,
            "unacknowledged": 0,
        },
        "topics": ["t"],
    }


@pytest.fixture
def eighty_live_producers(tmp_path: Path) -> Iterator[tuple[Path, ExitStack]]:
    wall = time.time()  # fresh heartbeats: written just now
    with ExitStack() as locks:
        for i in range(80):
            (tmp_path / f"producer-{i}-1.json").write_text(json.dumps(_telemetry(i, wall)))
            os.utime(tmp_path / f"producer-{i}-1.json", (wall - 80 + i, wall - 80 + i))
            lock = locks.enter_context((tmp_path / f"producer-{i}-1.lock").open("wb"))
            fcntl.flock(lock.fileno(), fcntl.LOCK_SH)
        yield tmp_path, locks


def test_only_max_producers_are_tracked_and_the_rest_reported(
    eighty_live_producers: tuple[Path, ExitStack], lab_bootstrap: str
) -> None:
    directory, locks = eighty_live_producers
    loop = SidecarLoop(
        SidecarSettings(
            bootstrap=lab_bootstrap, telemetry_dir=str(directory), max_producers=64
        ).validate()
    )
    try:
        state = loop.round()
        assert len(state.producers) == 64 and len(loop.producers.tracker) == 64
        assert {p.key for p in state.producers} == {f"producer-{i}-1" for i in range(16, 80)}
        assert state.telemetry_problems == {"too_many_producers": 1}
        assert state.assessment is not None and str(state.assessment.pod.verdict) == "healthy"
        locks.close()  # every producer exits: their locks are free
        state = loop.round()  # the 64 newest are seen exited and forgotten at once ...
        assert state.producers == () and len(loop.producers.tracker) == 0
        assert len(list(directory.glob("producer-*.json"))) == 80  # ... and never deleted
        state = loop.round()
        assert state.producers == () and len(loop.producers.tracker) == 0
    finally:
        loop.close()


@pytest.fixture
def lab_bootstrap() -> Iterator[str]:
    from hangwatch_lab import Lab

    with Lab(brokers=1) as lab:
        yield lab.bootstrap
