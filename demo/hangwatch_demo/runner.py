"""`hangwatch demo`'s engine: replay a scenario, let the operator's code decide, heal, count.

For each scenario: a fresh lab and a producer process (the at-least-once workload,
standing for one Spark executor), the sidecar's evaluation loop watching it, and the
operator's decision code run locally on the sidecar's `/status` (see
`local_operator`). After the fault, every sidecar round goes through the operator:
`restart` replaces the producer process (SIGTERM, then SIGKILL after a grace period,
as the kubelet does; a new process resumes from the acknowledged prefix, as Spark
retries a lost executor's tasks). When nothing is to be restarted, the fault is
healed after the watch period. The row records the verdict, time to detect, the
action (or why none), time until events flowed again, and lost/duplicated events
read back from the topic.

Emulation notes: the lab injects faults in the cluster, so two of them need help to
behave like the client bugs they stand for: S1's refusals are cleared when the
producer restarts (in the incident the sticky error lived in the client), and S4's
wedge trigger is removed (the blocked code was in the old process).
"""

from __future__ import annotations

import json
import logging
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from hangwatch.contracts import Verdict
from hangwatch_demo import readback
from hangwatch_demo.harness import (
    dead_endpoints,
    rounds,
    sidecar_settings,
    start_workload,
    stop_workload,
    telemetry_docs,
    until_baseline,
)
from hangwatch_demo.local_operator import LocalOperator, executor_pod
from hangwatch_demo.scenarios import PARTITIONS, TOPIC, Context, Scenario, Timing
from hangwatch_demo.workload import read_checkpoint
from hangwatch_lab import Lab
from hangwatch_operator.history import Operation, Outcome
from hangwatch_sidecar.loop import SidecarLoop
from hangwatch_sidecar.state import status_document

log = logging.getLogger(__name__)
RESTART_GRACE_SECONDS = 2.0
RECOVERY_TIMEOUT_SECONDS = 30.0


@dataclass
class DemoRow:
    """One line of the demo's table (and one object of its JSON)."""

    scenario: str
    seed: str
    fault: str
    expected: str
    verdict: str
    detect_seconds: float | None
    action: str
    progress_again_seconds: float | None
    events: int
    lost: int
    duplicates: int
    ok: bool
    reasons: list[str] = field(default_factory=list)
    changes: list[tuple[float, str]] = field(default_factory=list)


@dataclass
class _Run:
    scenario: Scenario
    timing: Timing
    lab: Lab
    work: Path
    progress: Callable[[str], None]
    dead: list[str] = field(default_factory=list)
    """Dead bootstrap entries the producer is configured with (S1)."""
    number: int = 1
    proc: Any = None
    fault_at: float = 0.0
    action: str = "none"
    restarted_at: float | None = None
    detect: float | None = None
    changes: list[tuple[float, str]] = field(default_factory=list)
    reasons: list[str] = field(default_factory=list)

    @property
    def telemetry(self) -> Path:
        return self.work / "telemetry"

    def start_producer(self) -> None:
        self.proc = start_workload(self.bootstrap, self.telemetry, self.work / "wedge", self.timing)

    @property
    def bootstrap(self) -> str:
        return ",".join([self.lab.bootstrap, *self.dead])


def _delivered(telemetry: Path) -> int:
    return sum(int(doc["counters"].get("delivered", 0)) for doc in telemetry_docs(telemetry))


def _restart(run: _Run, operator: LocalOperator, decision: Any, now: float) -> None:
    run.progress(
        f"{run.scenario.name}: operator restarts demo-exec-{run.number} "
        f"({decision.verdict}): replacing the producer process"
    )
    stop_workload(run.proc, grace_seconds=RESTART_GRACE_SECONDS)
    operator.acted(decision, time.time())
    (run.work / "wedge").unlink(missing_ok=True)
    if run.scenario.seed == "S1":
        run.lab.restore()
    run.number += 1
    run.restarted_at = now
    run.action = f"restart ({decision.verdict})"
    run.start_producer()


