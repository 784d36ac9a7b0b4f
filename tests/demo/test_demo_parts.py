"""The demo's pieces that need no cluster: how it finds executors, talks to sidecars, sizes runs.

Covers: executors are found by their JVM command line (only the demo application's,
numbered by executor id, work directory under the worker's `work/<app>/<id>`), and
each gets a `--exit-when-gone` pattern only its own command line holds; the sidecar
command line carries every setting (parsed back by the sidecar's own parser to the
same settings); a sidecar's port is read from its "sidecar started" log line (and
not before); pipeline progress reaches the demo line by line; each scenario's run is
long enough for its watch (a run whose end is the fault: longer than the stall
threshold), and only the wrapper's S4 producers log client debug lines; the
table's action cell names restarts, else a suppression, else alerts (an alert on
writes the cluster refuses names the Kafka error the sidecar's reason names); the local
operator runs the operator's own round (`rounds.plan_round`/`settle_round`): it
remembers elections (grace) and the restarts it had carried out (cooldown), and keeps
an hour of history, as the operator does; the demo's policy is one the API server
accepts; a run whose first event is never written fails as not started, and its row
counts no lost events; a fault's row that saw a verdict its scenario forbids (a
refusal's restart verdicts) fails even though its expected verdict came; what a
scenario's first restart undoes is its row's (S1's refusals, lifted once), and the
modules that run a scenario name none.
"""

from __future__ import annotations

import argparse
import json
import re
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import pytest

from hangwatch.contracts import Verdict
from hangwatch_demo.actuation import alert_subject, restart
from hangwatch_demo.job_sizing import CONTROL_WATCH_SECONDS, RATE_PER_SECOND, job_options
from hangwatch_demo.local_operator import DEMO_POLICY, LocalOperator
from hangwatch_demo.row_scoring import action_summary, score_row
from hangwatch_demo.runner import NotStartedError, _until_started
from hangwatch_demo.scenario_run import ScenarioRun, Setup
from hangwatch_demo.scenarios import SCENARIOS, Context, Timing
from hangwatch_demo.sidecars import announced_port, executor_pod, sidecar_argv
from hangwatch_demo.spark_cluster import Executor, LineStream, executors_of
from hangwatch_operator.decisions import Decision
from hangwatch_operator.operations import Operation, Outcome, Suppression
from hangwatch_operator.sidecar_status import PodReport, SidecarReport
from hangwatch_sidecar.settings import SidecarSettings, add_arguments, from_args
from hangwatch_testing.structural import validation_errors

APP = "app-20261122053206-0000"


def _fake_proc(root: Path, pid: int, args: list[str], cwd: Path | None = None) -> None:
    (root / str(pid)).mkdir(parents=True)
    (root / str(pid) / "cmdline").write_bytes(b"\0".join(a.encode() for a in args) + b"\0")
    if cwd is not None:
        (root / str(pid) / "cwd").symlink_to(cwd.resolve())


def _executor_args(executor_id: str, app: str = APP) -> list[str]:
    return [
        "/usr/lib/jvm/java-17/bin/java", "-cp", "/x/jars/*", "-Xmx512M",
        "org.apache.spark.executor.CoarseGrainedExecutorBackend",
        "--driver-url", "spark://CoarseGrainedScheduler@192.0.2.2:37175",
        "--executor-id", executor_id, "--hostname", "192.0.2.2", "--cores", "1",
        "--app-id", app, "--worker-url", "spark://Worker@192.0.2.2:46688",
    ]  # fmt: skip


def test_executors_are_found_by_command_line_for_this_application_only(tmp_path: Path) -> None:
    """An executor of the application names its id and runs in its work directory; one of
    another application started in the same second (the same id) runs in that one's."""
    proc, work = tmp_path / "proc", tmp_path / "work"
    _fake_proc(proc, 300, _executor_args("10"), work / APP / "10")
    _fake_proc(proc, 200, _executor_args("2"), work / APP / "2")
    _fake_proc(proc, 100, _executor_args("1", app="app-other-0001"), work / "app-other-0001" / "1")
    _fake_proc(proc, 500, _executor_args("2"), tmp_path / "other-home" / "work" / APP / "2")
    _fake_proc(proc, 600, _executor_args("3"))  # its working directory unreadable
    _fake_proc(proc, 400, ["python3", "-m", "pyspark.daemon"])
    (proc / "self").mkdir()
    found = executors_of(APP, work, proc)
    assert [(e.id, e.pid) for e in found] == [("2", 200), ("10", 300)]
    assert found[0].work_dir == tmp_path / "work" / APP / "2"
    assert found[0].telemetry_dir == tmp_path / "work" / APP / "2" / "hangwatch-telemetry"
    pattern = found[0].process_pattern
    joined = [" ".join(_executor_args(i)) for i in ("2", "10", "20")]
    assert pattern in joined[0] and pattern not in joined[1] and pattern not in joined[2]
    assert pattern.endswith("--worker-url spark://Worker@192.0.2.2:46688"), pattern


