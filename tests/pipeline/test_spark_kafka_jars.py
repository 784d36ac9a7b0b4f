"""Spark's Kafka connector jars: one pinned version, a cache by version, one-line refusals.

Covers: pyproject.toml pins pyspark to `spark_kafka.SPARK_VERSION` (the one definition);
a cache directory counts only when it holds each of the four jars once; a missing jar,
a pyspark other than the pinned one and an absent Java each become one `UsageError`
line naming what to run, install or pin (exit 3); Maven's report of an unpublished
connector becomes one line saying which pyspark to pin; the resolved cache (setup.sh
ran `python3 -m hangwatch_pipeline.spark_kafka`) holds the connector of the pinned
version and a second resolve is a no-op that runs no Maven.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

from hangwatch.errors import UsageError
from hangwatch_pipeline import spark_kafka

ROOT = Path(__file__).resolve().parents[2]
JARS = (
    f"spark-sql-kafka-0-10_2.13-{spark_kafka.SPARK_VERSION}.jar",
    f"spark-token-provider-kafka-0-10_2.13-{spark_kafka.SPARK_VERSION}.jar",
    "kafka-clients-3.9.2.jar",
    "commons-pool2-2.13.1.jar",
)


def _cache(tmp_path: Path, names: tuple[str, ...]) -> dict[str, str]:
    directory = tmp_path / spark_kafka.SPARK_VERSION
    directory.mkdir(parents=True)
    for name in names:
        (directory / name).write_bytes(b"PK")
    return {spark_kafka.CACHE_ENV: str(tmp_path), "PATH": ""}


def test_pyproject_pins_the_connectors_pyspark() -> None:
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]
    assert extras["spark"] == [f"pyspark=={spark_kafka.SPARK_VERSION}"]


def test_a_complete_cache_gives_every_jar_to_spark(tmp_path: Path) -> None:
    env = _cache(tmp_path, (*JARS, "unrelated-1.0.jar"))
    found = spark_kafka.jars(environ=env)
    assert [p.name for p in found] == list(JARS)
    assert spark_kafka.spark_conf(found) == {"spark.jars": ",".join(str(p) for p in found)}


@pytest.mark.parametrize("missing", range(len(JARS)))
def test_a_missing_jar_is_named_with_the_command_that_resolves_it(
    tmp_path: Path, missing: int
) -> None:
    env = _cache(tmp_path, JARS[:missing] + JARS[missing + 1 :])
    with pytest.raises(UsageError) as raised:
        spark_kafka.jars(environ=env)
    message = str(raised.value)
    assert spark_kafka.JAR_PREFIXES[missing] in message
    assert "scripts/setup.sh" in message and "\n" not in message
    assert raised.value.exit_code == 3


def test_a_prefix_of_another_artifact_does_not_count(tmp_path: Path) -> None:
    # kafka-clients-... must not be taken for kafka-clients-extra-...
    names = (*JARS[:2], "kafka-clients-extra-1.0.jar", JARS[3])
    assert spark_kafka.find_jars(Path(_cache(tmp_path, names)[spark_kafka.CACHE_ENV])) is None


def test_another_pyspark_is_refused_with_the_version_to_pin() -> None:
    spark_kafka.check_pyspark_version(spark_kafka.SPARK_VERSION)
    with pytest.raises(UsageError, match=re.escape(f"pyspark=={spark_kafka.SPARK_VERSION}")):
        spark_kafka.check_pyspark_version("4.3.0")


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
    line = spark_kafka._maven_failure("4.3.0", report)
    assert line.startswith("org.apache.spark:spark-sql-kafka-0-10_2.13:4.3.0 is not published")
    assert f"pyspark=={spark_kafka.SPARK_VERSION}" in line
    other = spark_kafka._maven_failure("4.2.0", "\x1b[0m[ERROR] \n[ERROR] Network is unreachable\n")
    assert other.endswith("Network is unreachable")


def test_the_resolved_cache_holds_the_pinned_connector_and_resolving_again_is_a_no_op(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    found = spark_kafka.jars()  # setup.sh resolved them
    assert found[0].name == JARS[0]
    assert all(p.stat().st_size > 10_000 for p in found)
    monkeypatch.setattr("shutil.which", lambda *_args, **_kwargs: None)  # no Maven now
    assert spark_kafka.resolve() == found
