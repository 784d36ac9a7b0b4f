"""`hangwatch demo`'s engine: replay a scenario on the Spark pipeline, let the operator decide.

For each scenario, on the demo's Spark application (`spark_cluster`): a fresh lab
(three mock brokers), one `hangwatch sidecar` process per executor (`sidecars`), and
one run of the reference pipeline (`hangwatch_pipeline.job.run_pipeline`, paced, at
least once) writing to the lab. Once every sidecar reports the baseline verdict and
every executor's producer delivers, the fault is injected; then, every probe
interval, the operator's own round polls the sidecars' `/status` over HTTP, plans,
has the demo carry out what it decided and settles (`local_operator`, over
`hangwatch_operator.rounds`). `restart` kills that executor's JVM (SIGTERM, SIGKILL
after a grace period); Spark launches a replacement and runs the lost tasks again.
When nothing was restarted the fault is healed after the watch period. The job then
runs to its end and the topic is read back (`hangwatch_pipeline.verify`): every event
of the run must be there (duplicates from retried tasks are allowed and counted).

The `plain-*` scenarios' tasks write through a plain confluent-kafka client
(`spark_tasks.write_partition_plain`): no telemetry, so the sidecars judge them from
their socket view, narrowed to their own executor's process tree, and Spark's view of
their executor (the driver's REST API); their baseline is every sidecar `healthy` (for a
pod without telemetry: it sees the executor's own connections to brokers), and "events
flow again" is the topic's end offsets growing. `plain-idle-between-runs` waits for the
run's end before its "fault": the producers, kept open in the Python workers, idle with
no task running.

Emulation notes: the lab injects faults in the cluster, so one needs help to behave
like the client bug it stands for: S1's refusals are cleared when the first executor
is restarted (in the incident the sticky error lived in the client, so a new client
was the cure). S4's trigger is a file in the wedged executor's own working directory,
so its replacement starts clean by itself (see `spark_tasks`).
"""

from __future__ import annotations

import dataclasses
import json
import logging
import math
import secrets
import tempfile
import threading
import time
import urllib.request
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer

from hangwatch import kafka_errors
from hangwatch.contracts import Verdict
from hangwatch_demo import spark_tasks
from hangwatch_demo.harness import dead_endpoints, sidecar_settings, telemetry_docs
from hangwatch_demo.local_operator import LocalOperator
from hangwatch_demo.report.recorder import Recorder, ScenarioRecorder
from hangwatch_demo.report.records import NO_STATUS
from hangwatch_demo.scenarios import PARTITIONS, TOPIC, Context, Scenario, Timing
from hangwatch_demo.sidecars import SidecarFleet, wait_ready
from hangwatch_demo.spark_cluster import (
    EXECUTORS,
    TELEMETRY_SUBDIR,
    LocalSparkCluster,
    PipelineJob,
)
from hangwatch_lab import Lab
from hangwatch_operator.decisions import Decision
from hangwatch_operator.operations import Operation, Outcome
from hangwatch_operator.sidecar_status import PodReport
from hangwatch_operator.status_polling import status_url
from hangwatch_pipeline.run_options import (
    SINK_CONNECTOR,
    SINK_CONNECTOR_STREAMING,
    SINK_WRAPPER,
    RunOptions,
)
from hangwatch_pipeline.verify import VerifyError, partition_ends, verify

log = logging.getLogger(__name__)

