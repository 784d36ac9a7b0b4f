"""The Spark 3.5 line: every Spark-facing path, by pytest under the 3.5 line's Python.

One environment holds one `pyspark`, and the suite's is the default line's (4.x). So
this test runs the tests below - the same ones that cover each path on 4.x, unchanged -
in a pytest subprocess with the interpreter of the 3.5 line's virtualenv
(`hangwatch_testing.spark_line_env`, built by scripts/setup.sh: pyspark 3.5.7, its
connector `spark-sql-kafka-0-10_2.12:3.5.7` with kafka-clients 3.4.1 from the jar cache),
this checkout's packages first on its PYTHONPATH. Each of them starts its Spark from
that interpreter, so the driver, its REST API, the executor JVMs, the Python workers and
the connector are all 3.5's. Covered on 3.5:

- Spark's view (`tests/sidecar/test_spark_view_on_a_real_driver.py`): the executors,
  stages and task summary answers, thread dumps with tasks by TID and the real Java
  client's states, a real sidecar's `producer_hung` from the dump;
- the failure budget (`tests/sidecar/test_failure_budget_on_a_real_driver.py`): the
  version, environment and allexecutors answers, each killed executor spending it, the
  refused restart, and Spark's own default budget computed by 3.5's JVM equal to the
  sidecar's;
- the pipeline on both sinks: the wrapper (batch, telemetry from 3.5's TaskContext) and
  Spark's Kafka sink batch and streaming (`tests/pipeline_spark`), 0 events lost;
- hangs and controls with the sidecars' verdicts, 0 events lost: `hangwatch demo`'s
  plain-producer S4 (restarted) and its idle control (left alone), and under Spark's
  Kafka sink (3.5's connector and its kafka-clients) the wedged interceptor, batch and
  streaming (`producer_hung` from 3.5's thread dump, that executor restarted) and a real
  election (never a restart verdict).

Warnings are errors as in every run, except unclosed sockets (`PYSPARK_35_SOCKETS`: a
leak of pyspark 3.5's own). The subset runs in four parts (`PARTS`), one test and one
pytest subprocess each, so that no test of the suite runs for many minutes. A part fails
unless every test it selects was collected and passed: a test skipped, missing or failed
is named in the failure with pytest's own report of it. The subprocess's output (pytest
-v, with durations) is printed as it comes: `pytest -s` shows it live, a failure shows it
in the captured output. The subprocess runs in its own session and is ended (SIGTERM,
then SIGKILL) with everything it started on every exit path; should this pytest itself
be killed, the kernel kills it too (PR_SET_PDEATHSIG, as the lab's brokers).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from hangwatch_lab.kafka import DIE_WITH_PARENT
from hangwatch_pipeline.spark_kafka import line_named
from hangwatch_testing.spark_line_env import ROOT, python_of

LINE = line_named("3.5")
PARTS = {
    "spark-view-and-failure-budget": (
        (
            "tests/sidecar/test_spark_view_on_a_real_driver.py",
            "tests/sidecar/test_failure_budget_on_a_real_driver.py",
        ),
        13,
    ),
    "pipeline-on-both-sinks": (
        (
            "tests/pipeline_spark/test_connector_sink.py",
            "tests/pipeline_spark/test_pipeline_delivers_through_faults.py"
            "::test_healthy_run_delivers_every_event_exactly_once",
            "tests/pipeline_spark/test_pipeline_inputs_and_telemetry.py"
            "::test_tasks_write_the_documented_telemetry",
        ),
        5,
    ),
    "demo-plain-producers-hang-and-idle": (
        (
            "tests/demo/test_demo_plain_producers.py"
            "::test_blocked_callback_restarts_that_executor_and_idle_producers_are_left_alone",
        ),
        1,
    ),
    "demo-spark-sink-wedge-and-election": (
        (
            "tests/demo/test_demo_jvm_sink_faults.py"
            "::test_spark_kafka_sink_wedge_restarts_that_executor_and_an_election_is_left_alone",
        ),
        1,
    ),
}
"""The subset, in four parts, each one pytest subprocess (one test of this module, so that
none runs longer than a few minutes: the two demo tests as one part took 4 min 51 s and
5 min 34 s under the full suite's load): the tests each part selects (a module's tests,
or one test) and how many they are; each must pass."""
PACKAGES = ("core", "lab", "sidecar", "pipeline", "operator", "demo", "testing", "producer")
HIDDEN = ("SPARK_HOME", "PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON", "PYTEST_XDIST_WORKER",
          "PYTEST_XDIST_WORKER_COUNT", "PYTEST_CURRENT_TEST", "PYTEST_ADDOPTS")  # fmt: skip
"""The outer run's settings that must not reach the 3.5 line's pytest and Spark."""
END_SECONDS = 30.0
PYSPARK_35_SOCKETS = "ignore:unclosed <socket.socket:ResourceWarning"
"""pyspark 3.5.7 leaves the local socket of every `collect()` to the garbage collector
(pyspark/rdd.py `_load_from_socket`: "The socket will be automatically closed when
garbage-collected"; 4.x closes it in a `finally`), which pyproject.toml's
`filterwarnings = error` turns into a failure of whichever test collects. The 3.5 run
ignores unclosed sockets; the same tests on 4.x (the suite's own run) still fail on any
socket hangwatch leaves open."""


def _environment() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in HIDDEN}
    ours = [str(ROOT / p) for p in PACKAGES] + [str(ROOT)]
    env["PYTHONPATH"] = os.pathsep.join(ours + [p for p in [env.get("PYTHONPATH")] if p])
    return env


def _end(proc: subprocess.Popen[str]) -> None:
    """The subprocess and everything in its session: SIGTERM, then SIGKILL."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        if proc.poll() is not None:
            break
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            break
        try:
            proc.wait(END_SECONDS)
        except subprocess.TimeoutExpired:
            continue
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)  # what it started and left behind
    proc.wait()


def _results(report: Path) -> dict[str, tuple[str, str]]:
    """Test id -> (outcome, pytest's report of a failure) from the JUnit XML."""
    found: dict[str, tuple[str, str]] = {}
    for case in ET.parse(report).getroot().iter("testcase"):
        name = f"{case.get('classname')}::{case.get('name')}"
        outcome, text = "passed", ""
        for child in case:
            if child.tag in ("failure", "error", "skipped"):
                outcome = child.tag if outcome == "passed" else outcome
                text += f"{child.get('message', '')}\n{child.text or ''}"
        found[name] = (outcome, text)
    return found


def _ends(text: str, each: int = 2000) -> str:
    """A failure's report: its start (the assertion) and its end (pytest's location)."""
    if len(text) <= 2 * each:
        return text
    cut = f"[... {len(text) - 2 * each} characters: see the output above ...]"
    return f"{text[:each]}\n{cut}\n{text[-each:]}"


@pytest.mark.timeout(1500)
@pytest.mark.parametrize("part", sorted(PARTS))
def test_every_spark_facing_path_passes_on_spark_3_5(part: str, tmp_path: Path) -> None:
    subset, expected = PARTS[part]
    python = python_of(LINE)
    report = tmp_path / "spark-3.5.xml"
    command = [
        *DIE_WITH_PARENT, str(python), "-m", "pytest", *subset, "-v", "-p", "no:cacheprovider",
        "--durations=0", f"--junitxml={report}", "-o", "junit_family=xunit1",
        f"--basetemp={tmp_path / 'tmp'}", "-W", PYSPARK_35_SOCKETS,
    ]  # fmt: skip
    print(f"Spark {LINE.name} line, {part}: {' '.join(command)}", flush=True)
    with subprocess.Popen(
        command, cwd=ROOT, env=_environment(), stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, text=True, start_new_session=True,
    ) as proc:  # fmt: skip
        try:
            assert proc.stdout is not None
            for line in proc.stdout:
                sys.stdout.write(f"[spark {LINE.name}] {line}")
                sys.stdout.flush()
            code = proc.wait()
        finally:
            _end(proc)
    assert report.is_file(), f"the Spark {LINE.name} run wrote no report (exit {code})"
    results = _results(report)
    version = subprocess.run(
        [str(python), "-c", "import pyspark; print(pyspark.__version__)"],
        capture_output=True, text=True, check=True, env=_environment(), timeout=60,
    ).stdout.strip()  # fmt: skip
    assert version == LINE.version
    bad = {name: r for name, r in results.items() if r[0] != "passed"}
    assert not bad, f"Spark {LINE.name}: {len(bad)} of {len(results)} not passed:\n" + "\n".join(
        f"- {name}: {outcome}\n{_ends(text.strip())}" for name, (outcome, text) in bad.items()
    )
    assert len(results) == expected, sorted(results)
    assert code == 0
