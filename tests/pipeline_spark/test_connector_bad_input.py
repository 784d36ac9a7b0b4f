"""The connector sinks' missing prerequisites and bad options: one line, exit 3, no JVM.

Covered (real `hangwatch pipeline run` processes, `--sink connector` and
`connector-streaming`): an installed pyspark of no supported line (a pyspark package
reporting 4.3.0, whose connector Maven Central does not have, first on the path), a
connector jar of the installed pyspark's line missing from the cache, Java absent
(neither on PATH nor under JAVA_HOME), librdkafka's `-X` given to the Java producer's
sinks, options the sink sets itself or that are not producer properties, a non-numeric
timeout, an unknown `acks`,
`--input` or `--rate` with the streaming sink and `--checkpoint` with the batch one:
each is one line on stderr naming what to install, pin or use, exit 3, and no Spark or
JVM output. The cached jars go into sessions hangwatch starts (with the user's own
`spark.jars` after them), never into spark-submit's or the wrapper's.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from hangwatch_pipeline import spark_kafka
from hangwatch_testing.processes import run_hangwatch

GOOD = ["run", "--bootstrap", "127.0.0.1:9092", "--topic", "events", "--events", "10"]


def _run(*argv: str, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    proc = run_hangwatch("pipeline", *argv, timeout=60, env={**os.environ, **(env or {})})
    return proc.returncode, proc.stdout, proc.stderr


def _one_line(code: int, stdout: str, stderr: str, message: str) -> None:
    assert code == 3, stderr
    assert stdout == ""
    lines = stderr.strip().splitlines()
    assert len(lines) == 1, stderr
    assert message in lines[0]
    assert "Traceback" not in stderr and "\tat " not in stderr and "log4j" not in stderr


@pytest.mark.parametrize("sink", ["connector", "connector-streaming"])
def test_a_pyspark_without_a_published_connector_is_refused_with_the_pin(
    tmp_path: Path, sink: str
) -> None:
    fake = tmp_path / "pyspark"
    fake.mkdir()
    (fake / "__init__.py").write_text('__version__ = "4.3.0"\n')
    path = os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")])
    _one_line(
        *_run(*GOOD, "--sink", sink, env={"PYTHONPATH": path}),
        "pyspark 4.3.0 is installed but the Kafka sink's connector is resolved for pyspark "
        + ", ".join(f"{line.version} ({line.name})" for line in spark_kafka.LINES),
    )


def test_a_missing_connector_jar_names_the_jar_and_the_command(tmp_path: Path) -> None:
    line = spark_kafka.installed_line()
    cache = tmp_path / line.version
    cache.mkdir()
    for jar in spark_kafka.jars(line)[1:]:  # everything but the connector itself
        (cache / jar.name).symlink_to(jar)
    code, stdout, stderr = _run(*GOOD, "--sink", "connector",
                                env={spark_kafka.CACHE_ENV: str(tmp_path)})  # fmt: skip
    _one_line(code, stdout, stderr, f"spark-sql-kafka-0-10_{line.scala}-{line.version}")
    assert "scripts/setup.sh" in stderr


def test_absent_java_names_what_to_install(tmp_path: Path) -> None:
    python_dir = Path(sys.executable).parent
    env = {"PATH": str(python_dir), "JAVA_HOME": str(tmp_path)}
    assert not (python_dir / "java").exists()
    _one_line(*_run(*GOOD, "--sink", "connector", env=env), "Java not found")


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--sink", "connector", "-X", "acks=all"], "use --option kafka.KEY=VALUE"),
        (["--sink", "connector", "--option", "kafka.bootstrap.servers=x:1"], "--bootstrap"),
        (["--sink", "connector", "--option", "acks=all"], "is not a producer property"),
        (["--sink", "connector", "--option", "kafka.max.block.ms=soon"], "whole number"),
        (["--sink", "connector", "--option", "kafka.acks=2"], "one of all, -1, 0, 1"),
        (["--option", "kafka.acks=all"], "use -X with the wrapper"),
        (["--sink", "connector", "--checkpoint", "/tmp/c"], "--checkpoint is for"),
        (["--sink", "connector-streaming", "--rate", "10/s"], "drop --rate"),
        (
            ["--sink", "connector-streaming", "--input", __file__, "--input-format", "json"],
            "drop --input",
        ),
    ],
)
def test_bad_sink_options_are_refused_in_one_line(argv: list[str], message: str) -> None:
    extra = ["--events", "10"] if "--input" not in argv else []
    base = GOOD[:5] + extra
    _one_line(*_run(*base, *argv), message)


def test_the_session_loads_the_cached_jars_only_when_hangwatch_starts_it() -> None:
    from hangwatch_pipeline.job import session_conf
    from hangwatch_pipeline.run_options import RunOptions

    ours = ",".join(str(p) for p in spark_kafka.jars())
    local = RunOptions(bootstrap="b:1", topic="t", events=1, master="local[2]", sink="connector")
    assert session_conf(local)["spark.jars"] == ours
    mine = RunOptions(bootstrap="b:1", topic="t", events=1, master="local[2]", sink="connector",
                      spark_conf={"spark.jars": "/opt/udfs.jar"})  # fmt: skip
    assert session_conf(mine)["spark.jars"] == f"{ours},/opt/udfs.jar"
    submitted = RunOptions(bootstrap="b:1", topic="t", events=1, master=None, sink="connector")
    assert "spark.jars" not in session_conf(submitted)  # spark-submit's --jars or the image
    wrapper = RunOptions(bootstrap="b:1", topic="t", events=1, master="local[2]")
    assert "spark.jars" not in session_conf(wrapper)
