"""The suite's Spark configuration directory (`hangwatch_testing.spark_conf`): Spark's
defaults for short local runs, `SHORT_RUN_JVM_OPTIONS` for the driver and the executors;
that the JVMs really get them is checked on a real driver
(tests/sidecar/test_spark_view_on_a_real_driver.py)."""

from __future__ import annotations

import os
from pathlib import Path

from hangwatch_demo.spark_cluster import SPARK_CONF
from hangwatch_pipeline.run_options import SHORT_RUN_JVM_OPTIONS, short_run_conf
from hangwatch_testing.spark_conf import defaults_dir, defaults_text


def test_the_suite_points_spark_at_the_short_run_defaults() -> None:
    conf = Path(os.environ["SPARK_CONF_DIR"]) / "spark-defaults.conf"
    assert conf.read_text() == defaults_text()
    lines = [line for line in defaults_text().splitlines() if not line.startswith("#")]
    assert lines == [
        f"spark.driver.defaultJavaOptions {SHORT_RUN_JVM_OPTIONS}",
        f"spark.executor.defaultJavaOptions {SHORT_RUN_JVM_OPTIONS}",
    ]


def test_the_demo_runs_its_jvms_with_the_same_options() -> None:
    assert short_run_conf().items() <= SPARK_CONF.items()


def test_the_directory_is_written_once_and_mended_when_changed(tmp_path: Path) -> None:
    first = defaults_dir(tmp_path)
    assert defaults_dir(tmp_path) == first
    (first / "spark-defaults.conf").write_text("spark.driver.defaultJavaOptions -Xint\n")
    assert (defaults_dir(tmp_path) / "spark-defaults.conf").read_text() == defaults_text()
    assert [p.name for p in first.iterdir()] == ["spark-defaults.conf"]
