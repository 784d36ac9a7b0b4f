"""The example image's job writes every event through hangwatch-producer on real Spark.

Covered: examples/spark-on-kubernetes/orders_job.py (what the example's Dockerfile puts
at /opt/hangwatch/job.py), submitted with spark-submit to a local[2] master (the
project's pyspark) against a real Apache Kafka broker with a rate, a duration, a
partition count and a `-X` property whose `${VAR}` comes from the executor's
environment, reports every event acknowledged, and `hangwatch pipeline verify` finds
every one of them in the topic (0 missing). Its imports and the image's Python are
test_example_image.py's; the 3.9 syntax check is ruff's (per-file target py39).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pyspark
import pytest

from hangwatch_lab import Lab
from hangwatch_testing.processes import run_hangwatch

pytestmark = [pytest.mark.xdist_group("spark"), pytest.mark.timeout(900)]

ROOT = Path(__file__).resolve().parents[2]
JOB = ROOT / "examples" / "spark-on-kubernetes" / "orders_job.py"
SPARK_SUBMIT = Path(pyspark.__file__).parent / "bin" / "spark-submit"


def test_every_event_is_acknowledged_and_in_the_topic() -> None:
    with Lab(brokers=1, engine="kafka", topics={"orders": 3}) as lab:
        env = {**os.environ, "ORDERS_ACKS": "all", "PYSPARK_PYTHON": sys.executable}
        env.pop("HANGWATCH_TELEMETRY_DIR", None)
        args = ["--bootstrap", lab.bootstrap, "--topic", "orders", "--rate", "10k/s"]
        args += ["--duration", "2s", "--partitions", "4", "--run-id", "example-1"]
        args += ["-X", "acks=${ORDERS_ACKS}"]
        submitted = subprocess.run(
            [
                str(SPARK_SUBMIT),
                "--master",
                "local[2]",
                "--conf",
                "spark.ui.enabled=false",
                str(JOB),
                *args,
            ],
            capture_output=True,
            text=True,
            env=env,
            timeout=600,
            check=False,
        )
        assert submitted.returncode == 0, submitted.stderr[-3000:]
        assert "run example-1: 20000 of 20000 events acknowledged" in submitted.stdout
        verified = run_hangwatch(
            "pipeline",
            "verify",
            *("--bootstrap", lab.bootstrap, "--topic", "orders"),
            *("--expect", "20000", "--run-id", "example-1"),
            timeout=300,
        )
    assert verified.returncode == 0, verified.stdout + verified.stderr
    assert "missing      0" in verified.stdout
