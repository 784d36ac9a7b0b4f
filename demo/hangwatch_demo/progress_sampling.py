"""The run report's progress: once a second, the events acknowledged so far (the
wrapper's telemetry) or written (the topic's end offsets, for producers without
telemetry), and the producers' first delivery failure after the fault.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

from hangwatch_demo.scenario_run import ScenarioRun, TopicEnd, telemetry_of

log = logging.getLogger(__name__)


SAMPLE_SECONDS = 1.0
"""How often the report's progress (events acknowledged) is sampled."""


PROGRESS_SOURCES = ("acknowledged (producer telemetry)", "written (topic end offsets)")
"""What the report's progress counts: wrapper producers' delivery reports, or (plain
producers, no telemetry) the topic's end offsets."""


class Sampler:
    """Samples, once a second on its own thread, the events acknowledged so far and the
    producers' first delivery failure after the fault, for the report."""

    def __init__(self, run: ScenarioRun) -> None:
        self.run = run
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._loop, name="report-sampler", daemon=True)
        self.failed_before_fault = 0
        self.counts: dict[tuple[Any, ...], tuple[int, int]] = {}
        """Per producer ever seen: its latest (delivered, failed). A task's producer's
        document goes when it closes; what it delivered still counts."""

    def start(self) -> None:
        self.thread.start()

    def stop(self) -> None:
        self.stopped.set()
        if self.thread.is_alive():
            self.thread.join(timeout=10.0)

    def _loop(self) -> None:
        ends = TopicEnd(self.run.setup.lab.bootstrap) if self.run.ends is not None else None
        try:
            while not self.stopped.is_set():
                self._sample(ends)
                self.stopped.wait(SAMPLE_SECONDS)
        except Exception as exc:  # noqa: BLE001 (the report loses its progress, the run goes on)
            log.warning("report sampling stopped", extra={"error": str(exc)})
        finally:
            if ends is not None:
                ends.close()

    def _sample(self, ends: TopicEnd | None) -> None:
        at = time.time()
        if ends is not None:
            self.run.setup.record.progress(at, ends.total())
            return
        docs = telemetry_of(self.run)
        for d in docs:
            i = d.get("identity") or {}
            key = (i.get("executor_id"), i.get("pid"), i.get("producer"), d.get("started_ts"))
            counters = d["counters"]
            self.counts[key] = (int(counters.get("delivered", 0)), int(counters.get("failed", 0)))
        self.run.setup.record.progress(at, sum(delivered for delivered, _ in self.counts.values()))
        failed = sum(failed for _, failed in self.counts.values())
        if not self.run.fault_wall:
            self.failed_before_fault = failed
        elif failed > self.failed_before_fault:
            errors = [d["last_error"] for d in docs if d.get("last_error")]
            latest: dict[str, Any] = max(errors, key=lambda e: e.get("ts") or 0, default={})
            what = f"{latest.get('code', '')}: {latest.get('reason', '')}".strip(": ")
            self.run.setup.record.producer_error(at, f"delivery failed ({what or 'no detail'})")
