"""One bad telemetry file makes that producer `unknown`; the round, /status and /healthz go on.

Covers, with a real lab broker and real flock locks: each hostile document the issue
lists (`"stats": "oops"`, `"topics": 5`, NaN counters, deep nesting, a 250 kB client id)
next to a good producer: the round completes, the bad producer is `unknown` with its
reason, the good one is judged, the problem is counted under its kind; FIFOs named
`producer-x.lock` and `producer-y.json` and a symbolic link are never opened blocking
(the round completes in seconds); property: any JSON value at any field of a producer's
document still lets the round complete, and the /status that follows is within its
size bound and accepted by the operator's reader.
"""

from __future__ import annotations

import fcntl
import math
import os
import shutil
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hangwatch.contracts import Verdict
from hangwatch.wire import status
from hangwatch_lab import Lab
from hangwatch_operator.sidecar_status import parse_status
from hangwatch_sidecar.loop import SidecarLoop
from hangwatch_sidecar.settings import SidecarSettings
from hangwatch_sidecar.state import SidecarState, status_document
from tests.wire.documents import TELEMETRY_PATHS, dumps, json_values, replaced, telemetry


@pytest.fixture(scope="module")
def sidecar() -> Iterator[SidecarLoop]:
    """A sidecar loop on a one-broker lab, watching its own directory."""
    directory = Path(tempfile.mkdtemp(prefix="hangwatch-bad-telemetry-"))
    with Lab(brokers=1, topics={"t": 1}) as lab:
        loop = SidecarLoop(
            SidecarSettings(bootstrap=lab.bootstrap, telemetry_dir=str(directory)).validate()
        )
        try:
            yield loop
        finally:
            loop.close()
            shutil.rmtree(directory)


def _fresh(doc: dict[str, Any]) -> dict[str, Any]:
    """The document as written just now (a live, fresh heartbeat)."""
    now = time.time()
    return {**doc, "ts": now, "last_delivery_ts": now, "started_ts": now - 10}


def round_with(loop: SidecarLoop, files: dict[str, bytes]) -> SidecarState:
    """One round with exactly `files` in the directory, each producer's lock held."""
    directory = loop.settings.telemetry_path
    for old in directory.iterdir():
        old.unlink()
    with ExitStack() as locks:
        for name, data in files.items():
            (directory / name).write_bytes(data)
            lock = locks.enter_context((directory / name.replace(".json", ".lock")).open("wb"))
            fcntl.flock(lock.fileno(), fcntl.LOCK_SH)
        return loop.round()


def assert_served(state: SidecarState) -> None:
    """The /status after the round is bounded and the operator can read it."""
    body = status.encode(status_document(state))
    assert len(body) <= status.MAX_BYTES
    report = parse_status(body, now=time.time(), stale_after_seconds=60)
    assert report.verdict is state.verdict


HOSTILE = {
    "stats-string": (("stats",), "oops", "bad_field"),
    "topics-number": (("topics",), 5, "bad_field"),
    "nan-counter": (("counters", "delivered"), math.nan, "invalid_json"),
    "negative-counter": (("counters", "failed"), -5, "bad_field"),
    "huge-counter": (("counters", "enqueued"), 10**40, "bad_field"),
    "250kB-client-id": (("identity", "client_id"), "c" * 250_000, "bad_field"),
}


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_a_bad_file_makes_that_producer_unknown(sidecar: SidecarLoop, case: str) -> None:
    path, value, kind = HOSTILE[case]
    before = sidecar.producers.telemetry_problems[kind]
    state = round_with(
        sidecar,
        {
            "producer-1-1.json": dumps(replaced(_fresh(telemetry()), path, value)),
            "producer-2-1.json": dumps(_fresh(telemetry())),
        },
    )
    assert state.assessment is not None
    bad, good = (
        state.assessment.producers["producer-1-1"],
        state.assessment.producers["producer-2-1"],
    )
    assert bad.verdict is Verdict.UNKNOWN and bad.reasons and len(bad.reasons[0]) <= 240
    assert good.verdict is Verdict.HEALTHY
    assert sidecar.producers.telemetry_problems[kind] == before + 1
    assert_served(state)


def test_deep_nesting_makes_that_producer_unknown(sidecar: SidecarLoop) -> None:
    deep = b"[" * 200_000 + b"]" * 200_000
    state = round_with(
        sidecar,
        {
            "producer-1-1.json": dumps(_fresh(telemetry()))[:-1] + b',"x":' + deep + b"}",
            "producer-2-1.json": dumps(_fresh(telemetry())),
        },
    )
    assert state.assessment is not None
    assert state.assessment.producers["producer-1-1"].verdict is Verdict.UNKNOWN
    assert state.assessment.producers["producer-2-1"].verdict is Verdict.HEALTHY


def test_fifos_and_links_are_never_opened_blocking(sidecar: SidecarLoop) -> None:
    directory = sidecar.settings.telemetry_path
    for old in directory.iterdir():
        old.unlink()
    (directory / "producer-3-1.json").write_bytes(dumps(_fresh(telemetry())))
    os.mkfifo(directory / "producer-3-1.lock")  # a FIFO where the lock should be
    os.mkfifo(directory / "producer-4-1.json")  # a FIFO where the document should be
    (directory / "producer-5-1.json").symlink_to("/dev/zero")
    done: list[SidecarState] = []
    worker = threading.Thread(target=lambda: done.append(sidecar.round()), daemon=True)
    worker.start()
    worker.join(20)
    assert done, "the round is wedged on a FIFO"
    state = done[0]
    assert state.assessment is not None
    producers = state.assessment.producers
    assert "producer-3-1" in producers  # the document is read; its lock is unknown
    assert producers["producer-4-1"].verdict is Verdict.UNKNOWN
    assert "not a regular file" in producers["producer-4-1"].reasons[0]
    assert producers["producer-5-1"].verdict is Verdict.UNKNOWN


@settings(
    max_examples=60,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(path=st.sampled_from(TELEMETRY_PATHS), value=json_values)
def test_any_value_anywhere_lets_the_round_complete(
    sidecar: SidecarLoop, path: tuple[Any, ...], value: Any
) -> None:
    rounds = sidecar.state().rounds
    state = round_with(
        sidecar,
        {
            "producer-1-1.json": dumps(replaced(_fresh(telemetry()), path, value)),
            "producer-2-1.json": dumps(_fresh(telemetry())),
        },
    )
    assert state.rounds == rounds + 1 and state.assessment is not None
    assert set(state.assessment.producers) == {"producer-1-1", "producer-2-1"}
    assert_served(state)
