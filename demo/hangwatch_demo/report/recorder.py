"""Keeps a run's record as it happens: `events.jsonl` in the report directory.

`Recorder.open(DIR, source)` creates DIR, writes the run's header (machine, versions)
and so fails at once, with one line naming DIR, when DIR cannot be written.
`Recorder.off()` records nothing (a run without `--report`). Each scenario records
through its `ScenarioRecorder`; every line is flushed when written, so a run cut
short by Ctrl-C or SIGTERM keeps every scenario it finished. A write that fails later
(disk full, directory removed) stops the recording without stopping the run: `error`
says what failed, and the command reports it after the run's results (exit 3).
Thread-safe: the demo's progress sampler records from its own thread.
"""

from __future__ import annotations

import os
import platform
import threading
import time
from importlib import metadata
from pathlib import Path
from typing import IO

from hangwatch import __version__
from hangwatch.errors import UsageError
from hangwatch_demo.report import records
from hangwatch_demo.report.records import EVENTS_FILE, Record


class ReportDirError(UsageError):
    """The report directory cannot be created or written (exit 3)."""


def cpu_model() -> str:
    """The CPU's model name from /proc/cpuinfo (or what `platform` knows)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def machine() -> records.Machine:
    """This machine: cores, CPU model, physical memory."""
    memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    return records.Machine(cores=os.cpu_count() or 0, cpu=cpu_model()[:2000], memory_bytes=memory)


def _seconds(value: float | None) -> float | None:
    """A duration as the record's range allows it (None stays None)."""
    return None if value is None else min(max(0.0, value), 1e7)


def _installed(distribution: str) -> str:
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return "not installed"


def versions() -> dict[str, str]:
    """hangwatch's, Python's and the clients' and Spark's versions (the Kafka engine is
    each scenario's: `Start.engine`, from its lab)."""
    from confluent_kafka import libversion  # noqa: PLC0415 (the recorder's only client use)

    return {
        "hangwatch": __version__,
        "python": platform.python_version(),
        "confluent-kafka": _installed("confluent-kafka"),
        "librdkafka": libversion()[0],
        "spark (pyspark)": _installed("pyspark"),
    }


class Recorder:
    """Appends a run's records to DIR/events.jsonl (see the module docstring)."""

    def __init__(self, directory: Path | None, file: IO[bytes] | None) -> None:
        self.directory = directory
        self._file = file
        self._lock = threading.Lock()
        self.error: str | None = None
        self.started = time.time()

    @classmethod
    def off(cls) -> Recorder:
        return cls(None, None)

    @classmethod
    def open(cls, directory: Path, source: str, extra: dict[str, str] | None = None) -> Recorder:
        """Create `directory` and start its record; `ReportDirError` if it cannot be written."""
        try:
            directory.mkdir(parents=True, exist_ok=True)
            file = (directory / EVENTS_FILE).open("wb")
        except OSError as exc:
            raise ReportDirError(
                f"--report {directory}: cannot write there ({exc.strerror or exc})"
            ) from None
        except ValueError as exc:  # e.g. an embedded NUL
            raise ReportDirError(f"--report {directory!r}: {exc}") from None
        recorder = cls(directory, file)
        header = records.Run(
            source=source,
            at=recorder.started,
            machine=machine(),
            versions={**versions(), **(extra or {})},
        )
        recorder.write(header)
        if recorder.error:
            error = recorder.error
            recorder.close(interrupted=True)
            raise ReportDirError(error)
        return recorder

    @property
    def on(self) -> bool:
        return self._file is not None

    def write(self, record: Record) -> None:
        with self._lock:
            if self._file is None or self.error is not None:
                return
            try:
                self._file.write(records.encode(record))
                self._file.flush()
            except OSError as exc:
                self.error = f"--report {self.directory}: cannot write {EVENTS_FILE} ({exc})"

    def scenario(
        self,
        name: str,
        *,
        fault: str,
        producer: str,
        engine: str,
        expected: str,
        control: bool,
        bound_seconds: float | None,
        progress_source: str = "",
    ) -> ScenarioRecorder:
        """Start recording scenario `name`."""
        self.write(
            records.Start(
                scenario=name,
                at=time.time(),
                fault=fault,
                producer=producer,
                engine=engine,
                expected=expected,
                control=control,
                bound_seconds=bound_seconds,
                progress_source=progress_source,
            )
        )
        return ScenarioRecorder(self, name)

    def close(self, interrupted: bool = False) -> None:
        """Write the run's end (unless interrupted: the record then simply stops) and close."""
        now = time.time()
        if not interrupted:
            self.write(records.End(at=now, seconds=max(0.0, now - self.started)))
        with self._lock:
            if self._file is not None:
                try:
                    self._file.close()
                except OSError as exc:
                    self.error = self.error or f"--report {self.directory}: {exc}"
                self._file = None


