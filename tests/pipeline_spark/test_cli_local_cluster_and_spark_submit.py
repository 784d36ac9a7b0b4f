"""The pipeline as users start it: `hangwatch pipeline run|verify` and `spark-submit job.py`.

Covered (real processes, real lab):
- `hangwatch pipeline run --master local-cluster[2,1,1024]`: separate executor JVMs
  (a standalone application id `app-...`), progress lines on stderr, a JSON summary on
  stdout with every event acknowledged, telemetry files written from the executors'
  Python workers (HANGWATCH_TELEMETRY_DIR through spark.executorEnv), then
  `hangwatch pipeline verify --json`: 0 missing, exit 0; and verify expecting more
  events than were sent: the missing ids are named, exit 1; no executor JVM is left;
- `spark-submit pipeline/hangwatch_pipeline/job.py ...` (the cluster entry point, the
  master given to spark-submit): every event acknowledged, exit 0; with `--json` stdout is
  only the JSON summary although spark-submit merges the driver's stderr into it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pyspark

from hangwatch_demo.spark_cluster import executors_of
from hangwatch_lab import Lab
from hangwatch_pipeline import job
from hangwatch_testing.processes import run_hangwatch
from hangwatch_testing.waiting import wait_for

from .helpers import TelemetryWatcher

SPARK_SUBMIT = Path(pyspark.__file__).parent / "bin" / "spark-submit"


def _env() -> dict[str, str]:
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable)
    env.pop("HANGWATCH_TELEMETRY_DIR", None)
    return env


EXECUTORS_EXIT_SECONDS = 180.0
"""How long the executor JVMs may take to exit once `pipeline run` has: they stop when
the driver's JVM does, and a JVM's shutdown under the full suite's load (the load average
above 20 on 2 cores) took more than 30 s once. A JVM still there after this is a leak."""


def _executor_logs(logs: Path) -> str:
    """The end of each executor's stderr in the standalone worker's directory."""
    ends = [f"{f}:\n{f.read_text(errors='replace')[-2000:]}" for f in sorted(logs.glob("*/stderr"))]
    return "\n".join(ends) or f"no executor logs in {logs}"


def _hangwatch(*argv: str, timeout: float) -> subprocess.CompletedProcess[str]:
    return run_hangwatch("pipeline", *argv, timeout=timeout, env=_env())


def test_cli_on_local_cluster_then_verify(spark_lab: Lab, tmp_path: Path) -> None:
    telemetry = tmp_path / "telemetry"
    telemetry.mkdir()
    with TelemetryWatcher(telemetry).running() as watcher:
        run = _hangwatch(
            "run", "--bootstrap", spark_lab.bootstrap, "--topic", "cli", "--events", "20000",
            "--master", "local-cluster[2,1,1024]", "--run-id", "cli-run-1",
            "--progress-seconds", "1", "--telemetry-dir", str(telemetry), "--json",
            timeout=240,
        )  # fmt: skip
    assert run.returncode == 0, run.stderr[-3000:]
    summary = json.loads(run.stdout)
    assert summary["ok"] is True and summary["acknowledged"] == 20_000
    assert summary["master"] == "local-cluster[2,1,1024]"
    assert summary["application_id"].startswith("app-"), "not separate executor JVMs"
    assert "[pipeline " in run.stderr and "events acknowledged by finished tasks" in run.stderr
    docs = watcher.all()
    assert docs, "no telemetry from the executors' tasks"
    assert {d["identity"]["application_id"] for d in docs} == {summary["application_id"]}
    # Standalone workers keep each executor's logs in $SPARK_HOME/work/<app>: removed once
    # the JVMs are gone, shown if one stays.
    work = SPARK_SUBMIT.parents[1] / "work"
    logs = work / summary["application_id"]
    wait_for(
        lambda: not executors_of(summary["application_id"], work),
        EXECUTORS_EXIT_SECONDS,
        "executor JVMs to exit",
        context=lambda: _executor_logs(logs),
    )
    shutil.rmtree(logs, ignore_errors=True)

    verified = _hangwatch(
        "verify", "--bootstrap", spark_lab.bootstrap, "--topic", "cli", "--expect", "20000",
        "--json", timeout=60,
    )  # fmt: skip
    assert verified.returncode == 0, verified.stdout + verified.stderr
    result = json.loads(verified.stdout)
    assert (result["run_id"], result["missing"], result["present"]) == ("cli-run-1", 0, 20_000)

    short = _hangwatch(
        "verify", "--bootstrap", spark_lab.bootstrap, "--topic", "cli", "--expect", "20002",
        timeout=60,
    )  # fmt: skip
    assert short.returncode == 1
    assert "missing      2 (first: cli-run-1-20000, cli-run-1-20001)" in short.stdout


def test_spark_submit_runs_the_job_file(spark_lab: Lab) -> None:
    submitted = subprocess.run(
        [
            str(SPARK_SUBMIT), "--master", "local[2,2]", "--conf", "spark.ui.enabled=false",
            job.__file__, "--bootstrap", spark_lab.bootstrap, "--topic", "submit",
            "--events", "5000", "--run-id", "submit-1", "--json", "--progress-seconds", "0.2",
        ],
        capture_output=True, text=True, timeout=180, check=False, env=_env(),
    )  # fmt: skip
    assert submitted.returncode == 0, submitted.stderr[-3000:]
    # spark-submit merges the driver's stderr into stdout: with --json, nothing but the JSON
    summary = json.loads(submitted.stdout)
    assert summary["ok"] is True and summary["acknowledged"] == 5_000
    assert summary["master"] == "local[2,2]"