RATE_PER_SECOND = 200.0
"""Events per second the pipeline writes (split over the two executors' tasks)."""
BASELINE_ALLOWANCE_SECONDS = 4.0
"""Job time budgeted before the fault per second of probe interval (tasks start, sidecars
see them deliver over a few rounds)."""
SETTLE_SECONDS = 3.0
"""After the operator acted, how long the watch goes on (the next rounds' decisions)."""
TAIL_SECONDS = 3.0
"""Job time budgeted after the watch (events flowing again). The job is sized to end
soon after the scenario: a stalled task keeps it running through the fault anyway."""
CONTROL_WATCH_SECONDS = 10.0
"""How long controls (healthy, S2's recovering election) are watched for wrong actions."""
BASELINE_TIMEOUT_SECONDS = 45.0
"""From the run's first written event, how long the sidecars may take to agree on the
scenario's baseline."""
START_TIMEOUT_SECONDS = 180.0
"""How long the run's first event may take to be written (Spark schedules the tasks, the
executors load the sink's classes and connect). Past it the scenario fails as not started,
never as lost events: on a fresh 2-core machine running the suite's other tiers beside it,
a first JVM-sink scenario had no task running 47 s after its submission."""
RESTART_GRACE_SECONDS = 2.0
RECOVERY_TIMEOUT_SECONDS = 45.0
"""How long events may take to flow again after the restart or heal: when both executors
were restarted, Spark's replacements took 10-30 s to run tasks on 2 loaded cores."""
JOB_END_TIMEOUT_SECONDS = 120.0
SIDECAR_START_TIMEOUT_SECONDS = 20.0
SAMPLE_SECONDS = 1.0
"""How often the report's progress (events acknowledged) is sampled."""


class ScenarioError(Exception):
    """The scenario could not be played (reported in its row, the demo goes on)."""


@dataclass
class DemoRow:
    """One line of the demo's table (and one object of its JSON)."""

    scenario: str
    seed: str
    producer: str
    engine: str
    """The lab engine the scenario ran on: `kafka` (Apache Kafka) or `mock` (librdkafka's
    protocol emulation, for faults only it can make)."""
    fault: str
    fault_short: str
    expected: str
    verdict: str
    detect_seconds: float | None
    action: str
    progress_again_seconds: float | None
    events: int
    lost: int
    """Events of the run missing from the topic when it was read back after the run: each
    was handed to a producer and never written (acknowledged or not). 0 when the run never
    started (`not_started`): nothing was sent, so nothing can be lost."""
    duplicates: int
    ok: bool
    restarts: int = 0
    task_retries: int = 0
    longest_silence_seconds: float | None = None
    """Plain producers: the longest every-connection silence a sidecar reported."""
    silence_cleared: list[str] = field(default_factory=list)
    """Plain producers: why a sidecar judged such a silence healthy (one reason a source)."""
    detect_bound_seconds: float | None = None
    """The scenario's detection bound (`detect_bound`; None for controls), shown beside
    `detect_seconds`: a timing (benchmarks/detection.py), never a reason for `ok` False."""
    restart_seconds: float | None = None
    """Fault to the first executor restart (None: nothing restarted)."""
    reasons: list[str] = field(default_factory=list)
    changes: list[tuple[float, str]] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    not_started: bool = False
    """No event of the run was written in time: nothing can have been lost, the row fails
    on its problem ("not started ...") and `lost` stays 0."""


@dataclass(frozen=True)
class _Setup:
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
    """Dead bootstrap entries the producers are configured with (S1)."""


@dataclass
class _Run:
    """What a scenario's run finds out as it goes (its row is made of it)."""

    setup: _Setup
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
        self.setup.record.observe(time.time(), {r.pod.name: _verdict_of(r) for r in reports})
        return reports

    def fault_ends(self, how: str) -> None:
        """The fault is over (healed, or its producer restarted): once, for the report."""
        if not self.fault_ended:
            self.fault_ended = True
            self.setup.record.fault_end(time.time(), how)


def _verdict_of(report: PodReport) -> str:
    return str(report.status.verdict) if report.status else NO_STATUS


def _telemetry(run: _Run) -> list[dict[str, Any]]:
    """Producer telemetry of every executor of the application, live or gone."""
    root = run.setup.cluster.work_root / run.setup.cluster.application_id
    dirs = sorted(root.glob(f"*/{TELEMETRY_SUBDIR}"))
    return [doc for d in dirs for doc in telemetry_docs(d)]


def _delivering_executors(run: _Run) -> set[str]:
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


class NotStartedError(ScenarioError):
    """No event of the run was written within `START_TIMEOUT_SECONDS`."""