def test_sidecar_command_line_carries_every_setting() -> None:
    settings = SidecarSettings(
        bootstrap="127.0.0.1:9092,127.0.0.1:9093",
        topics="events",
        port=0,
        telemetry_dir="/tmp/work/app/0/hangwatch-telemetry",
        probe_interval_seconds=1.0,
        stall_seconds=5.0,
        heartbeat_seconds=4.0,
        exit_when_gone="--executor-id 0 --hostname 192.0.2.2 --cores 1 --app-id app-1",
    ).validate()
    argv = sidecar_argv(settings)
    assert argv[1:4] == ["-m", "hangwatch", "sidecar"]
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    assert from_args(parser.parse_args(argv[4:]), environ={}) == settings


def test_port_is_read_from_the_started_line(tmp_path: Path) -> None:
    log = tmp_path / "sidecar-exec-0.log"
    assert announced_port(log) is None  # not written yet
    log.write_text('{"msg":"probing"}\nnot json\n')
    assert announced_port(log) is None
    with log.open("a") as fh:
        fh.write(json.dumps({"msg": "sidecar started", "port": 41234}) + "\n")
    assert announced_port(log) == 41234


def test_pipeline_progress_arrives_line_by_line() -> None:
    lines: list[str] = []
    stream = LineStream(lines.append)
    print("[pipeline 5.0 s] tasks 0/8", file=stream, flush=True)
    stream.write("[pipeline 10")
    assert lines == ["[pipeline 5.0 s] tasks 0/8"]
    stream.write(".0 s] tasks 2/8\n\n")
    assert lines == ["[pipeline 5.0 s] tasks 0/8", "[pipeline 10.0 s] tasks 2/8"]


def test_each_run_outlasts_its_scenario_and_only_s4_logs_client_debug_lines() -> None:
    timing = Timing()
    for scenario in SCENARIOS.values():
        options = job_options(scenario, timing, "127.0.0.1:9092")
        seconds = (options.events or 0) / RATE_PER_SECOND
        watched = (
            min(scenario.bound(timing), CONTROL_WATCH_SECONDS)
            if scenario.control
            else scenario.bound(timing)
        )
        if scenario.idles_after_run:  # the run ends first: the watch is its producers' idling
            assert seconds > timing.stall_seconds, scenario.name
        else:
            assert seconds > watched + 4, scenario.name
        assert options.rate_per_second == RATE_PER_SECOND
        wedged_logger = scenario.seed == "S4" and scenario.producer == "wrapper"
        assert ("debug" in options.producer_conf) == wedged_logger, scenario.name
        if scenario.producer == "jvm":  # Spark's sink: only its JVM producer's kafka.* options
            assert options.producer_conf == {} and options.sink.startswith("connector")
            assert dict(options.sink_options) == scenario.producer_conf, scenario.name
            continue
        assert options.sink == "wrapper" and not options.sink_options
        assert options.producer_conf["message.timeout.ms"] == "10000"
    runs = {job_options(SCENARIOS["healthy"], timing, "b:1").run_id for _ in range(3)}
    assert len(runs) == 3, "every run has its own id (read back separately)"


def test_action_cell_names_restarts_then_suppressions_then_alerts() -> None:
    cell = action_summary
    assert cell([], []) == "none"
    assert (
        cell(["alert exec-0 (cluster_unreachable)", "alert exec-1 (cluster_unreachable)"], [])
        == "alert only (cluster_unreachable)"
    )
    suppressed = "restart exec-1 suppressed: cooldown"
    assert cell(["alert exec-1 (producer_hung)", suppressed], []) == suppressed
    both = [("exec-0", "metadata_stale"), ("exec-1", "metadata_stale")]
    assert cell([suppressed], both) == "restart exec-0, exec-1 (metadata_stale)"


