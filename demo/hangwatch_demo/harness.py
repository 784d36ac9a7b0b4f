"""Runs one scenario end to end: lab, real producer process, real sidecar loop.

`run_scenario` starts a lab (on the scenario's engine, as the demo runs it, unless
told otherwise), a workload process writing through the hangwatch wrapper, and a
`SidecarLoop` (the sidecar's own code, in this process) watching the workload's
telemetry directory. Once the sidecar reports `healthy`, it injects the
scenario's fault and runs sidecar rounds on their normal cadence until the expected
verdict is reported (or, for controls, for the whole watch period), recording every
verdict change with its time since the fault. It also notes when the producer itself
first reported an error, for comparison. Everything is stopped on the way out. Given a
`Recorder` (the detection benchmark's `--report`), it records the run's story as the
demo does: the sidecar's verdicts, the producer's progress and first error, the
fault, the detection and the scenario's row.
"""

from __future__ import annotations

import logging
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hangwatch.child_processes import stop_process
from hangwatch.contracts import Verdict
from hangwatch.errors import UsageError
from hangwatch_demo.report.recorder import Recorder, ScenarioRecorder
from hangwatch_demo.scenarios import PARTITIONS, TOPIC, Context, Scenario, Timing, lab_options
from hangwatch_lab import Lab
from hangwatch_producer.wire.telemetry import to_builtins
from hangwatch_sidecar import telemetry_reader
from hangwatch_sidecar.loop import SidecarLoop
from hangwatch_sidecar.settings import SidecarSettings
from hangwatch_sidecar.state import SidecarState

log = logging.getLogger(__name__)
WARMUP_TIMEOUT_SECONDS = 30.0
BAND = "producer process"
"""The report's one band: the sidecar loop watching the workload process."""


@dataclass
class ScenarioResult:
    """What happened in one scenario run."""

    name: str
    expected: Verdict
    verdict: Verdict
    """The sidecar's (debounced) verdict at the end of the run."""
    detected_seconds: float | None
    """Fault to expected verdict; None if never reached within the watch window (for
    controls: None expected)."""
    bound_seconds: float
    """The scenario's detection bound: a timing reported beside `detected_seconds`
    (benchmarks/detection.py), never a reason for `ok` to be False."""
    changes: list[tuple[float, str]] = field(default_factory=list)
    producer_first_error_seconds: float | None = None
    reasons: list[str] = field(default_factory=list)
    ok: bool = False
    """Controls: no forbidden verdict seen; faults: the expected verdict reached."""
    fault_at: float = 0.0


def dead_endpoints(count: int) -> list[str]:
    """`count` loopback addresses where nothing listens (refused): dead bootstrap entries."""
    found = []
    for _ in range(count):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            found.append(f"127.0.0.1:{s.getsockname()[1]}")
    return found


@contextmanager
def workload(
    bootstrap: str, telemetry_dir: Path, wedge_file: Path, timing: Timing, rate: float = 200.0
) -> Iterator[subprocess.Popen[bytes]]:
    """A producer process writing to the scenario topic; killed if it does not stop."""
    proc = start_workload(bootstrap, telemetry_dir, wedge_file, timing, rate)
    try:
        yield proc
    finally:
        stop_process(proc)


def start_workload(
    bootstrap: str, telemetry_dir: Path, wedge_file: Path, timing: Timing, rate: float = 200.0
) -> subprocess.Popen[bytes]:
    """Start a producer process; it resumes from `telemetry_dir/../checkpoint`."""
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "hangwatch_demo.workload",
            "--bootstrap",
            bootstrap,
            "--topic",
            TOPIC,
            "--rate",
            str(rate),
            "--telemetry-dir",
            str(telemetry_dir),
            "--checkpoint",
            str(telemetry_dir.parent / f"checkpoint-{telemetry_dir.name}"),
            "--wedge-file",
            str(wedge_file),
            "--message-timeout-ms",
            str(timing.producer_message_timeout_ms),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def sidecar_settings(bootstrap: str, telemetry_dir: Path, timing: Timing) -> SidecarSettings:
    return SidecarSettings(
        bootstrap=bootstrap,
        topics=TOPIC,
        port=1,
        telemetry_dir=str(telemetry_dir),
        probe_interval_seconds=timing.probe_interval_seconds,
        metadata_interval_seconds=timing.metadata_interval_seconds,
        connect_timeout_ms=timing.connect_timeout_ms,
        request_timeout_ms=timing.request_timeout_ms,
        stall_seconds=timing.stall_seconds,
        heartbeat_seconds=timing.heartbeat_seconds,
        metadata_max_age_seconds=timing.metadata_max_age_seconds,
        election_grace_seconds=timing.election_grace_seconds,
        hysteresis_intervals=timing.hysteresis_intervals,
    ).validate()