def _until_started(run: _Run, job: PipelineJob) -> None:
    """Wait for the run's first written event (the wrapper's delivery reports, or the
    topic's end offsets for plain producers); `NotStartedError` past the bound."""
    deadline = time.monotonic() + START_TIMEOUT_SECONDS
    while not _written(run):
        ended = not job.running and not run.setup.scenario.idles_after_run
        if ended or time.monotonic() > deadline:
            state = "running" if job.running else job.error or "ended"
            raise NotStartedError(
                f"not started: no event of the run written within {START_TIMEOUT_SECONDS:.0f} s "
                f"of its submission (job: {state})"
            )
        run.poll()
        time.sleep(run.setup.timing.probe_interval_seconds)


def _written(run: _Run) -> bool:
    """Whether any event of the run has been written yet."""
    if run.ends is not None:
        return run.ends.total() > 0
    return bool(_delivering_executors(run))


def _until_baseline(run: _Run, job: PipelineJob) -> None:
    _until_started(run, job)
    run.started = True
    baseline = run.setup.scenario.baseline
    # Slower timing (the policy defaults' 10 s probes) needs more rounds' time to settle.
    allowed = max(BASELINE_TIMEOUT_SECONDS, 8 * run.setup.timing.probe_interval_seconds)
    deadline = time.monotonic() + allowed
    while True:
        reports = run.poll()
        verdicts = {r.pod.name: r.status.verdict if r.status else None for r in reports}
        delivering = _delivering_executors(run)
        if (
            run.setup.fleet.ready()
            and reports
            and all(v is baseline for v in verdicts.values())
            and all(r.pod.executor_id in delivering for r in reports)
        ):
            return
        ended = not job.running and not run.setup.scenario.idles_after_run
        if ended or time.monotonic() > deadline:
            raise ScenarioError(
                f"no {baseline} baseline within {allowed:.0f} s "
                f"(sidecars: {verdicts}; delivering executors: {sorted(delivering)}; "
                f"job: {'running' if job.running else job.error or 'ended'})"
            )
        time.sleep(run.setup.timing.probe_interval_seconds)


def _note_verdicts(run: _Run, reports: list[PodReport], elapsed: float) -> None:
    for report in reports:
        verdict = _verdict_of(report)
        name = report.pod.name
        if run.verdicts.get(name) != verdict:
            first_seen = name not in run.verdicts
            run.verdicts[name] = verdict
            if first_seen and verdict == str(run.setup.scenario.baseline):
                continue
            run.changes.append((round(elapsed, 2), f"{name} {verdict}"))
            run.say(f"{elapsed:5.1f} s  {name} sidecar verdict {verdict}")
            if (
                report.status
                and report.status.reasons
                and verdict == str(run.setup.scenario.expect)
            ):
                run.reasons = list(report.status.reasons)


def _note_silence(run: _Run) -> None:
    """Keep the longest `sockets.silent_seconds` the sidecars' /status shows (plain
    producers: how long their connections were idle, as their socket view saw it) and
    what cleared such a silence (`latest.evidence.silence_cleared`: the evidence ladder's
    sources that showed the task busy elsewhere, the first reason of each)."""
    for pod in run.setup.fleet.pods():
        try:
            with urllib.request.urlopen(status_url(pod), timeout=1.0) as answer:
                doc = json.load(answer)
            run.last_status[pod.name] = doc
            silent = (doc.get("sockets") or {}).get("silent_seconds")
            cleared = ((doc.get("latest") or {}).get("evidence") or {}).get("silence_cleared")
        except (OSError, ValueError, AttributeError):
            continue
        if isinstance(silent, int | float):
            run.longest_silence = max(run.longest_silence or 0.0, float(silent))
        for reason in cleared if isinstance(cleared, list) else ():
            source = str(reason).split(":", 1)[0]  # "spark view", "python stacks", ...
            if all(not r.startswith(f"{source}:") for r in run.silence_cleared):
                run.silence_cleared.append(str(reason))