def _operate(run: _Run, operator: LocalOperator, status: dict[str, Any], now: float) -> bool:
    """Run the operator's decisions for this round; True once a restart happened."""
    for decision in operator.decide(status, executor_pod(run.number), time.time()):
        if decision.operation is Operation.ALERT:
            if run.action == "none":
                run.action = f"alert only ({decision.verdict})"
            continue
        if decision.outcome is Outcome.ACTED and decision.operation is Operation.RESTART:
            _restart(run, operator, decision, now)
            return True
        if decision.outcome is Outcome.SUPPRESSED:
            run.action = f"{decision.operation} suppressed: {decision.suppression}"
    return False


def _watch(run: _Run, loop: SidecarLoop, operator: LocalOperator) -> None:
    s, t = run.scenario, run.timing
    watch_for = s.bound(t) if s.control else s.bound(t) + 5.0
    last = s.baseline
    for state in rounds(loop, t.probe_interval_seconds):
        now = time.monotonic()
        elapsed = now - run.fault_at
        if state.verdict is not last:
            last = state.verdict
            run.changes.append((round(elapsed, 2), str(last)))
            run.progress(f"{s.name}: {elapsed:5.1f} s  sidecar verdict {last}")
            if state.assessment:
                run.reasons = list(state.assessment.pod.reasons)
        if not s.control and run.detect is None and last is s.expect:
            run.detect = round(elapsed, 2)
        if run.detect is not None and _operate(run, operator, status_document(state), now):
            return
        if elapsed > watch_for or (run.detect is not None and elapsed > run.detect + 3):
            return


def _recover(run: _Run) -> float | None:
    """Heal the cluster if nothing was restarted; seconds from the fault to new deliveries
    (None for controls: events never stopped flowing)."""
    if run.scenario.control:
        return None
    if run.restarted_at is None:
        run.lab.restore()
        (run.work / "wedge").unlink(missing_ok=True)
    before = _delivered(run.telemetry)
    deadline = time.monotonic() + RECOVERY_TIMEOUT_SECONDS
    while time.monotonic() < deadline:
        if _delivered(run.telemetry) > before or (
            run.restarted_at is not None and _delivered(run.telemetry) > 0
        ):
            return round(time.monotonic() - run.fault_at, 2)
        time.sleep(0.2)
    return None


def run_demo_scenario(
    scenario: Scenario, timing: Timing, progress: Callable[[str], None], keep: Path | None
) -> DemoRow:
    """Replay one scenario with the local operator; returns its table row."""
    work = Path(tempfile.mkdtemp(prefix=f"hangwatch-demo-{scenario.name}-", dir=keep))
    with Lab(brokers=3, topics={TOPIC: PARTITIONS}) as lab:
        run = _Run(
            scenario,
            timing,
            lab,
            work,
            progress,
            dead=dead_endpoints(scenario.dead_bootstrap_entries),
        )
        run.telemetry.mkdir()
        run.start_producer()
        loop = SidecarLoop(sidecar_settings(run.bootstrap, run.telemetry, timing))
        try:
            progress(f"{scenario.name}: producer running; waiting for the sidecar's baseline")
            until_baseline(loop, timing.probe_interval_seconds, scenario.baseline)
            progress(f"{scenario.name}: fault: {scenario.fault}")
            run.fault_at = time.monotonic()
            scenario.inject(Context(lab=lab, wedge_file=work / "wedge", dead_bootstrap=run.dead))
            _watch(run, loop, LocalOperator())
            again = _recover(run)
            (work / "status.json").write_text(
                json.dumps(status_document(loop.state()), indent=2, default=str)
            )
        finally:
            loop.close()
            stop_workload(run.proc)
        expected = read_checkpoint(work / "checkpoint-telemetry")
        delivery = readback.check(readback.read_events(lab.bootstrap, TOPIC), expected)
    ok = delivery.missing == 0 and (
        not any(Verdict(v) in scenario.forbidden for _, v in run.changes)
        if scenario.control
        else run.detect is not None and run.detect <= scenario.bound(timing)
    )
    return DemoRow(
        scenario=scenario.name,
        seed=scenario.seed,
        fault=scenario.fault,
        expected=str(scenario.expect),
        verdict=run.changes[-1][1] if run.changes else str(scenario.baseline),
        detect_seconds=run.detect,
        action=run.action,
        progress_again_seconds=again,
        events=delivery.expected,
        lost=delivery.missing,
        duplicates=delivery.duplicates,
        ok=ok,
        reasons=run.reasons,
        changes=run.changes,
    )


def as_dict(row: DemoRow) -> dict[str, Any]:
    return asdict(row)
