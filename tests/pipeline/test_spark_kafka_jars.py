"""Spark's Kafka connector jars: one pinned pyspark per line, a cache by version, refusals.

Covers: pyproject.toml's extras pin each line of `spark_kafka.LINES` (the one
definition) to its pyspark, the default line's extra is `spark`; each installed
pyspark picks its own line and Scala binary version (2.13 for 4.x, 2.12 for 3.5); a
cache directory counts only when it holds each of the line's four jars once (a 2.12
connector is not a 2.13 one); a missing jar, a pyspark of no line and an absent Java
each become one `UsageError` line naming what to run, install or pin (exit 3); Maven's
report of an unpublished connector becomes one line saying which pyspark to pin; the
resolved caches (setup.sh ran `python3 -m hangwatch_pipeline.spark_kafka --all`) hold
every line's connector and a second resolve is a no-op that runs no Maven.
"""

from __future__ import annotations

import dataclasses
import tomllib
from pathlib import Path

import pytest

from hangwatch.errors import UsageError
from hangwatch_pipeline import spark_kafka

ROOT = Path(__file__).resolve().parents[2]
LINE = spark_kafka.DEFAULT_LINE
OLD_LINE = spark_kafka.line_named("3.5")
JARS = (
    f"spark-sql-kafka-0-10_2.13-{spark_kafka.SPARK_VERSION}.jar",
    f"spark-token-provider-kafka-0-10_2.13-{spark_kafka.SPARK_VERSION}.jar",
    "kafka-clients-3.9.2.jar",
    "commons-pool2-2.13.1.jar",
)
OLD_JARS = (
    f"spark-sql-kafka-0-10_2.12-{OLD_LINE.version}.jar",
    f"spark-token-provider-kafka-0-10_2.12-{OLD_LINE.version}.jar",
    "kafka-clients-3.4.1.jar",
    "commons-pool2-2.11.1.jar",
)


def _cache(tmp_path: Path, names: tuple[str, ...], version: str = LINE.version) -> dict[str, str]:
    directory = tmp_path / version
    directory.mkdir(parents=True)
    for name in names:
        (directory / name).write_bytes(b"PK")
    return {spark_kafka.CACHE_ENV: str(tmp_path), "PATH": ""}


def test_pyproject_pins_each_lines_pyspark() -> None:
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]
    for line in spark_kafka.LINES:
        assert extras[line.extra] == [f"pyspark=={line.version}"], line
    assert LINE.extra == "spark" and "hangwatch[spark]" in extras["dev"]
    assert not any("pyspark" in r or "spark" in r for r in extras["test"])  # any line's env
    assert [line.scala for line in spark_kafka.LINES] == ["2.13", "2.12"]


def test_each_installed_pyspark_picks_its_line() -> None:
    for line in spark_kafka.LINES:
        assert spark_kafka.line_of(line.version) is line
        assert spark_kafka.line_named(line.name) is line
    with pytest.raises(UsageError, match=r"no Spark line '3\.4'"):
        spark_kafka.line_named("3.4")


def test_a_complete_cache_gives_every_jar_to_spark(tmp_path: Path) -> None:
    env = _cache(tmp_path, (*JARS, "unrelated-1.0.jar"))
    found = spark_kafka.jars(LINE, environ=env)
    assert [p.name for p in found] == list(JARS)
    assert spark_kafka.spark_conf(found) == {"spark.jars": ",".join(str(p) for p in found)}
    old = _cache(tmp_path, OLD_JARS, OLD_LINE.version)
    assert [p.name for p in spark_kafka.jars(OLD_LINE, environ=old)] == list(OLD_JARS)


def test_a_connector_of_the_other_scala_does_not_count(tmp_path: Path) -> None:
    names = tuple(n.replace("_2.12-", "_2.13-") for n in OLD_JARS)
    directory = Path(_cache(tmp_path, names, OLD_LINE.version)[spark_kafka.CACHE_ENV])
    assert spark_kafka.find_jars(OLD_LINE, directory / OLD_LINE.version) is None


@pytest.mark.parametrize("missing", range(len(JARS)))
def test_a_missing_jar_is_named_with_the_command_that_resolves_it(
    tmp_path: Path, missing: int
) -> None:
    env = _cache(tmp_path, JARS[:missing] + JARS[missing + 1 :])
    with pytest.raises(UsageError) as raised:
        spark_kafka.jars(LINE, environ=env)
    message = str(raised.value)
    assert LINE.jar_prefixes[missing] in message
    assert "scripts/setup.sh" in message and "\n" not in message
    assert raised.value.exit_code == 3


def test_a_prefix_of_another_artifact_does_not_count(tmp_path: Path) -> None:
    # kafka-clients-... must not be taken for kafka-clients-extra-...
    names = (*JARS[:2], "kafka-clients-extra-1.0.jar", JARS[3])
    directory = Path(_cache(tmp_path, names)[spark_kafka.CACHE_ENV]) / LINE.version
    assert spark_kafka.find_jars(LINE, directory) is None


@pytest.mark.parametrize("installed", ["4.3.0", "4.2.1", "3.5.8", "3.4.4"])
def test_a_pyspark_of_no_line_is_refused_with_the_versions_to_pin(installed: str) -> None:
    with pytest.raises(UsageError) as raised:
        spark_kafka.line_of(installed)
    message = str(raised.value)
    for line in spark_kafka.LINES:
        assert f"pyspark=={line.version}" in message and f"({line.name})" in message
    assert message.startswith(f"pyspark {installed} is installed") and "\n" not in message


def test_absent_java_names_what_to_install(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match=r"Java not found.*openjdk"):
        spark_kafka.check_java({"PATH": str(tmp_path)})
    java = tmp_path / "jdk" / "bin" / "java"
    java.parent.mkdir(parents=True)
    java.write_text("")
    spark_kafka.check_java({"PATH": "", "JAVA_HOME": str(tmp_path / "jdk")})


def test_mavens_unpublished_connector_report_becomes_one_line() -> None:
    report = (
        "\x1b[0m\x1b[0m[ERROR] Failed to execute goal on project hangwatch-spark-kafka: Could "
        "not resolve dependencies for project io.hangwatch:hangwatch-spark-kafka:pom:1: "
        "org.apache.spark:spark-sql-kafka-0-10_2.13:jar:4.3.0 was not found in "
        "https://repo.maven.apache.org/maven2 during a previous attempt.\n[ERROR] \n"
    )
    unpublished = dataclasses.replace(LINE, version="4.3.0")
    line = spark_kafka._maven_failure(unpublished, report)
    assert line.startswith("org.apache.spark:spark-sql-kafka-0-10_2.13:4.3.0 is not published")
    assert f"pyspark=={spark_kafka.SPARK_VERSION}" in line
    other = spark_kafka._maven_failure(LINE, "\x1b[0m[ERROR] \n[ERROR] Network is unreachable\n")
    assert other.endswith("Network is unreachable")


def test_the_resolved_caches_hold_each_lines_connector_and_resolving_again_is_a_no_op(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    found = {line: spark_kafka.jars(line) for line in spark_kafka.LINES}  # setup.sh resolved
    assert [p.name for p in found[LINE]] == list(JARS)
    assert [p.name for p in found[OLD_LINE]] == list(OLD_JARS)
    assert all(p.stat().st_size > 10_000 for jars in found.values() for p in jars)
    monkeypatch.setattr("shutil.which", lambda *_args, **_kwargs: None)  # no Maven now
    for line, jars in found.items():
        assert spark_kafka.resolve(line) == jars