def _carry_out(run: _Run, decision: Decision) -> Decision:
    """The demo's actuation: a restart kills the executor's JVM; nothing else is possible
    here (no nodes to cordon, no decommission hook), so anything else fails."""
    if decision.operation is Operation.RESTART:
        return replace(decision, note=_restart(run, decision))
    return replace(decision, outcome=Outcome.FAILED, note=f"the demo cannot {decision.operation}")


def _restart(run: _Run, decision: Decision) -> str:
    assert decision.pod is not None
    executor = next(
        (e for e in run.setup.cluster.executors() if e.id == decision.pod.executor_id), None
    )
    pid = executor.pid if executor else "-"
    run.say(
        f"operator restarts {decision.pod.name} ({decision.verdict}): "
        f"killing executor JVM pid {pid}"
    )
    if executor is not None:
        run.setup.cluster.kill(executor, RESTART_GRACE_SECONDS)
    if run.setup.scenario.seed == "S1" and not run.restarted:
        run.setup.lab.restore()
    note = f"executor JVM pid {pid} killed"
    run.setup.record.action(time.time(), str(decision.operation), "acted", decision.pod.name, note)
    if run.setup.scenario.restart_helps:
        run.fault_ends(f"{decision.pod.name} restarted: a new client")
    run.restarted.append((decision.pod.name, str(decision.verdict)))
    if run.restart_at is None:
        run.restart_at = round(time.monotonic() - run.fault_at, 2)
    _resumed(run)
    run.actions.append(f"restart {decision.pod.name} ({decision.verdict})")
    return note


def _operate(run: _Run, reports: list[PodReport]) -> None:
    """One operator round on these reports: restarts happen, the rest is noted."""
    for decision in run.setup.operator.decide(reports, time.time(), lambda d: _carry_out(run, d)):
        who = decision.pod.name if decision.pod else "-"
        if decision.operation is Operation.ALERT:
            note = f"alert {who} ({alert_subject(decision.verdict, decision.reasons)})"
        elif decision.outcome is Outcome.ACTED and decision.operation is Operation.RESTART:
            continue
        elif decision.outcome is Outcome.SUPPRESSED:
            note = f"{decision.operation} {who} suppressed: {decision.suppression}"
        else:
            note = f"{decision.operation} {who} {decision.outcome}"
        if note not in run.actions:
            run.actions.append(note)
            why = [str(decision.suppression or ""), decision.limit, decision.note]
            named = decision.verdict is Verdict.WRITES_REJECTED and decision.reasons
            run.setup.record.action(
                time.time(),
                str(decision.operation),
                str(decision.outcome),
                decision.pod.name if decision.pod else None,
                "; ".join(w for w in why if w)
                or f"verdict {decision.verdict}" + (f": {decision.reasons[0]}" if named else ""),
            )
            run.say(f"operator: {note}" + (f" - {decision.limit}" if decision.limit else ""))


def alert_subject(verdict: Verdict, reasons: tuple[str, ...]) -> str:
    """What an alert is about in the table: its verdict, and for writes the cluster
    refuses the Kafka error the sidecar's first reason names (`kafka_errors`)."""
    if verdict is Verdict.WRITES_REJECTED and reasons:
        named = kafka_errors.classify_message(reasons[0])
        if named is not None:
            return f"{verdict}: {named.exception}"
    return str(verdict)


def _watch_seconds(scenario: Scenario, timing: Timing) -> float:
    if scenario.control:
        return scenario.watch_seconds or min(scenario.bound(timing), CONTROL_WATCH_SECONDS)
    return detect_bound(scenario, timing) + SETTLE_SECONDS


def detect_bound(scenario: Scenario, timing: Timing) -> float:
    """The scenario's detection bound (`Scenario.bound`, for a verdict taken in the
    sidecar's own round) plus two probe intervals: the sidecar is a separate process
    whose rounds run on their own phase, and the operator sees a verdict at its next
    poll of `/status`."""
    return scenario.bound(timing) + 2 * timing.probe_interval_seconds