def test_an_alert_on_refused_writes_names_the_error_its_reason_names() -> None:
    reason = (
        "writes to topic events refused: MSG_SIZE_TOO_LARGE (MESSAGE_TOO_LARGE), 8 times; "
        "the next producer meets the same refusal, a restart cannot help"
    )
    subject = alert_subject(Verdict.WRITES_REJECTED, (reason,))
    assert subject == "writes_rejected: MSG_SIZE_TOO_LARGE"
    assert action_summary([f"alert exec-0 ({subject})"], []) == (
        "alert only (writes_rejected: MSG_SIZE_TOO_LARGE)"
    )
    assert alert_subject(Verdict.WRITES_REJECTED, ("refused, no name given",)) == (
        "writes_rejected"
    )
    assert alert_subject(Verdict.WRITES_REJECTED, ()) == "writes_rejected"
    # other verdicts' alerts name the verdict only, whatever their reasons say
    assert alert_subject(Verdict.BROKER_DEGRADED, (reason,)) == "broker_degraded"


def test_local_operator_keeps_the_election_grace_like_the_operator() -> None:
    executor = Executor("0", 1, Path("/tmp/exec-0"))
    pod = executor_pod(executor, 4040, APP)

    def report(verdict: Verdict) -> PodReport:
        status = SidecarReport(verdict=verdict, since=0.0, reasons=(), brokers=(), evaluated_ts=0.0)
        return PodReport(pod=pod, status=status)

    carried: list[Decision] = []

    def carry_out(decision: Decision) -> Decision:
        carried.append(decision)
        return replace(decision, note="executor JVM killed")

    operator = LocalOperator()
    operator.decide([report(Verdict.LEADER_ELECTION)], 1000.0, carry_out)
    within = operator.decide([report(Verdict.PRODUCER_HUNG)], 1002.0, carry_out)
    restart = next(d for d in within if d.operation is Operation.RESTART)
    assert restart.outcome is Outcome.SUPPRESSED
    assert restart.suppression is Suppression.LEADER_ELECTION
    assert carried == []
    after = operator.decide([report(Verdict.PRODUCER_HUNG)], 1010.0, carry_out)
    restart = next(d for d in after if d.operation is Operation.RESTART)
    assert restart.outcome is Outcome.ACTED
    assert [d.key for d in carried] == [restart.key] and restart.note == "executor JVM killed"
    again = operator.decide([report(Verdict.PRODUCER_HUNG)], 1012.0, carry_out)
    restart = next(d for d in again if d.operation is Operation.RESTART)
    assert restart.suppression is Suppression.COOLDOWN, "the restart is remembered"


def test_local_operator_keeps_an_hour_of_history_like_the_operator() -> None:
    """The demo's history is trimmed as the operator's (it once grew without bound)."""
    executor = Executor("0", 1, Path("/tmp/exec-0"))
    hung = SidecarReport(
        verdict=Verdict.PRODUCER_HUNG, since=0.0, reasons=(), brokers=(), evaluated_ts=0.0
    )
    operator = LocalOperator()
    for hour in range(3):
        pod = executor_pod(Executor(str(hour), 1, executor.work_dir), 4040, APP)
        operator.decide([PodReport(pod=pod, status=hung)], 3600.0 * hour, lambda d: d)
    assert [r.pod for r in operator.history.records] == ["demo/exec-2"] * 2  # restart, alert
    assert {r.time for r in operator.history.records} == {7200.0}


def test_the_demo_policy_is_one_the_api_server_accepts() -> None:
    assert validation_errors(DEMO_POLICY) == []


class _EndsAt:
    """A topic whose end offsets sum to `total` (plain producers' progress)."""

    def __init__(self, total: int) -> None:
        self.written = total

    def total(self) -> int:
        return self.written


def _unstarted_run(job_running: bool) -> tuple[SimpleNamespace, SimpleNamespace]:
    scenario = SCENARIOS["jvm-frozen-leader"]
    run = SimpleNamespace(
        setup=SimpleNamespace(
            scenario=scenario, timing=replace(Timing(), probe_interval_seconds=0.01)
        ),
        ends=_EndsAt(0),
        polls=0,
    )
    run.poll = lambda: setattr(run, "polls", run.polls + 1) or []
    job = SimpleNamespace(running=job_running, error="the job ended" if not job_running else None)
    return run, job


