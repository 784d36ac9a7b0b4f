"""Who cleans a dead producer's telemetry: the next producer that opens in the directory.

Covers: `telemetry_files.remove_dead_producers` removes the document, temp file and lock
of producers whose lock nobody holds, and never a live producer's files (lock held), a
document without a lock (liveness unknown), or other files; against the real lab, a
producer process that dies without closing leaves its files, and the next producer to
open in the directory removes them (and says so once), so the sidecar - whose mount is
read-only - never has to.
"""

from __future__ import annotations

import fcntl
import logging
from pathlib import Path

import pytest

from hangwatch_lab import Lab
from hangwatch_pipeline import producer
from hangwatch_producer.telemetry_files import remove_dead_producers

from .producer_helpers import FAST, crashed_producer


def test_only_dead_producers_files_are_removed(tmp_path: Path) -> None:
    for name in (
        "producer-5-1.json", "producer-5-1.lock", ".producer-5-1.json.tmp",
        "producer-6-1.json", "producer-6-1.lock", "producer-7-1.json", "unrelated.txt",
    ):  # fmt: skip
        (tmp_path / name).write_text("{}")
    with (tmp_path / "producer-6-1.lock").open("rb") as live:
        fcntl.flock(live.fileno(), fcntl.LOCK_SH)
        assert remove_dead_producers(tmp_path) == ["producer-5-1"]
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "producer-6-1.json", "producer-6-1.lock", "producer-7-1.json", "unrelated.txt",
    ]  # fmt: skip


@pytest.mark.usefixtures("producer_env")
def test_the_next_producer_removes_a_crashed_ones_files(
    lab: Lab, producer_env: Path, caplog: pytest.LogCaptureFixture
) -> None:
    _run, crashed = crashed_producer(lab.bootstrap)
    assert crashed.exists() and crashed.with_suffix(".lock").exists()
    with caplog.at_level(logging.INFO), producer({"bootstrap.servers": lab.bootstrap}, FAST) as p:
        assert p.telemetry_path is not None and p.telemetry_path.exists()
        assert not crashed.exists() and not crashed.with_suffix(".lock").exists()
    removed = [r for r in caplog.records if r.getMessage().startswith("removed the telemetry")]
    assert len(removed) == 1 and removed[0].producers == [crashed.stem]  # type: ignore[attr-defined]
