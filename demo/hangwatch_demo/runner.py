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

What a run does is in modules of its own: its state (`scenario_run`), the actuation
(`actuation`), the report's progress (`progress_sampling`), the run's size and watch
(`job_sizing`) and the row's score (`row_scoring`); what is particular to a scenario
(its fault, its heal, what its first restart undoes, its producer's settings) is its
row in `scenarios`.
"""

from __future__ import annotations

import dataclasses
import json
import tempfile
import time
import urllib.request
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from hangwatch.contracts import Verdict
from hangwatch_demo import spark_tasks
from hangwatch_demo.actuation import operate
from hangwatch_demo.harness import dead_endpoints, sidecar_settings
from hangwatch_demo.job_sizing import (
    RATE_PER_SECOND,
    SETTLE_SECONDS,
    detect_bound,
    job_options,
    watch_seconds,
)
from hangwatch_demo.local_operator import LocalOperator
from hangwatch_demo.progress_sampling import PROGRESS_SOURCES, Sampler
from hangwatch_demo.report.recorder import Recorder
from hangwatch_demo.row_scoring import DemoRow, score_row
from hangwatch_demo.scenario_run import (
    ScenarioError,
    ScenarioRun,
    Setup,
    TopicEnd,
    delivering_executors,
    resumed,
    telemetry_of,
    verdict_of,
)
from hangwatch_demo.scenarios import PARTITIONS, TOPIC, Context, Scenario, Timing, lab_options
from hangwatch_demo.sidecars import SidecarFleet, wait_ready
from hangwatch_demo.spark_cluster import (
    LocalSparkCluster,
    PipelineJob,
)
from hangwatch_lab import Lab
from hangwatch_operator.sidecar_status import PodReport
from hangwatch_operator.status_polling import status_url
from hangwatch_pipeline.run_options import (
    RunOptions,
)
from hangwatch_pipeline.verify import verify

BASELINE_TIMEOUT_SECONDS = 45.0
"""From the run's first written event, how long the sidecars may take to agree on the
scenario's baseline."""


START_TIMEOUT_SECONDS = 180.0
"""How long the run's first event may take to be written (Spark schedules the tasks, the
executors load the sink's classes and connect). Past it the scenario fails as not started,
never as lost events: on a fresh 2-core machine running the suite's other tiers beside it,
a first JVM-sink scenario had no task running 47 s after its submission."""


RECOVERY_TIMEOUT_SECONDS = 45.0
"""How long events may take to flow again after the restart or heal: when both executors
were restarted, Spark's replacements took 10-30 s to run tasks on 2 loaded cores."""


JOB_END_TIMEOUT_SECONDS = 120.0


SIDECAR_START_TIMEOUT_SECONDS = 20.0


class NotStartedError(ScenarioError):
    """No event of the run was written within `START_TIMEOUT_SECONDS`."""


def _until_started(run: ScenarioRun, job: PipelineJob) -> None:
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


def _written(run: ScenarioRun) -> bool:
    """Whether any event of the run has been written yet."""
    if run.ends is not None:
        return run.ends.total() > 0
    return bool(delivering_executors(run))


def _until_baseline(run: ScenarioRun, job: PipelineJob) -> None:
    _until_started(run, job)
    run.started = True
    baseline = run.setup.scenario.baseline
    # Slower timing (the policy defaults' 10 s probes) needs more rounds' time to settle.
    allowed = max(BASELINE_TIMEOUT_SECONDS, 8 * run.setup.timing.probe_interval_seconds)
    deadline = time.monotonic() + allowed
    while True:
        reports = run.poll()
        verdicts = {r.pod.name: r.status.verdict if r.status else None for r in reports}
        delivering = delivering_executors(run)
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


def _note_verdicts(run: ScenarioRun, reports: list[PodReport], elapsed: float) -> None:
    for report in reports:
        verdict = verdict_of(report)
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


def _note_silence(run: ScenarioRun) -> None:
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


def _watch(run: ScenarioRun) -> None:
    s, t = run.setup.scenario, run.setup.timing
    watch_for = watch_seconds(s, t)
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
            operate(run, reports)
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


def _heal(run: ScenarioRun) -> None:
    """Undo the scenario's own fault that `Lab.restore` does not (`Scenario.heal`)."""
    if run.setup.scenario.heal is not None and run.context is not None:
        run.setup.scenario.heal(run.context)


def _recover(run: ScenarioRun) -> float | None:
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
        resumed(run)
        run.fault_ends("healed: nothing was restarted")
    elif run.setup.scenario.heal is not None:
        run.say("a restart cannot clear this fault: healing the cluster")
        _heal(run)
        resumed(run)
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
            flowing = any((d.get("last_delivery_ts") or 0) > since for d in telemetry_of(run))
        if flowing:
            again = time.time() - run.fault_wall
            run.setup.record.flowing(time.time())
            run.say(f"{again:5.1f} s  events flow again")
            return round(again, 2)
        time.sleep(0.2)
    run.problems.append(f"no delivery within {RECOVERY_TIMEOUT_SECONDS:.0f} s of recovery")
    return None


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
    with Lab(
        brokers=3, topics={TOPIC: PARTITIONS}, engine=scenario.engine, **lab_options(scenario)
    ) as lab:
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
        run = ScenarioRun(
            Setup(
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
        sampler = Sampler(run)
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
    row = score_row(run, checked.expected, checked.missing, checked.duplicates, again, summary)
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
    run: ScenarioRun, options: RunOptions, sampler: Sampler
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


def _wait_for_job(run: ScenarioRun, job: PipelineJob) -> bool:
    """Wait for the run's end (True) or `JOB_END_TIMEOUT_SECONDS`; the sidecars are polled
    every probe interval meanwhile, so the report's verdicts go on until the end."""
    deadline = time.monotonic() + JOB_END_TIMEOUT_SECONDS
    while not job.wait(run.setup.timing.probe_interval_seconds):
        if time.monotonic() > deadline:
            return False
        run.poll()
    return True