def _watch(run: _Run) -> None:
    s, t = run.setup.scenario, run.setup.timing
    watch_for = _watch_seconds(s, t)
    acted_at: float | None = None
    while True:
        round_start = time.monotonic()
        reports = run.poll()
        elapsed = round_start - run.fault_at
        _note_verdicts(run, reports, elapsed)
        if s.producer != "wrapper":
            _note_silence(run)
        seen = any(r.status and r.status.verdict is s.expect for r in reports)
        if not s.control and run.detect is None and seen:
            run.detect = round(elapsed, 2)
            run.setup.record.detected(time.time(), str(s.expect))
        if run.detect is not None or s.control:
            before = len(run.actions)
            _operate(run, reports)
            if len(run.actions) > before and acted_at is None:
                acted_at = elapsed
        hung = any(
            r.status and r.status.verdict in {Verdict.PRODUCER_HUNG, Verdict.METADATA_STALE}
            for r in reports
        )
        # A fault not yet detected is watched one bound longer: only no detection at all
        # fails the scenario, a late one is a timing (the row shows it beside its bound).
        undetected = not s.control and run.detect is None
        limit = watch_for + (detect_bound(s, t) if undetected else 0.0)
        if elapsed > limit and not (run.restarted and hung):
            return
        settled = acted_at is not None and elapsed > acted_at + SETTLE_SECONDS
        if not s.control and settled and not hung:
            return
        if elapsed > watch_for + RECOVERY_TIMEOUT_SECONDS:
            return
        time.sleep(max(0.0, round_start + t.probe_interval_seconds - time.monotonic()))


def _heal(run: _Run) -> None:
    """Undo the scenario's own fault that `Lab.restore` does not (`Scenario.heal`)."""
    if run.setup.scenario.heal is not None and run.context is not None:
        run.setup.scenario.heal(run.context)


def _recover(run: _Run) -> float | None:
    """Heal the cluster if nothing was restarted (a scenario's own `heal` also after a
    restart: a restart cannot clear its fault); seconds from the fault until a producer
    delivered again after the restart or heal (None for controls: nothing stopped)."""
    if run.setup.scenario.control:
        return None
    if not run.restarted:
        run.say("nothing restarted: healing the cluster")
        run.setup.lab.restore()
        _heal(run)
        for executor in run.setup.cluster.executors():
            (executor.work_dir / spark_tasks.WEDGE_FILE).unlink(missing_ok=True)
        _resumed(run)
        run.fault_ends("healed: nothing was restarted")
    elif run.setup.scenario.heal is not None:
        run.say("a restart cannot clear this fault: healing the cluster")
        _heal(run)
        _resumed(run)
        run.fault_ends("healed after the restart")
    since = run.resumed_wall or run.fault_wall
    deadline = time.monotonic() + RECOVERY_TIMEOUT_SECONDS
    polled = 0.0
    while time.monotonic() < deadline:
        if time.monotonic() - polled >= run.setup.timing.probe_interval_seconds:
            run.poll()  # the replacements' verdicts, for the report
            polled = time.monotonic()
        run.setup.fleet.sync(run.setup.cluster.executors())
        if run.ends is not None:
            flowing = run.ends.total() > run.resumed_end
        else:
            flowing = any((d.get("last_delivery_ts") or 0) > since for d in _telemetry(run))
        if flowing:
            again = time.time() - run.fault_wall
            run.setup.record.flowing(time.time())
            run.say(f"{again:5.1f} s  events flow again")
            return round(again, 2)
        time.sleep(0.2)
    run.problems.append(f"no delivery within {RECOVERY_TIMEOUT_SECONDS:.0f} s of recovery")
    return None


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


PROGRESS_SOURCES = ("acknowledged (producer telemetry)", "written (topic end offsets)")
"""What the report's progress counts: wrapper producers' delivery reports, or (plain
producers, no telemetry) the topic's end offsets."""


