"""A demo scenario's run: what it is given (`Setup`) and what it finds out as it goes
(`ScenarioRun`), which the runner, the actuation, the progress sampling and the row's
scoring share; the producers' telemetry and the topic's end offsets it reads.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import Consumer

from hangwatch_demo.harness import telemetry_docs
from hangwatch_demo.local_operator import LocalOperator
from hangwatch_demo.report.recorder import ScenarioRecorder
from hangwatch_demo.report.records import NO_STATUS
from hangwatch_demo.scenarios import TOPIC, Context, Scenario, Timing
from hangwatch_demo.sidecars import SidecarFleet
from hangwatch_demo.spark_cluster import (
    TELEMETRY_SUBDIR,
    LocalSparkCluster,
)
from hangwatch_lab import Lab
from hangwatch_operator.sidecar_status import PodReport
from hangwatch_pipeline.verify import VerifyError, partition_ends


class ScenarioError(Exception):
    """The scenario could not be played (reported in its row, the demo goes on)."""


@dataclass(frozen=True)
class Setup:
    """What a scenario's run is given, fixed for the run."""

    scenario: Scenario
    timing: Timing
    lab: Lab
    cluster: LocalSparkCluster
    fleet: SidecarFleet
    operator: LocalOperator
    progress: Callable[[str], None]
    record: ScenarioRecorder
    dead: tuple[str, ...] = ()
    """Dead bootstrap entries the producers are configured with (`dead_bootstrap_entries`)."""


@dataclass
class ScenarioRun:
    """What a scenario's run finds out as it goes (its row is made of it)."""

    setup: Setup
    fault_at: float = 0.0
    fault_wall: float = 0.0
    actions: list[str] = field(default_factory=list)
    """Every distinct decision outcome, in order (alerts, suppressions, restarts)."""
    restarted: list[tuple[str, str]] = field(default_factory=list)
    """Executors restarted: (pod name, verdict)."""
    resumed_wall: float | None = None
    """Wall time of the restart or heal after which deliveries count as recovery."""
    ends: TopicEnd | None = None
    """The topic's end offsets, for plain producers (no telemetry says they delivered)."""
    resumed_end: int = 0
    """The topic's end offsets' sum at the restart or heal (plain producers)."""
    longest_silence: float | None = None
    """The longest silence of an executor's connections a sidecar's socket view reported."""
    silence_cleared: list[str] = field(default_factory=list)
    """Why the sidecars cleared a silence (the evidence ladder): the first reason each
    source gave (the source is the reason's text up to its first colon)."""
    last_status: dict[str, Any] = field(default_factory=dict)
    """Plain producers and Spark's sink: each sidecar's last /status document, by pod name
    (written to the kept directory as `sidecar-<pod>.status.json`)."""
    detect: float | None = None
    restart_at: float | None = None
    """Seconds from the fault to the first restart."""
    verdicts: dict[str, str] = field(default_factory=dict)
    changes: list[tuple[float, str]] = field(default_factory=list)
    reasons: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    fault_ended: bool = False
    context: Context | None = None
    """What the fault was injected with (a heal undoes it with the same)."""
    started: bool = False
    """An event of the run was written (`_until_started`): only then can events be lost."""

    def say(self, message: str) -> None:
        self.setup.progress(f"{self.setup.scenario.name}: {message}")

    def poll(self) -> list[PodReport]:
        self.setup.fleet.sync(self.setup.cluster.executors())
        reports = self.setup.operator.poll(self.setup.fleet.pods())
        self.setup.record.observe(time.time(), {r.pod.name: verdict_of(r) for r in reports})
        return reports

    def fault_ends(self, how: str) -> None:
        """The fault is over (healed, or its producer restarted): once, for the report."""
        if not self.fault_ended:
            self.fault_ended = True
            self.setup.record.fault_end(time.time(), how)


def verdict_of(report: PodReport) -> str:
    return str(report.status.verdict) if report.status else NO_STATUS


def telemetry_of(run: ScenarioRun) -> list[dict[str, Any]]:
    """Producer telemetry of every executor of the application, live or gone."""
    root = run.setup.cluster.work_root / run.setup.cluster.application_id
    dirs = sorted(root.glob(f"*/{TELEMETRY_SUBDIR}"))
    return [doc for d in dirs for doc in telemetry_docs(d)]


def delivering_executors(run: ScenarioRun) -> set[str]:
    """Executors whose producers delivered; for plain producers (no telemetry) every
    executor: their sidecar's `healthy` says it sees their connections."""
    if run.setup.scenario.producer != "wrapper":
        return {e.id for e in run.setup.cluster.executors()}
    found = set()
    for executor in run.setup.cluster.executors():
        docs = telemetry_docs(executor.telemetry_dir)
        if any(int(d["counters"].get("delivered", 0)) > 0 for d in docs):
            found.add(executor.id)
    return found


def resumed(run: ScenarioRun) -> None:
    """Note the restart or heal after which deliveries count as recovery."""
    run.resumed_wall = time.time()
    if run.ends is not None:
        run.resumed_end = run.ends.total()


class TopicEnd:
    """The scenario topic's end offsets summed over partitions (plain producers' progress)."""

    def __init__(self, bootstrap: str) -> None:
        self.consumer = Consumer(
            {"bootstrap.servers": bootstrap, "group.id": "hangwatch-demo-ends", "log_level": 0}
        )

    def total(self) -> int:
        deadline = time.monotonic() + 5.0
        try:
            ends = partition_ends(self.consumer, TOPIC, deadline, time.monotonic)
        except VerifyError:
            return 0
        return sum(high for _, high in ends.values())

    def close(self) -> None:
        self.consumer.close()
