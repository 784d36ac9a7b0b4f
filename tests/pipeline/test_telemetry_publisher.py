"""The telemetry publisher on its own: snapshot -> encode -> atomic write, off the poll thread.

Covered, with real files and threads and no Kafka (statistics shaped like librdkafka's):
- `publish_now` writes document 1 at once with the liveness lock held; each
  statistics event handed to `on_stats` is written by the publisher's thread with
  the trimmed statistics and the time they arrived; `stop` ends the thread, removes
  the file and the lock; housekeeping runs while it lives and once more at stop;
- statistics that are not a JSON object never stop the heartbeat: the document is
  still written, without statistics;
- `on_stats` never waits, even while the thread is stuck building a document, and
  events that arrive meanwhile collapse into the latest;
- a directory that cannot be written is counted (`failures`), warned about once,
  and stopping still works; with telemetry off nothing is written and housekeeping
  still runs.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from hangwatch_producer import telemetry, telemetry_files
from hangwatch_producer.publisher import TelemetryPublisher, open_file
from hangwatch_producer.snapshot import Snapshot
from hangwatch_testing.waiting import wait_for

from .producer_helpers import doc_where, read_doc
from .test_telemetry_document import SNAPSHOT, raw_stats

NAME = "hangwatch-telemetry-unit"


def snapshots(seq: int, stats_received_ts: float | None) -> Snapshot:
    return replace(SNAPSHOT, seq=seq, stats_received_ts=stats_received_ts)


def stats_json(ts: int) -> str:
    return json.dumps({**raw_stats(), "ts": ts})


class Publishers:
    """Makes publishers for one test and stops every one afterwards."""

    def __init__(self) -> None:
        self.made: list[TelemetryPublisher] = []
        self.housekeeping = 0

    def tick(self) -> None:
        self.housekeeping += 1

    def __call__(
        self,
        file: telemetry.TelemetryFile | None,
        source: Callable[[int, float | None], Snapshot] = snapshots,
    ) -> TelemetryPublisher:
        publisher = TelemetryPublisher(
            file, source, max_bytes=65_536, housekeeping=self.tick, thread_name=NAME
        )
        self.made.append(publisher)
        return publisher


@pytest.fixture
def publishers() -> Iterator[Publishers]:
    made = Publishers()
    yield made
    for publisher in made.made:
        publisher.stop()
    wait_for(lambda: NAME not in {t.name for t in threading.enumerate()}, 30, "threads to end")


def test_documents_follow_statistics_events(tmp_path: Path, publishers: Publishers) -> None:
    file = open_file(str(tmp_path), pid=4242, number=7, enabled=True)
    assert file is not None and file.path == tmp_path / "producer-4242-7.json"
    publisher = publishers(file)
    publisher.publish_now()
    first = read_doc(file.path)
    assert (first["seq"], first["stats"], first["stats_received_ts"]) == (1, None, None)
    assert telemetry_files.lock_state(file.lock_path) is True
    publisher.start()
    publisher.on_stats(stats_json(5_000_000))
    doc = doc_where(file.path, lambda d: d["seq"] == 2, 30)
    assert doc["stats"]["ts"] == 5_000_000 and doc["detail"] == "full"
    assert doc["stats_received_ts"] is not None and doc["stats_received_ts"] >= first["ts"] - 1
    assert "int_latency" not in json.dumps(doc["stats"])  # trimmed by the document builder
    wait_for(lambda: publishers.housekeeping >= 1, 30, "housekeeping while running")
    ticks = publishers.housekeeping
    publisher.stop()
    assert publishers.housekeeping > ticks
    assert not list(tmp_path.iterdir()), "file, temporary file and lock removed"


@pytest.mark.parametrize("bad", ["not json", "[1, 2]", "null", "{"])
def test_unusable_statistics_keep_the_heartbeat(
    tmp_path: Path, publishers: Publishers, bad: str
) -> None:
    file = open_file(str(tmp_path), pid=1, number=1, enabled=True)
    assert file is not None
    publisher = publishers(file)
    publisher.publish_now()
    publisher.start()
    for expected in (2, 3):
        publisher.on_stats(bad)
        doc = doc_where(file.path, lambda d, n=expected: d["seq"] == n, 30)
        assert doc["stats"] is None and doc["stats_received_ts"] is not None


def test_on_stats_never_waits_for_a_stuck_writer(tmp_path: Path, publishers: Publishers) -> None:
    building, release = threading.Event(), threading.Event()

    def stuck_after_the_first(seq: int, stats_received_ts: float | None) -> Snapshot:
        if seq == 2:
            building.set()
            release.wait(120)  # longer than every wait below: only set() ends it
        return snapshots(seq, stats_received_ts)

    file = open_file(str(tmp_path), pid=1, number=2, enabled=True)
    assert file is not None
    publisher = publishers(file, stuck_after_the_first)
    publisher.publish_now()
    publisher.start()
    try:
        publisher.on_stats(stats_json(1))
        assert building.wait(30)
        poll_thread = threading.Thread(
            target=lambda: [publisher.on_stats(stats_json(ts)) for ts in range(2, 102)]
        )
        poll_thread.start()
        poll_thread.join(30)
        assert not poll_thread.is_alive(), "on_stats waited for the telemetry thread"
        assert read_doc(file.path)["seq"] == 1
    finally:
        release.set()
    doc = doc_where(file.path, lambda d: d["seq"] == 3, 30)
    assert doc["stats"]["ts"] == 101  # the events that came meanwhile: only the latest


def test_unwritable_directory_counts_failures_and_stops_cleanly(
    tmp_path: Path, publishers: Publishers, caplog: pytest.LogCaptureFixture
) -> None:
    file = open_file(str(tmp_path / "missing" / "telemetry"), pid=1, number=3, enabled=True)
    assert file is not None
    publisher = publishers(file)
    publisher.publish_now()
    publisher.start()
    publisher.on_stats(stats_json(1))
    wait_for(lambda: publisher.failures == 2, 30, "the second failed write")
    warnings = [r for r in caplog.records if r.name == "hangwatch_producer.telemetry"]
    assert [r.getMessage() for r in warnings] == [
        "cannot write producer telemetry; producing continues without it"
    ]
    publisher.stop()
    assert not (tmp_path / "missing").exists()


def test_telemetry_off_writes_nothing_and_keeps_housekeeping(
    tmp_path: Path, publishers: Publishers
) -> None:
    publisher = publishers(None)
    publisher.publish_now()
    publisher.start()
    publisher.on_stats(stats_json(1))
    wait_for(lambda: publishers.housekeeping >= 2, 30, "housekeeping without telemetry")
    assert publisher.path is None and publisher.failures == 0
    publisher.stop()
    assert not list(tmp_path.iterdir())
