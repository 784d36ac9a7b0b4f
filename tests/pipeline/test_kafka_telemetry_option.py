"""`hangwatch pipeline run --kafka-telemetry`: hangwatch's telemetry in the connector sink.

Covers (parsing and the session's properties, no JVM): the flag puts the class in the
sink's `kafka.interceptor.classes` and `kafka.metric.reporters` after a job's own
(never twice, whatever lists a job gives: hypothesis), the session hangwatch starts gets
the telemetry jar after the connector's jars, a session spark-submit made gets none (its
`--jars` carries it), and the flag with the wrapper's sink is one line naming the sinks
it is for.
"""

from __future__ import annotations

import argparse

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hangwatch.errors import UsageError
from hangwatch_pipeline import kafka_telemetry, spark_kafka
from hangwatch_pipeline.run_options import RunOptions, add_run_arguments, run_options

BASE = ["--bootstrap", "127.0.0.1:9092", "--topic", "events", "--events", "10"]


def _parsed(*argv: str) -> RunOptions:
    parser = argparse.ArgumentParser()
    add_run_arguments(parser)
    return run_options(parser.parse_args([*BASE, *argv]), environ={})


def test_the_flag_adds_the_class_after_the_jobs_own() -> None:
    options = _parsed(
        "--sink", "connector", "--kafka-telemetry",
        "--option", "kafka.interceptor.classes=com.example.Audit",
    )  # fmt: skip
    assert options.kafka_telemetry
    name = kafka_telemetry.CLASS_NAME
    assert options.sink_options["kafka.interceptor.classes"] == f"com.example.Audit,{name}"
    assert options.sink_options["kafka.metric.reporters"] == name
    assert not _parsed("--sink", "connector").sink_options


def test_with_the_wrapper_the_flag_is_one_line() -> None:
    with pytest.raises(UsageError, match=r"^--kafka-telemetry is for the connector sinks"):
        _parsed("--kafka-telemetry")


names = st.text(st.sampled_from("abc.XY$"), min_size=1, max_size=12)


@given(st.lists(names | st.just(kafka_telemetry.CLASS_NAME), max_size=5), st.booleans())
def test_the_class_is_listed_once_and_a_jobs_own_are_kept(given: list[str], spaced: bool) -> None:
    joined = (", " if spaced else ",").join(given)
    out = kafka_telemetry.with_telemetry({"kafka.interceptor.classes": joined, "kafka.acks": "1"})
    listed = out["kafka.interceptor.classes"].split(",")
    assert listed.count(kafka_telemetry.CLASS_NAME) == 1
    assert [c for c in listed if c != kafka_telemetry.CLASS_NAME] == [
        c for c in given if c != kafka_telemetry.CLASS_NAME
    ]
    assert out["kafka.metric.reporters"] == kafka_telemetry.CLASS_NAME
    assert out["kafka.acks"] == "1"


def test_the_session_hangwatch_starts_loads_the_jar() -> None:
    from hangwatch_pipeline.job import session_conf

    ours = ",".join(str(p) for p in spark_kafka.jars())
    jar = kafka_telemetry.telemetry_jar(spark_kafka.jars())
    local = RunOptions(bootstrap="b:1", topic="t", events=1, master="local[2]", sink="connector",
                       kafka_telemetry=True)  # fmt: skip
    assert session_conf(local)["spark.jars"] == f"{ours},{jar}"
    submitted = RunOptions(bootstrap="b:1", topic="t", events=1, master=None, sink="connector",
                           kafka_telemetry=True)  # fmt: skip
    assert "spark.jars" not in session_conf(submitted)
