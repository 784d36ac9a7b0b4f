"""The telemetry publisher: one producer's telemetry file, refreshed off the poll thread.

The hangwatch sidecar decides whether a producer is hung from this file
(docs/telemetry.md): it must be refreshed once per librdkafka statistics event exactly
while the producer's poll thread serves librdkafka, and writing it must never slow or
block producing. So the poll thread only hands each event's statistics to `on_stats`
(a store and an event set, nothing that waits), and the publisher's own daemon thread,
`hangwatch-telemetry-<n>`, does the rest: it asks the producer for a
`hangwatch_producer.snapshot.Snapshot`, encodes it with the statistics
(`hangwatch_producer.telemetry.encode_document`: detail dropped until it fits
`max_bytes`) and replaces the file atomically (`TelemetryFile`, which also holds the
liveness lock from the first write until `remove`). Every quarter of a second, and once
more when it stops, the thread also runs the producer's `housekeeping` (logging
delivery and client errors, so that never happens on the poll thread either).

The first document (`seq` 1) is written by `publish_now` on the opening thread, so the
file exists as soon as the producer does. A directory that is missing, not a
directory or not writable is one warning per directory and process; producing goes on
(`failures` counts the writes that failed).
"""

from __future__ import annotations

import json
import logging
import os
import socket
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Optional

from hangwatch_producer import telemetry
from hangwatch_producer.secrets import redact
from hangwatch_producer.settings import EffectiveConfig, ProducerSettings
from hangwatch_producer.snapshot import ProducerFacts, Snapshot
from hangwatch_producer.version import __version__
from hangwatch_producer.wire import telemetry as wire

log = logging.getLogger(__name__)

HOUSEKEEPING_INTERVAL_SECONDS = 0.25
"""How often the telemetry thread runs the producer's housekeeping between events."""

SnapshotSource = Callable[[int, Optional[float]], Snapshot]
"""`(seq, stats_received_ts) -> Snapshot`: the producer as it is now."""


def producer_facts(
    config: EffectiveConfig,
    settings: ProducerSettings,
    *,
    pid: int,
    number: int,
    flush_timeout_seconds: float,
    started_ts: float,
    librdkafka: str = "",
) -> ProducerFacts:
    """The fixed parts of producer `number`'s documents: who it is (environment, Spark
    task, process), its redacted configuration, the wrapper's own timeouts and the
    librdkafka release it runs on (`librdkafka`)."""
    identity = telemetry.producer_identity(
        os.environ,
        telemetry.spark_task_identity(),
        pid=pid,
        number=number,
        client_id=str(config.properties["client.id"]),
        hostname=socket.gethostname(),
    )
    wrapper = {
        "version": __version__,
        "flush_timeout_seconds": flush_timeout_seconds,
        "queue_full_timeout_seconds": settings.queue_full_timeout_seconds,
        "callback_drain_timeout_seconds": settings.callback_drain_timeout_seconds,
        "librdkafka": librdkafka,
    }
    return ProducerFacts(
        identity=identity,
        config=telemetry.json_safe_config(redact(config.properties)),
        wrapper=wrapper,
        bootstrap=config.bootstrap,
        started_ts=started_ts,
        interval_seconds=config.statistics_interval_seconds,
    )


def open_file(
    telemetry_dir: str | None, pid: int, number: int, enabled: bool
) -> telemetry.TelemetryFile | None:
    """The telemetry file of producer `number` of process `pid`, None when telemetry is off.

    A relative directory is taken from the working directory now (a Spark standalone
    executor's own work directory), whatever the job does with its cwd later.
    """
    if telemetry_dir is not None:
        return telemetry.TelemetryFile(os.path.abspath(telemetry_dir), wire.file_name(pid, number))
    if enabled:
        telemetry.warn_once(
            "telemetry:<unset>",
            "HANGWATCH_TELEMETRY_DIR is not set: producer telemetry is off, producing continues",
        )
    return None


class TelemetryPublisher:
    """Writes one producer's telemetry document after each statistics event."""

    def __init__(
        self,
        file: telemetry.TelemetryFile | None,
        snapshot: SnapshotSource,
        *,
        max_bytes: int,
        housekeeping: Callable[[], None],
        thread_name: str,
    ) -> None:
        self._file = file
        self._snapshot = snapshot
        self._max_bytes = max_bytes
        self._housekeeping = housekeeping
        self._thread_name = thread_name
        self._seq = 0
        self._stats: tuple[str, float] | None = None
        self._stats_event = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def path(self) -> Path | None:
        """The telemetry file, None when telemetry is off."""
        return self._file.path if self._file else None

    @property
    def failures(self) -> int:
        """How many telemetry writes failed."""
        return self._file.failures if self._file else 0

    def publish_now(self) -> None:
        """Write a document without statistics now, on the calling thread (at open)."""
        self._publish(None)

    def start(self) -> None:
        """Start the telemetry thread."""
        self._thread = threading.Thread(target=self._run, name=self._thread_name, daemon=True)
        self._thread.start()

    def on_stats(self, stats_json: str) -> None:
        """librdkafka's statistics callback (poll thread): keep the latest, wake the thread."""
        self._stats = (stats_json, time.time())
        self._stats_event.set()

    def stop(self, timeout_seconds: float = 5.0) -> None:
        """Stop the thread (waking it now), then remove the file and release the lock."""
        self._stop.set()
        self._stats_event.set()
        if self._thread is not None:
            self._thread.join(timeout_seconds)
        if self._file is not None:
            self._file.remove()

    def _run(self) -> None:
        while not self._stop.is_set():
            if self._stats_event.wait(HOUSEKEEPING_INTERVAL_SECONDS):
                self._stats_event.clear()
                if self._stats is not None and not self._stop.is_set():
                    self._publish(self._stats)
            self._housekeeping()
        self._housekeeping()

    def _publish(self, stats: tuple[str, float] | None) -> None:
        if self._file is None:
            return
        raw: dict[str, Any] | None = None
        if stats is not None:
            try:
                parsed = json.loads(stats[0])
            except ValueError:
                parsed = None
            if isinstance(parsed, dict):
                raw = parsed
            else:
                log.debug("unparsable librdkafka statistics ignored")
        self._seq += 1
        snapshot = self._snapshot(self._seq, None if stats is None else stats[1])
        try:
            data = telemetry.encode_document(snapshot, raw, self._max_bytes)
        except ValueError as exc:
            telemetry.warn_once(f"telemetry-size:{self._file.directory}", str(exc))
            return
        self._file.write(data)