class _Sampler:
    """Samples, once a second on its own thread, the events acknowledged so far and the
    producers' first delivery failure after the fault, for the report."""

    def __init__(self, run: _Run) -> None:
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
        docs = _telemetry(self.run)
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


def _resumed(run: _Run) -> None:
    """Note the restart or heal after which deliveries count as recovery."""
    run.resumed_wall = time.time()
    if run.ends is not None:
        run.resumed_end = run.ends.total()


def job_options(scenario: Scenario, timing: Timing, bootstrap: str) -> RunOptions:
    """The pipeline run of a scenario: long enough to cover the baseline, watch and tail;
    for a run whose end is the "fault", the baseline allowance and tail only."""
    # The baseline takes a few probe rounds: at the policy's 10 s probes a run sized for
    # 1 s probes ended before its fault took hold (the soak benchmark's S4 and S2 rows).
    allowance = BASELINE_ALLOWANCE_SECONDS * timing.probe_interval_seconds
    seconds = allowance + _watch_seconds(scenario, timing) + TAIL_SECONDS
    if scenario.idles_after_run:
        seconds = allowance + TAIL_SECONDS
    producer_conf = {"message.timeout.ms": str(timing.producer_message_timeout_ms)}
    producer_conf |= scenario.producer_conf
    sink, sink_options = SINK_WRAPPER, {}
    if scenario.producer == spark_tasks.JVM:
        # Spark's sink: its JVM producer's own settings (`kafka.*`), no librdkafka's
        sink = SINK_CONNECTOR_STREAMING if scenario.trigger_seconds else SINK_CONNECTOR
        producer_conf, sink_options = {}, dict(scenario.producer_conf)
    if scenario.seed == "S4" and scenario.producer == "wrapper":
        # Client debug lines are what reaches the wedgeable logger on the poll thread.
        producer_conf["debug"] = "msg"
    events, partitions = int(RATE_PER_SECOND * seconds), None
    if scenario.pause is not None:
        # One task per executor, each pausing after every `every_events` of its events
        # (paced sending catches up after a pause): enough pauses to cover the watch.
        budget = scenario.pause.budget_seconds
        pauses = math.ceil(seconds / scenario.pause.mean_seconds) + 1
        if budget:  # pauses stop at the budget: enough for the longest draw sequence
            pauses = math.ceil(budget / scenario.pause.seconds) + 1
        partitions = EXECUTORS
        events = EXECUTORS * scenario.pause.every_events * pauses
    if scenario.trigger_seconds:
        # A micro-batch every trigger interval (one task per executor), enough to cover it
        partitions = EXECUTORS
        events = scenario.rows_per_batch * (math.ceil(seconds / scenario.trigger_seconds) + 1)
    return RunOptions(
        bootstrap=bootstrap,
        topic=TOPIC,
        events=events,
        partitions=partitions,
        rate_per_second=RATE_PER_SECOND,
        run_id=f"demo-{scenario.name}-{secrets.token_hex(2)}",
        producer_conf=producer_conf,
        sink=sink,
        sink_options=sink_options,
    )


