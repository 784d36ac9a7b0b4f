"""Spark sessions for tests and benchmarks: a live driver to read, and a clean stop.

`local_cluster_driver` starts `local-cluster[1,2,1024]` - a standalone worker whose
executor is a separate JVM, as on Kubernetes - with its UI (and REST API) on a free
port, from a private SPARK_HOME under `work` (the worker's `work/` directory stays
there), waits for the executor to register and yields where to read it (the Spark
view's tests and benchmark). `stop_spark` stops a session *and* the JVM pyspark
launched for it, so no java process outlives a test module.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from pyspark import SparkContext
from pyspark.sql import SparkSession

from hangwatch.spark_driver import DriverUi, parse_ui_url
from hangwatch_demo.spark_cluster import private_spark_home
from hangwatch_sidecar.spark.client import API, DriverClient
from hangwatch_testing.waiting import wait_for

MASTER = "local-cluster[1,2,1024]"
FIRST_ANSWER_SECONDS = 60.0
"""A driver initialises its REST API on the first request: 13-38 s on a loaded machine."""
JVM_EXIT_SECONDS = 30.0


@dataclass(frozen=True)
class Driver:
    """A running application and where its REST API describes its one executor."""

    spark: SparkSession
    ui: DriverUi
    application_id: str
    executor_id: str
    work_root: Path
    """The standalone worker's `work/` (its executors' working directories)."""


@contextmanager
def local_cluster_driver(
    work: Path,
    app_name: str,
    jars: Sequence[Path] = (),
    conf: Mapping[str, str] | None = None,
    cores: int = 2,
) -> Iterator[Driver]:
    """The application (see the module docstring), its executor with `cores` task slots;
    PYSPARK_PYTHON and SPARK_HOME are set for its lifetime and restored after. `conf`:
    more Spark properties of the application."""
    saved = {name: os.environ.get(name) for name in ("PYSPARK_PYTHON", "SPARK_HOME")}
    os.environ["PYSPARK_PYTHON"] = sys.executable
    home = private_spark_home(work)
    os.environ["SPARK_HOME"] = str(home)
    builder = (
        SparkSession.builder.master(MASTER.replace(",2,", f",{cores},"))
        .appName(app_name)
        .config("spark.executor.memory", "512m")
        .config("spark.ui.port", "0")
        .config("spark.ui.showConsoleProgress", "false")
    )
    for key, setting in (conf or {}).items():
        builder = builder.config(key, setting)
    if jars:
        paths = ",".join(str(j) for j in jars)
        builder = builder.config("spark.jars", paths).config(
            "spark.driver.extraClassPath", os.pathsep.join(str(j) for j in jars)
        )
    spark = builder.getOrCreate()
    try:
        spark.sparkContext.setLogLevel("ERROR")
        ui = parse_ui_url(spark.sparkContext.uiWebUrl or "")
        app = spark.sparkContext.applicationId
        client = DriverClient(ui, FIRST_ANSWER_SECONDS)
        executors = wait_for(
            lambda: [e["id"] for e in client.get_json(f"{API}/{app}/executors")
                     if e["id"] != "driver"],
            120, "the executor to register",
        )  # fmt: skip
        yield Driver(spark, ui, app, executors[0], home / "work")
    finally:
        stop_spark(spark)
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def stop_spark(spark: SparkSession) -> None:
    """Stop the session, then end the JVM pyspark launched and forget its gateway."""
    gateway = SparkContext._gateway
    spark.stop()
    if gateway is None:
        return
    proc = getattr(gateway, "proc", None)
    gateway.shutdown()
    if proc is not None:
        if proc.stdin is not None:
            proc.stdin.close()  # the JVM exits when its stdin closes
        try:
            proc.wait(JVM_EXIT_SECONDS)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    SparkContext._gateway = None
    SparkContext._jvm = None