class ScenarioRecorder:
    """One scenario's events; verdicts are given per round and recorded as changes."""

    def __init__(self, recorder: Recorder, name: str) -> None:
        self.recorder = recorder
        self.name = name
        self.verdicts: dict[str, str] = {}
        self.error_seen = False

    def observe(self, at: float, verdicts: dict[str, str]) -> None:
        """This round's verdict per executor: changes and gone executors are recorded."""
        for executor in [e for e in self.verdicts if e not in verdicts]:
            del self.verdicts[executor]
            self.recorder.write(records.Gone(scenario=self.name, at=at, executor=executor))
        for executor, verdict in verdicts.items():
            if self.verdicts.get(executor) != verdict:
                self.verdicts[executor] = verdict
                self.recorder.write(
                    records.VerdictChange(
                        scenario=self.name, at=at, executor=executor, verdict=verdict
                    )
                )

    def fault(self, at: float) -> None:
        self.recorder.write(records.Fault(scenario=self.name, at=at))

    def fault_end(self, at: float, how: str) -> None:
        self.recorder.write(records.FaultEnd(scenario=self.name, at=at, how=how))

    def action(
        self, at: float, operation: str, outcome: str, executor: str | None, why: str = ""
    ) -> None:
        self.recorder.write(
            records.Action(
                scenario=self.name,
                at=at,
                operation=operation,
                outcome=outcome,
                executor=executor,
                why=why[:2000],
            )
        )

    def progress(self, at: float, acknowledged: int) -> None:
        self.recorder.write(
            records.Progress(scenario=self.name, at=at, acknowledged=max(0, acknowledged))
        )

    def producer_error(self, at: float, error: str) -> None:
        """The producer's first error (later ones are not recorded)."""
        if not self.error_seen:
            self.error_seen = True
            self.recorder.write(
                records.ProducerError(scenario=self.name, at=at, error=error[:2000])
            )

    def detected(self, at: float, verdict: str) -> None:
        self.recorder.write(records.Detected(scenario=self.name, at=at, verdict=verdict))

    def flowing(self, at: float) -> None:
        self.recorder.write(records.Flowing(scenario=self.name, at=at))

    def row(
        self,
        *,
        engine: str,
        producer: str,
        verdict: str,
        ok: bool,
        detect_seconds: float | None,
        action: str = "",
        flowing_again_seconds: float | None = None,
        lost: int | None = None,
        duplicates: int | None = None,
        problems: list[str] | None = None,
    ) -> None:
        """The scenario's table row: the scenario is finished."""
        self.recorder.write(
            records.Row(
                scenario=self.name,
                at=time.time(),
                engine=engine,
                producer=producer,
                verdict=verdict,
                ok=ok,
                detect_seconds=_seconds(detect_seconds),
                action=action[:2000],
                flowing_again_seconds=_seconds(flowing_again_seconds),
                lost=lost,
                duplicates=duplicates,
                problems=[p[:2000] for p in (problems or [])[:50]],
            )
        )
