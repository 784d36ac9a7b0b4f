"""Bad configuration of `hangwatch pipeline` is refused in one line, before Spark starts.

Covered (real `hangwatch` processes): missing or malformed bootstrap, empty or missing
topic, malformed rate and duration, negative event counts, unknown master syntax, a
producer property the wrapper or librdkafka refuses, an input path matching nothing,
and verify's --expect: each exits 3 with exactly one line on stderr, no traceback,
and no JVM launched: no Spark output, and the process never imported pyspark or py4j
(nothing else can start Spark's JVM from Python). Importing the pipeline's CLI,
options, events, verify and report modules does not import pyspark. Verify against
brokers it cannot reach exits 2 in one line.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

GOOD = ["--bootstrap", "127.0.0.1:9092", "--topic", "events"]

SPARK_MODULES = ("pyspark", "py4j")

RUN_NOTING_MODULES = f"""
import atexit, os, runpy, sys
def note():
    with open(os.environ["HANGWATCH_TEST_MODULES_FILE"], "w") as out:
        out.write(" ".join(m for m in {SPARK_MODULES!r} if m in sys.modules))
atexit.register(note)
sys.argv = ["hangwatch", "pipeline", *sys.argv[1:]]
runpy.run_module("hangwatch", run_name="__main__", alter_sys=True)
"""
"""`python -m hangwatch pipeline ARGS`, noting at exit which Spark modules were imported."""


def hangwatch(*argv: str, timeout: float = 30.0) -> tuple[int, str, str, str]:
    """Exit code, stdout, stderr and the Spark modules the process imported ("" if none)."""
    with tempfile.TemporaryDirectory() as tmp:
        noted = Path(tmp) / "modules"
        proc = subprocess.run(
            [sys.executable, "-c", RUN_NOTING_MODULES, *argv],
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
            env={**os.environ, "HANGWATCH_TEST_MODULES_FILE": str(noted)},
        )
        assert noted.exists(), f"the process did not reach its exit handlers: {proc.stderr}"
        return proc.returncode, proc.stdout, proc.stderr, noted.read_text()


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["run", "--topic", "events"], "--bootstrap is required"),
        (["run", "--bootstrap", "kafka-0", "--topic", "events"], "'kafka-0' is not host:port"),
        (["run", "--bootstrap", "127.0.0.1:9092"], "--topic must not be empty"),
        (["run", "--bootstrap", "127.0.0.1:9092", "--topic", ""], "--topic must not be empty"),
        (["run", *GOOD, "--topic", "a/b"], "not a valid Kafka topic name"),
        (["run", *GOOD, "--rate", "fast", "--duration", "10s"], "--rate 'fast' is not"),
        (["run", *GOOD, "--rate", "100/min"], "--rate '100/min' is not"),
        (["run", *GOOD, "--rate", "1k/s", "--duration", "soon"], "--duration 'soon' is not"),
        (["run", *GOOD, "--events", "-5"], "--events must be a positive number, got -5"),
        (["run", *GOOD, "--master", "local[2;4]"], "unknown --master 'local[2;4]'"),
        (["run", *GOOD, "--master", "mesos://m:5050"], "unknown --master"),
        (["run", *GOOD, "-X", "acks=0"], "acks=0"),
        (["run", *GOOD, "-X", "linger.ms=soon"], "linger.ms"),
        (["run", *GOOD, "--input", "/nonexistent/*.jsonl"], "matches no file"),
        (["verify", *GOOD], "--expect N is required"),
        (["verify", *GOOD, "--expect", "-1"], "--expect must be a number of events >= 0"),
        (["verify", "--topic", "events", "--expect", "3"], "--bootstrap is required"),
    ],
)
def test_refused_in_one_line_before_spark(argv: list[str], message: str) -> None:
    code, stdout, stderr, spark = hangwatch(*argv)
    assert code == 3, stderr
    assert stdout == ""
    lines = stderr.splitlines()
    assert len(lines) == 1, stderr
    assert lines[0].startswith("hangwatch pipeline: error: ") and message in lines[0]
    assert "Traceback" not in stderr and "Spark" not in stderr
    assert spark == "", f"imported {spark}: Spark could have started"


def test_argument_errors_are_one_line_too() -> None:
    code, _, stderr, _ = hangwatch("run", *GOOD, "--events", "many")
    assert code == 3 and len(stderr.splitlines()) == 1 and "invalid int value" in stderr


def test_pipeline_modules_do_not_import_pyspark() -> None:
    probe = (
        "import sys, hangwatch_pipeline, hangwatch_pipeline.pipeline_cli, "
        "hangwatch_pipeline.run_options, hangwatch_pipeline.events, hangwatch_pipeline.verify, "
        "hangwatch_pipeline.run_report; "
        "sys.exit(1 if 'pyspark' in sys.modules or 'py4j' in sys.modules else 0)"
    )
    assert subprocess.run([sys.executable, "-c", probe], check=False).returncode == 0


def test_verify_against_unreachable_brokers_exits_2_in_one_line() -> None:
    code, _, stderr, _ = hangwatch(
        "verify", "--bootstrap", "127.0.0.1:1", "--topic", "events", "--expect", "5",
        "--timeout-seconds", "2",
    )  # fmt: skip
    assert code == 2 and len(stderr.splitlines()) == 1, stderr
    assert "cannot read the metadata of 'events'" in stderr