def run_demo_scenario(
    scenario: Scenario,
    timing: Timing,
    cluster: LocalSparkCluster,
    progress: Callable[[str], None],
    keep: Path | None,
    recorder: Recorder | None = None,
) -> DemoRow:
    """Replay one scenario on the demo's Spark application; returns its table row (and
    records its story with `recorder`, when given)."""
    work = Path(tempfile.mkdtemp(prefix=f"hangwatch-demo-{scenario.name}-", dir=keep))
    with Lab(brokers=3, topics={TOPIC: PARTITIONS}, engine=scenario.engine) as lab:
        record = (recorder or Recorder.off()).scenario(
            scenario.name,
            fault=scenario.fault,
            producer=scenario.producer,
            engine=lab.engine_description,
            expected=str(scenario.expect),
            control=scenario.control,
            bound_seconds=None if scenario.control else detect_bound(scenario, timing),
            progress_source=PROGRESS_SOURCES[scenario.producer != "wrapper"],
        )
        dead = dead_endpoints(scenario.dead_bootstrap_entries)
        bootstrap = ",".join([lab.bootstrap, *dead])
        # The demo's executors share this machine's network namespace, unlike pods: each
        # sidecar's socket view is narrowed to its executor's process tree (`sidecars`).
        settings = dataclasses.replace(
            sidecar_settings(bootstrap, work, timing),
            spark_ui_url=cluster.ui_url or "off",
            application_id=cluster.application_id,
            spark_interval_seconds=timing.spark_interval_seconds,
        )
        fleet = SidecarFleet(settings, work, cluster.application_id)
        run = _Run(
            _Setup(
                scenario,
                timing,
                lab,
                cluster,
                fleet,
                LocalOperator(),
                progress,
                record,
                tuple(dead),
            )
        )
        if scenario.producer != "wrapper":
            run.ends = TopicEnd(lab.bootstrap)
        options = job_options(scenario, timing, bootstrap)
        if scenario.trigger_seconds:  # the streaming query's checkpoint goes with the run
            options = replace(options, checkpoint=str(work / "checkpoint"))
        job: PipelineJob | None = None
        again: float | None = None
        sampler = _Sampler(run)
        try:
            job, again = _replay(run, options, sampler)
        except ScenarioError as exc:
            run.problems.append(str(exc))
        finally:
            sampler.stop()
            if job is not None and job.running:
                job.cancel()
            fleet.close()
            if run.ends is not None:
                run.ends.close()
        if run.fault_wall and scenario.injects:
            run.fault_ends("not healed in the scenario: it ends with the lab")
        summary = job.summary if job is not None else None
        if summary is not None and summary.error:
            run.problems.append(f"pipeline run failed: {summary.error}")
        checked = verify(lab.bootstrap, TOPIC, options.events or 0, options.run_id, 30.0)
        if not checked.complete:
            run.problems.append("the topic could not be read back completely")
        for pod_name, doc in run.last_status.items():
            (work / f"sidecar-{pod_name}.status.json").write_text(json.dumps(doc, indent=2))
        (work / "status.json").write_text(
            json.dumps(
                {"changes": run.changes, "actions": run.actions, "verify": checked.as_json()},
                indent=2,
                default=str,
            )
        )
    row = _row(run, checked.expected, checked.missing, checked.duplicates, again, summary)
    record.row(
        engine=lab.engine_description,
        producer=row.producer,
        verdict=row.verdict,
        ok=row.ok,
        detect_seconds=row.detect_seconds,
        action=row.action,
        flowing_again_seconds=row.progress_again_seconds,
        lost=row.lost,
        duplicates=row.duplicates,
        problems=row.problems,
    )
    return row


def _replay(
    run: _Run, options: RunOptions, sampler: _Sampler
) -> tuple[PipelineJob | None, float | None]:
    """Start the run, wait for the baseline, inject, watch and operate, recover.

    Returns the job (possibly still running after a problem) and the recovery time."""
    scenario, cluster = run.setup.scenario, run.setup.cluster
    executors = cluster.executors()
    if not wait_ready(run.setup.fleet, executors, SIDECAR_START_TIMEOUT_SECONDS):
        raise ScenarioError("the sidecars did not start (see sidecar-exec-*.log)")
    pipeline = spark_tasks.pipeline_run(
        scenario.producer, scenario.pause, scenario.trigger_seconds, scenario.rows_per_batch
    )
    job = cluster.run(options, pipeline, run.say)
    sampler.start()
    run.say(
        f"pipeline run {options.run_id}: {options.events} events at "
        f"{RATE_PER_SECOND:.0f}/s on executors {', '.join(e.id for e in executors)}; "
        f"waiting for the baseline ({scenario.baseline})"
    )
    try:
        _until_baseline(run, job)
    except ScenarioError as exc:
        run.problems.append(str(exc))
        return job, None
    if scenario.idles_after_run:
        run.say("waiting for the run to end: its producers stay open, idle, no task running")
        if not _wait_for_job(run, job):
            run.problems.append(f"the run did not finish in {JOB_END_TIMEOUT_SECONDS:.0f} s")
    run.say(f"fault: {scenario.fault}")
    run.fault_at, run.fault_wall = time.monotonic(), time.time()
    run.setup.record.fault(run.fault_wall)
    wedge = executors[0].work_dir / spark_tasks.WEDGE_FILE
    run.context = Context(lab=run.setup.lab, wedge_file=wedge, dead_bootstrap=list(run.setup.dead))
    scenario.inject(run.context)
    if not scenario.injects:
        run.fault_ends("nothing injected (a control)")
    _watch(run)
    again = _recover(run)
    run.say("waiting for the pipeline run to finish")
    if not _wait_for_job(run, job):
        run.problems.append(f"the run did not finish in {JOB_END_TIMEOUT_SECONDS:.0f} s")
    if job.error:
        run.problems.append(f"pipeline run failed: {job.error}")
    return job, again


