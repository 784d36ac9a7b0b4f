"""`hangwatch demo` on a short subset: right verdicts, right actions, nothing lost.

Covers: the real command (subprocess, `--json`) replays, on the reference PySpark
pipeline running on `local-cluster` executors with one sidecar process each, S4 (one
executor's I/O thread blocked -> that executor's sidecar says producer_hung -> then
the operator's code restarts exactly that executor: its JVM is killed, Spark replaces
it and retries the lost task -> then events flow again, with duplicates from the
retry; each step after the one before, not within a time bound) and a
full outage (every executor cluster_unreachable -> no restart, alert only), with 0
lost events in both and exit code 0; every sidecar log line names its executor pod
(`--keep`); nothing the demo started (Spark JVMs, Python workers, sidecars, mock
cluster) outlives it; an unknown scenario is a one-line usage error (exit 3); no
kernel rule is left behind. The same run's `--report`: its path is printed last, and
the page, opened in headless Chromium, shows both scenarios' timelines (each image
loaded, the figure's size), fetches nothing and logs nothing to the console; the
record holds each scenario's fault, the restart of the executor that said
producer_hung, and the outage's alert.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

from hangwatch_demo.report import records
from hangwatch_lab import netfilter
from hangwatch_testing.browser import open_page
from hangwatch_testing.processes import command_lines
from hangwatch_testing.waiting import wait_for


def _demo(*args: str) -> tuple[subprocess.CompletedProcess[str], int]:
    with subprocess.Popen(
        [sys.executable, "-m", "hangwatch", "demo", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    ) as proc:
        out, err = proc.communicate(timeout=300)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err), proc.pid


def test_subset_reaches_expected_verdicts_and_actions_without_loss(
    kernel_faults: None, tmp_path: Path
) -> None:
    report = tmp_path / "report"
    proc, pid = _demo(
        "--scenario", "s4-blocked-io-thread", "--scenario", "full-outage", "--json",
        "--keep", str(tmp_path), "--report", str(report),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    rows = {r["scenario"]: r for r in json.loads(proc.stdout)["scenarios"]}
    s4, outage = rows["s4-blocked-io-thread"], rows["full-outage"]
    assert s4["verdict"] == "producer_hung" and s4["restarts"] == 1
    assert re.fullmatch(r"restart exec-\d+ \(producer_hung\)", s4["action"]), s4["action"]
    detected, restarted, again = (
        s4["detect_seconds"], s4["restart_seconds"], s4["progress_again_seconds"]
    )  # fmt: skip
    assert detected is not None and restarted is not None and again is not None, s4
    assert 0 <= detected <= restarted < again, s4
    assert s4["task_retries"] >= 1 and s4["duplicates"] > 0, "the lost task ran again"
    assert outage["verdict"] == "cluster_unreachable"
    assert outage["action"] == "alert only (cluster_unreachable)" and outage["restarts"] == 0
    for row in rows.values():
        assert row["lost"] == 0 and row["events"] > 100 and row["ok"], row
    assert "[1/2] s4-blocked-io-thread" in proc.stderr
    assert proc.stderr.strip().splitlines()[-1] == f"report: {report / 'report.html'}"
    _report_shows_both_scenarios(report, s4["action"].split()[1])
    _sidecar_logs_name_their_executor(tmp_path)
    assert netfilter.list_chains(pid) == [], "the demo left kernel rules behind"
    # The demo's Spark directory lives under --keep: every process it started mentions it.
    # Spark's worker ends executor JVMs asynchronously after the application stops, which
    # can take seconds on a loaded machine; none may still run after that.
    wait_for(
        lambda: not _processes_mentioning(str(tmp_path)),
        30,
        "the demo's Spark processes to end",
        context=lambda: "\n".join(_processes_mentioning(str(tmp_path))),
    )


def _report_shows_both_scenarios(report: Path, restarted: str) -> None:
    story = records.read_run((report / records.EVENTS_FILE).read_text())
    assert story.end is not None
    s4, outage = story.finished
    assert (s4.start.scenario, outage.start.scenario) == ("s4-blocked-io-thread", "full-outage")
    assert s4.fault_at is not None and outage.fault_at is not None
    [restart] = [a for a in s4.of(records.Action) if a.operation == "restart"]
    assert (restart.executor, restart.outcome) == (restarted, "acted")
    hung = [v for v in s4.of(records.VerdictChange) if v.verdict == "producer_hung"]
    assert hung and hung[0].executor == restarted and hung[0].at <= restart.at
    assert s4.fault_at < s4.of(records.Detected)[0].at <= restart.at
    assert [a.operation for a in outage.of(records.Action)] == ["alert"] * len(
        outage.of(records.Action)
    ) and outage.of(records.Action)
    assert len(s4.of(records.Progress)) > 5
    view = open_page(report / "report.html")
    assert [i.alt for i in view.images] == [
        "timeline of s4-blocked-io-thread",
        "timeline of full-outage",
    ]
    pngs = sorted(report.glob("timeline-*.png"))
    assert len(pngs) == 2
    for image, png in zip(view.images, pngs, strict=True):
        width, height = (
            int.from_bytes(png.read_bytes()[16:20]),
            int.from_bytes(png.read_bytes()[20:24]),
        )
        assert image.complete and (image.width, image.height) == (width, height), image
    assert view.fetched == [] and view.console == []


def _sidecar_logs_name_their_executor(kept: Path) -> None:
    """Every line of every sidecar's kept log carries the pod and executor it watches."""
    logs = sorted(kept.glob("hangwatch-demo-*/sidecar-exec-*.log"))
    assert len(logs) >= 4, "two executors per scenario, one replaced in S4"
    for log in logs:
        executor = log.stem.removeprefix("sidecar-exec-")
        records = [json.loads(line) for line in log.read_text().splitlines() if line]
        assert records, log
        assert all(
            (r.get("pod"), r.get("executor")) == (f"exec-{executor}", executor) for r in records
        ), log
    assert list(kept.glob("spark/work/app-*/*/stderr")), "executor logs are kept"


def _processes_mentioning(text: str) -> list[str]:
    """Command lines of running processes that contain `text` (the demo's Spark dir)."""
    lines = (" ".join(args) for args in command_lines().values())
    return [line for line in lines if text in line]


def test_unknown_scenario_is_a_one_line_usage_error() -> None:
    proc, _ = _demo("--scenario", "s9-nonsense")
    assert proc.returncode == 3
    assert proc.stderr.strip().count("\n") == 0 and "unknown scenario" in proc.stderr
