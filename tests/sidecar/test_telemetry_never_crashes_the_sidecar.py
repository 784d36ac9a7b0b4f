"""Garbage, truncated, huge, stale or foreign telemetry never crashes the sidecar.

Covers: each bad file becomes a per-file problem with a reason (not an exception);
a missing directory is a problem; only the newest `max_files` files are read and the
rest are reported; liveness from the wrapper's flock lock file (held: alive; free:
dead; absent: unknown). Removing a dead producer's files is the producer side's job
(tests/pipeline/test_dead_producers_files.py): the sidecar never writes.
"""

from __future__ import annotations

import fcntl
import json
import os
import time
from pathlib import Path

import pytest

from hangwatch_producer.wire.telemetry import from_builtins
from hangwatch_sidecar.telemetry_reader import lock_state, parse, scan

GOOD = {
    "schema": 1,
    "kind": "hangwatch.producer.telemetry",
    "seq": 3,
    "ts": 1.0,
    "counters": {"enqueued": 1, "delivered": 1, "failed": 0, "in_queue": 0},
}


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        (b"", "not valid JSON"),
        (b'{"schema": 1, "seq": 3, "coun', "not valid JSON"),
        (b"\xff\xfe\x00garbage", "not valid JSON"),
        (b"[1, 2, 3]", "not a JSON object"),
        (json.dumps({**GOOD, "schema": 99}).encode(), "unsupported telemetry schema"),
        (json.dumps({**GOOD, "kind": "something.else"}).encode(), "is not hangwatch"),
        (json.dumps({"schema": 1, "seq": "x", "counters": {}}).encode(), "lacks seq"),
    ],
)
def test_bad_documents_become_reasons(raw: bytes, reason: str) -> None:
    doc, problem = parse(raw)
    assert doc is None and problem is not None and reason in problem


def test_scan_reports_problems_per_file_and_reads_good_ones(tmp_path: Path) -> None:
    (tmp_path / "producer-1-1.json").write_text(json.dumps(GOOD))
    (tmp_path / "producer-2-1.json").write_bytes(b'{"trunc')
    (tmp_path / "producer-3-1.json").write_bytes(b"x" * 5000)
    (tmp_path / "unrelated.txt").write_text("ignored")
    reads, problems = scan(tmp_path, max_bytes=4096, max_files=64)
    by_key = {r.key: r for r in reads}
    assert set(by_key) == {"producer-1-1", "producer-2-1", "producer-3-1"}
    assert by_key["producer-1-1"].doc == from_builtins(GOOD)
    assert by_key["producer-1-1"].problem is None
    assert "not valid JSON" in (by_key["producer-2-1"].problem or "")
    assert "larger than 4096 bytes" in (by_key["producer-3-1"].problem or "")
    assert problems == []


def test_missing_directory_is_a_problem_not_an_exception(tmp_path: Path) -> None:
    reads, problems = scan(tmp_path / "absent", max_bytes=1024, max_files=8)
    assert reads == [] and "does not exist" in problems[0]


def test_only_the_newest_files_are_read(tmp_path: Path) -> None:
    now = time.time()
    for i in range(10):
        path = tmp_path / f"producer-{i}-1.json"
        path.write_text(json.dumps(GOOD))
        os.utime(path, (now - 100 + i, now - 100 + i))
    reads, problems = scan(tmp_path, max_bytes=4096, max_files=4)
    assert [r.key for r in reads] == [f"producer-{i}-1" for i in (9, 8, 7, 6)]
    assert problems == ["6 telemetry files beyond the limit of 4"]


def test_liveness_comes_from_the_lock_file(tmp_path: Path) -> None:
    lock = tmp_path / "producer-5-1.lock"
    assert lock_state(lock) is None
    lock.touch()
    assert lock_state(lock) is False
    with lock.open("rb") as held:
        fcntl.flock(held.fileno(), fcntl.LOCK_SH)
        assert lock_state(lock) is True
    assert lock_state(lock) is False