def telemetry_docs(telemetry_dir: Path) -> list[dict[str, Any]]:
    """The usable telemetry documents in `telemetry_dir`, read as the sidecar reads them."""
    reads, _problems = telemetry_reader.scan(telemetry_dir, max_bytes=262144, max_files=64)
    return [to_builtins(r.doc) for r in reads if r.doc is not None]


def _producer_failed(telemetry_dir: Path) -> bool:
    return any(
        doc["counters"].get("failed", 0) > 0 or doc.get("last_error")
        for doc in telemetry_docs(telemetry_dir)
    )


def _wait_producer_error(telemetry: Path, fault_at: float, limit_seconds: float) -> float | None:
    """Seconds from the fault until the producer itself reported an error, if within the limit."""
    while time.monotonic() - fault_at < limit_seconds:
        if _producer_failed(telemetry):
            return round(time.monotonic() - fault_at, 2)
        time.sleep(0.2)
    return None


def rounds(loop: SidecarLoop, interval: float) -> Iterator[SidecarState]:
    """Sidecar rounds on the loop's cadence (start to start), forever."""
    next_start = time.monotonic()
    while True:
        yield loop.round()
        next_start = max(next_start + interval, time.monotonic())
        time.sleep(max(0.0, next_start - time.monotonic()))


def _note(record: ScenarioRecorder, state: SidecarState) -> None:
    """The round's verdict and the producers' acknowledged events, for the report."""
    now = time.time()
    record.observe(now, {BAND: str(state.verdict)})
    record.progress(now, sum(p.delivered_total for p in state.producers))


def until_baseline(
    loop: SidecarLoop, interval: float, baseline: Verdict, record: ScenarioRecorder | None = None
) -> None:
    deadline = time.monotonic() + WARMUP_TIMEOUT_SECONDS
    for state in rounds(loop, interval):
        if record is not None:
            _note(record, state)
        producers_seen = bool(state.producers) and all(
            p.delivered_total > 0 for p in state.producers
        )
        if state.verdict is baseline and producers_seen:
            return
        if time.monotonic() > deadline:
            raise RuntimeError(
                f"no healthy baseline within {WARMUP_TIMEOUT_SECONDS:.0f} s: "
                f"{state.verdict} {state.assessment.pod.reasons if state.assessment else ''}"
            )


