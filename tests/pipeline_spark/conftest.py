"""Fixtures of the Spark pipeline tests: one SparkSession and one lab per module.

`spark` is a `local[2,4]` session (2 cores, 4 attempts per task, UI off) whose tasks
get HANGWATCH_TELEMETRY_DIR through `spark.executorEnv`, with Python workers on this
interpreter. It is stopped at the end of the module together with its JVM.
`spark_lab` is a 3-broker lab for the module; `kafka` hands it to one test and
undoes every fault afterwards, so one test's fault never leaks into the next.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from hangwatch_lab import Lab
from hangwatch_testing.spark_driver import stop_spark

from .helpers import start_spark

TOPICS = {name: 12 for name in ("healthy", "down", "timeout", "authz")} | {
    name: 3
    for name in ("exhausted", "telemetry", "json-input", "csv-input", "bad-input", "cli", "submit")
}
"""One topic per test, so that each verify reads only its own run. The lab's mock
cluster keeps about 5 MB per partition (older records are deleted): 12 partitions
hold well over 200,000 of the pipeline's ~230-byte events."""


@pytest.fixture(scope="module")
def telemetry_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The directory the module's Spark tasks write producer telemetry to."""
    return tmp_path_factory.mktemp("telemetry")


@pytest.fixture(scope="module")
def spark(telemetry_dir: Path, request: pytest.FixtureRequest) -> Iterator[SparkSession]:
    """The module's SparkSession (local[2,4]); its JVM is gone after the module."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("PYSPARK_PYTHON", sys.executable)
        session = start_spark(telemetry_dir, f"hangwatch-tests-{request.module.__name__}")
        try:
            yield session
        finally:
            stop_spark(session)


@pytest.fixture(scope="module")
def spark_lab() -> Iterator[Lab]:
    """A 3-broker lab with the topics of `TOPICS`, for the whole module."""
    with Lab(brokers=3, topics=TOPICS) as running:
        yield running


@pytest.fixture
def kafka(spark_lab: Lab) -> Iterator[Lab]:
    """The module's lab for one test; every fault is undone afterwards."""
    yield spark_lab
    spark_lab.restore()