def _wait_for_job(run: _Run, job: PipelineJob) -> bool:
    """Wait for the run's end (True) or `JOB_END_TIMEOUT_SECONDS`; the sidecars are polled
    every probe interval meanwhile, so the report's verdicts go on until the end."""
    deadline = time.monotonic() + JOB_END_TIMEOUT_SECONDS
    while not job.wait(run.setup.timing.probe_interval_seconds):
        if time.monotonic() > deadline:
            return False
        run.poll()
    return True


def _row(
    run: _Run,
    events: int,
    lost: int,
    duplicates: int,
    again: float | None,
    summary: Any,
) -> DemoRow:
    s = run.setup.scenario
    seen = [c.split(" ", 1)[1] for _, c in run.changes]
    if s.control:
        behaved = not ({str(v) for v in s.forbidden} & set(seen)) and not run.restarted
        verdict = next((v for v in seen if v != str(s.baseline)), str(s.baseline))
    else:
        # a forbidden verdict (a refusal's restart verdicts) fails the row even when the
        # expected one came too
        behaved = (
            run.detect is not None
            and bool(run.restarted) == s.restart_helps
            and not ({str(v) for v in s.forbidden} & set(seen))
        )
        verdict = str(s.expect) if run.detect is not None else (seen[-1] if seen else "-")
    action = action_summary(run.actions, run.restarted)
    return DemoRow(
        scenario=s.name,
        seed=s.seed,
        producer=s.producer,
        engine=s.engine,
        fault=s.fault,
        fault_short=s.label or s.fault,
        expected=str(s.expect),
        verdict=verdict,
        detect_seconds=run.detect,
        action=action,
        progress_again_seconds=again,
        events=events,
        lost=lost if run.started else 0,
        duplicates=duplicates,
        ok=behaved and lost == 0 and run.started and not run.problems,
        restarts=len(run.restarted),
        task_retries=summary.failed_attempts if summary is not None else 0,
        longest_silence_seconds=run.longest_silence,
        silence_cleared=run.silence_cleared,
        detect_bound_seconds=None if s.control else round(detect_bound(s, run.setup.timing), 2),
        restart_seconds=run.restart_at,
        reasons=run.reasons,
        changes=run.changes,
        problems=run.problems,
        not_started=not run.started,
    )


def action_summary(actions: list[str], restarted: list[tuple[str, str]]) -> str:
    """The table's action cell: restarts, else the first suppression, else alerts."""
    if restarted:
        verdicts = ", ".join(sorted({verdict for _, verdict in restarted}))
        return f"restart {', '.join(name for name, _ in restarted)} ({verdicts})"
    suppressed = [a for a in actions if " suppressed: " in a]
    if suppressed:
        return suppressed[0]
    alerted = {a.rsplit(" (", 1)[1].rstrip(")") for a in actions if a.startswith("alert")}
    return f"alert only ({', '.join(sorted(alerted))})" if alerted else "none"


def as_dict(row: DemoRow) -> dict[str, Any]:
    return asdict(row)