def test_a_run_that_never_writes_fails_as_not_started_never_as_lost_events() -> None:
    run, job = _unstarted_run(job_running=False)
    with pytest.raises(NotStartedError, match="not started: no event of the run written"):
        _until_started(run, job)  # type: ignore[arg-type]
    run.ends.written = 5  # the first event written: started, the wait is over
    job.running = True
    _until_started(run, job)  # type: ignore[arg-type]


def test_the_row_of_a_run_that_never_started_counts_no_lost_events() -> None:
    scenario = SCENARIOS["jvm-frozen-leader"]
    run = SimpleNamespace(
        setup=SimpleNamespace(scenario=scenario, timing=Timing()),
        changes=[],
        actions=[],
        restarted=[],
        detect=None,
        restart_at=None,
        longest_silence=None,
        silence_cleared=[],
        reasons=[],
        problems=["not started: no event of the run written within 180 s"],
        started=False,
    )
    row = score_row(run, 4200, 4200, 0, None, None)  # type: ignore[arg-type]
    assert row.not_started and row.lost == 0 and not row.ok
    run.started, run.problems = True, []
    row = score_row(run, 4200, 7, 0, None, None)  # type: ignore[arg-type]
    assert not row.not_started and row.lost == 7 and not row.ok


def test_a_refusal_row_that_saw_a_restart_verdict_fails() -> None:
    scenario = SCENARIOS["wrapper-message-too-large"]
    assert not scenario.control and not scenario.restart_helps
    assert {Verdict.PRODUCER_HUNG, Verdict.METADATA_STALE} <= scenario.forbidden
    run = SimpleNamespace(
        setup=SimpleNamespace(scenario=scenario, timing=Timing()),
        changes=[(4.0, "exec-0 writes_rejected")],
        actions=["alert exec-0 (writes_rejected: MSG_SIZE_TOO_LARGE)"],
        restarted=[],
        detect=4.0,
        restart_at=None,
        longest_silence=None,
        silence_cleared=[],
        reasons=[],
        problems=[],
        started=True,
    )
    row = score_row(run, 4000, 0, 0, 8.0, None)  # type: ignore[arg-type]
    assert row.ok and row.verdict == "writes_rejected"
    run.changes.insert(0, (2.0, "exec-1 metadata_stale"))
    assert not score_row(run, 4000, 0, 0, 8.0, None).ok  # type: ignore[arg-type]


def test_the_first_restart_undoes_what_its_scenario_says_and_only_the_first() -> None:
    """S1's row says its first restart lifts the lab's refusals (a new client in the
    incident); the actuation does it on the first restart only, for any scenario that
    says so, and never for one that does not."""
    lifted: list[str] = []
    lab = SimpleNamespace(restore=lambda: lifted.append("restore"), bootstrap="")
    executors = [SimpleNamespace(id=str(i), pid=100 + i) for i in (1, 2)]
    for name, expected in (("s1-stale-metadata", ["restore"]), ("s2-stuck-after-election", [])):
        lifted.clear()
        scenario = SCENARIOS[name]
        run = ScenarioRun(
            Setup(  # type: ignore[arg-type]
                scenario,
                Timing(),
                lab,
                SimpleNamespace(executors=lambda: executors, kill=lambda *a: None),
                None,
                None,
                lambda message: None,
                SimpleNamespace(action=lambda *a: None, fault_end=lambda *a: None),
            )
        )
        run.context = Context(lab=lab, wedge_file=Path("wedge"))  # type: ignore[arg-type]
        for executor in executors:
            pod = SimpleNamespace(executor_id=executor.id, name=f"exec-{executor.id}")
            decision = SimpleNamespace(
                pod=pod, verdict=scenario.expect, operation=Operation.RESTART
            )
            restart(run, decision)  # type: ignore[arg-type]
        assert lifted == expected, name
        assert [name for name, _ in run.restarted] == ["exec-1", "exec-2"]


def test_the_runner_knows_no_scenario_by_name() -> None:
    """What is particular to a scenario is in its row (`scenarios`): the modules that
    run one never compare a scenario's seed or name, nor name a seed."""
    import ast

    import hangwatch_demo

    package = Path(hangwatch_demo.__file__).parent
    for module in ("runner", "actuation", "job_sizing", "row_scoring", "scenario_run"):
        tree = ast.parse((package / f"{module}.py").read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Compare):
                names = {n.attr for n in ast.walk(node) if isinstance(n, ast.Attribute)}
                assert not {"seed", "name"} & names, (module, ast.unparse(node))
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                assert not re.fullmatch(r"S\d( control)?", node.value), (module, node.value)