def run_scenario(
    scenario: Scenario,
    timing: Timing | None = None,
    progress: Callable[[str], None] = lambda _: None,
    producer_error_wait_seconds: float = 0.0,
    recorder: Recorder | None = None,
    label: str = "",
    engine: str | None = None,
) -> ScenarioResult:
    """Run `scenario` once on `engine` (default: the scenario's own, as the demo runs it)
    and return what the sidecar concluded, and when; recorded as `label` (default: the
    scenario's name) with `recorder`, when given."""
    if scenario.producer == "jvm":
        raise UsageError(
            f"{scenario.name}: Spark's own Kafka sink runs in `hangwatch demo`, not here"
        )
    timing = timing or Timing()
    bound = scenario.bound(timing)
    with (
        Lab(
            brokers=3,
            topics={TOPIC: PARTITIONS},
            engine=engine or scenario.engine,
            **lab_options(scenario),
        ) as lab,
        tempfile.TemporaryDirectory(prefix="hangwatch-scenario-") as tmp,
    ):
        telemetry = Path(tmp) / "telemetry"
        telemetry.mkdir()
        ctx = Context(
            lab=lab,
            wedge_file=Path(tmp) / "wedge",
            dead_bootstrap=dead_endpoints(scenario.dead_bootstrap_entries),
        )
        producer_bootstrap = ",".join([lab.bootstrap, *ctx.dead_bootstrap])
        record = (recorder or Recorder.off()).scenario(
            label or scenario.name,
            fault=scenario.fault,
            producer=PRODUCER,
            engine=lab.engine_description,
            expected=str(scenario.expect),
            control=scenario.control,
            bound_seconds=None if scenario.control else bound,
            progress_source="acknowledged (producer telemetry)",
        )
        with workload(producer_bootstrap, telemetry, ctx.wedge_file, timing):
            loop = SidecarLoop(sidecar_settings(producer_bootstrap, telemetry, timing))
            try:
                progress(f"{scenario.name}: waiting for the baseline ({scenario.baseline})")
                until_baseline(loop, timing.probe_interval_seconds, scenario.baseline, record)
                progress(f"{scenario.name}: injecting fault: {scenario.fault}")
                result = _watch(scenario, timing, bound, loop, ctx, telemetry, progress, record)
                if result.producer_first_error_seconds is None and producer_error_wait_seconds:
                    result.producer_first_error_seconds = _wait_producer_error(
                        telemetry, result.fault_at, producer_error_wait_seconds
                    )
                    if result.producer_first_error_seconds is not None:
                        record.producer_error(time.time(), _producer_error_text(telemetry))
            finally:
                loop.close()
        if scenario.injects:
            record.fault_end(time.time(), "not healed in the run: it ends with the lab")
        record.row(
            engine=lab.engine_description,
            producer=PRODUCER,
            verdict=str(result.verdict),
            ok=result.ok,
            detect_seconds=result.detected_seconds,
            action="none (no operator in this run)",
        )
        return result


PRODUCER = "wrapper"
"""The harness's workload writes through hangwatch's producer wrapper."""


def _producer_error_text(telemetry: Path) -> str:
    """What the producer's telemetry says about its latest error."""
    for doc in telemetry_docs(telemetry):
        error = doc.get("last_error") or {}
        if error:
            return f"{error.get('code', '')}: {error.get('reason', '')}".strip(": ")
    return "delivery failed"


def _watch(
    scenario: Scenario,
    timing: Timing,
    bound: float,
    loop: SidecarLoop,
    ctx: Context,
    telemetry: Path,
    progress: Callable[[str], None],
    record: ScenarioRecorder,
) -> ScenarioResult:
    result = ScenarioResult(scenario.name, scenario.expect, scenario.baseline, None, bound)
    fault_at = result.fault_at = time.monotonic()
    record.fault(time.time())
    scenario.inject(ctx)
    # A fault is watched well past its bound: only no detection at all fails it.
    watch_for = bound if scenario.control else 2 * bound + 10.0
    last = scenario.baseline
    for state in rounds(loop, timing.probe_interval_seconds):
        elapsed = time.monotonic() - fault_at
        _note(record, state)
        if result.producer_first_error_seconds is None and _producer_failed(telemetry):
            result.producer_first_error_seconds = round(elapsed, 2)
            record.producer_error(time.time(), _producer_error_text(telemetry))
        if state.verdict is not last:
            last = state.verdict
            result.changes.append((round(elapsed, 2), str(last)))
            progress(f"{scenario.name}: {elapsed:5.1f} s  verdict {last}")
            if state.assessment:
                result.reasons = list(state.assessment.pod.reasons)
        if not scenario.control and last is scenario.expect:
            result.detected_seconds = round(elapsed, 2)
            record.detected(time.time(), str(last))
            break
        if elapsed > watch_for:
            break
    result.verdict = last
    seen = {Verdict(v) for _, v in result.changes}
    if scenario.control:
        result.ok = not (seen & scenario.forbidden)
    else:
        result.ok = result.detected_seconds is not None
    return result
