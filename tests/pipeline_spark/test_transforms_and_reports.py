"""The pipeline's pure parts, without Spark or Kafka.

Covered:
- events: deterministic generation, JSON-lines and CSV parsing with one-line errors
  naming the record, enrichment (event id, amount bands at their edges, EUR amount),
  message encoding and `identify` (what verify reads back), pacing with fake time;
- run options: rates, durations, masters, bootstrap lists, topics, source combinations,
  `${NAME}` producer values resolved from the task's environment (never the driver's),
  which masters retry tasks, how many partitions a run gets;
- verify's tally: missing, duplicates, seqs beyond --expect, run selection, exit codes;
- the summary (ok only if everything sent was acknowledged), progress line, and the
  one-line failure reason taken from a Spark error.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from hangwatch.errors import UsageError
from hangwatch_pipeline import events
from hangwatch_pipeline.events import InvalidRecordError, Pacer
from hangwatch_pipeline.run_options import (
    RunOptions,
    add_run_arguments,
    expand_environment,
    parse_bootstrap,
    parse_duration,
    parse_master,
    parse_rate,
    parse_topic,
    retries_disabled,
    run_options,
)
from hangwatch_pipeline.run_report import (
    Summary,
    Tallies,
    TaskCounts,
    failure_reason,
    progress_line,
)
from hangwatch_pipeline.verify import ReadStats, SeqTally, judge, select_run
from hangwatch_pipeline.workload import partition_count, task_rate

RUN = "run-20260509T101500Z-3f2a"


# -- events -------------------------------------------------------------------------------
def test_generated_events_are_deterministic_and_unique() -> None:
    first = events.generate_event(7, RUN, 1_778_321_700.5)
    assert first == events.generate_event(7, RUN, 1_778_321_700.5)
    assert first["event_ts"] == "2026-05-09T10:15:00.500Z"
    assert first["entity_id"].startswith("customer-") and len(first["entity_id"]) == 14
    assert 0 <= first["amount_cents"] < 250_00 and first["currency"] in events.CURRENCIES
    ids = {events.enrich(events.generate_event(s, RUN, 0.0))["event_id"] for s in range(1000)}
    assert len(ids) == 1000 and f"{RUN}-7" in ids


@pytest.mark.parametrize(
    ("cents", "band"), [(0, "small"), (999, "small"), (1000, "medium"), (9999, "medium"),
                        (10_000, "large")],
)  # fmt: skip
def test_amount_bands_at_their_edges(cents: int, band: str) -> None:
    assert events.amount_band(cents) == band


def test_enrichment_adds_derived_fields() -> None:
    raw = {"run_id": RUN, "seq": 3, "entity_id": "e", "amount_cents": 1000, "currency": "USD"}
    enriched = events.enrich(raw)
    assert enriched["event_id"] == f"{RUN}-3"
    assert (enriched["amount_band"], enriched["amount_eur_cents"]) == ("medium", 920)
    assert events.enrich({**raw, "currency": "XYZ"})["amount_eur_cents"] is None
    assert raw.keys() < enriched.keys()


def test_messages_are_keyed_by_entity_and_identified_back() -> None:
    event = events.enrich(events.generate_event(42, RUN, 0.0))
    key, value = events.to_message(event)
    assert key == event["entity_id"].encode()
    assert json.loads(value) == event
    assert events.identify(value) == (RUN, 42)
    for foreign in (None, b"", b"not json", b"[1]", b'{"run_id": "r", "seq": true}'):
        assert events.identify(foreign) is None


def test_json_lines_parse_with_attributes() -> None:
    line = '{"entity_id": "shop-1", "amount_cents": 250, "currency": "gbp", "order": 9}'
    event = events.parse_json_line(line, 5, RUN)
    assert event == {
        "run_id": RUN, "seq": 5, "entity_id": "shop-1", "amount_cents": 250,
        "currency": "GBP", "event_ts": None, "attributes": {"order": 9},
    }  # fmt: skip


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("{nope", "record 4: not valid JSON"),
        ("[1, 2]", "record 4: expected a JSON object, got list"),
        ('{"amount_cents": 1}', "record 4: missing 'entity_id'"),
        ('{"entity_id": "a", "amount_cents": -1}', "amount_cents must be an integer >= 0"),
        ('{"entity_id": "a", "amount_cents": 1.5}', "amount_cents must be an integer >= 0"),
        ('{"entity_id": "a", "amount_cents": "x"}', "amount_cents must be an integer, got 'x'"),
        ('{"entity_id": "a", "amount_cents": 1, "seq": 3}', "field(s) seq are set by the pipeline"),
    ],
)
def test_bad_json_records_are_named(line: str, message: str) -> None:
    with pytest.raises(InvalidRecordError, match=None) as caught:
        events.parse_json_line(line, 4, RUN)
    assert message in str(caught.value) and "\n" not in str(caught.value)


def test_csv_records_follow_their_header() -> None:
    columns = events.csv_header("entity_id, amount_cents,currency,region\n")
    event = events.parse_csv_line('"a,b",120,EUR,north', columns, 0, RUN)
    assert (event["entity_id"], event["amount_cents"], event["attributes"]) == (
        "a,b", 120, {"region": "north"},
    )  # fmt: skip
    with pytest.raises(InvalidRecordError, match="record 1: 2 CSV fields, header has 4"):
        events.parse_csv_line("a,1", columns, 1, RUN)
    with pytest.raises(InvalidRecordError, match="lacks column"):
        events.csv_header("id,amount")


def test_pacer_holds_the_rate_with_fake_time() -> None:
    now = [100.0]
    slept: list[float] = []

    def sleep(seconds: float) -> None:
        slept.append(seconds)
        now[0] += seconds

    pacer = Pacer(500.0, clock=lambda: now[0], sleep=sleep)
    for _ in range(1000):
        pacer.tick()
    assert now[0] - 100.0 == pytest.approx(2.0, abs=0.02)
    assert len(slept) == 1000 // 5
    behind = Pacer(10.0, clock=lambda: now[0], sleep=sleep)
    behind.tick()
    now[0] += 60.0  # far behind schedule: never sleeps to "catch up" backwards
    slept.clear()
    for _ in range(5):
        behind.tick()
    assert slept == []
    with pytest.raises(ValueError, match="rate must be > 0"):
        Pacer(0)


# -- options ------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("text", "rate"), [("5000/s", 5000), ("5000", 5000), ("5k/s", 5000), ("2.5k", 2500),
                       ("1M/sec", 1e6), ("0.5/s", 0.5)],
)  # fmt: skip
def test_rates(text: str, rate: float) -> None:
    assert parse_rate(text) == rate


@pytest.mark.parametrize("text", ["", "fast", "0/s", "-5/s", "5/min", "5 k s", "nan"])
def test_malformed_rates(text: str) -> None:
    with pytest.raises(UsageError, match="--rate"):
        parse_rate(text)


@pytest.mark.parametrize(
    ("text", "seconds"), [("30", 30), ("30s", 30), ("1.5m", 90), ("500ms", 0.5), ("1h", 3600)]
)
def test_durations(text: str, seconds: float) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize(
    "master",
    ["local", "local[4]", "local[*]", "local[4,4]", "local[*,3]", "local-cluster[2,1,1024]",
     "spark://h:7077", "spark://a:7077,b:7077", "k8s://https://api.example:6443", "yarn"],
)  # fmt: skip
def test_known_masters(master: str) -> None:
    assert parse_master(master) == master


@pytest.mark.parametrize(
    "master", ["", "local[0]", "local[4,0]", "local-cluster[2,1]", "mesos://h:5050", "lokal[2]"]
)
def test_unknown_masters(master: str) -> None:
    with pytest.raises(UsageError, match="unknown --master"):
        parse_master(master)


def test_only_plain_local_masters_skip_retries() -> None:
    assert retries_disabled("local") and retries_disabled("local[4]")
    assert not retries_disabled("local[4,4]") and not retries_disabled("local-cluster[2,1,512]")
    assert not retries_disabled(None)


def test_bootstrap_and_topic() -> None:
    assert parse_bootstrap(" a:9092, b:9093 ,") == "a:9092,b:9093"
    assert parse_bootstrap("[::1]:9092") == "[::1]:9092"
    for bad in ("", "a", "a:0", "a:70000", "a:b"):
        with pytest.raises(UsageError, match="--bootstrap"):
            parse_bootstrap(bad)
    assert parse_topic(" events.v1 ") == "events.v1"
    for bad in ("", "  ", "a b", "x" * 250, ".."):
        with pytest.raises(UsageError, match="--topic"):
            parse_topic(bad)


def _args(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_run_arguments(parser)
    return parser.parse_args(["--bootstrap", "a:9092", "--topic", "t", *argv])


def test_sources_combine_as_documented(tmp_path: Path) -> None:
    source = tmp_path / "in.csv"
    source.write_text("entity_id,amount_cents\n")
    (tmp_path / "in.txt").write_text("")
    assert run_options(_args(), environ={}).events == 100_000
    paced = run_options(_args("--rate", "2k/s", "--duration", "30s"), environ={})
    assert (paced.events, paced.rate_per_second) == (60_000, 2000)
    assert run_options(_args("--events", "10", "--rate", "5/s"), environ={}).events == 10
    files = run_options(_args("--input", str(source)), environ={})
    assert (files.events, files.input_format) == (None, "csv")
    remote = run_options(_args("--input", "s3a://bucket/in/*.jsonl"), environ={})
    assert remote.input_format == "json"
    for argv, message in [
        (("--events", "-1"), "--events must be a positive number"),
        (("--events", "0"), "--events must be a positive number"),
        (("--duration", "10s"), "--duration needs --rate"),
        (("--events", "5", "--rate", "1/s", "--duration", "5"), "not both"),
        (("--input", str(source), "--events", "5"), "drop --events"),
        (("--input", str(tmp_path / "in.txt")), "--input-format json|csv"),
        (("--input", str(tmp_path / "absent.csv")), "matches no file"),
        (("--input-format", "csv"), "--input-format needs --input"),
        (("--partitions", "0"), "--partitions must be >= 1"),
        (("-X", "acks=0"), "acks=0"),
        (("-X", "no.such.property=1"), "no.such.property"),
        (("-X", "bootstrap.servers=b:9092"), "give the brokers with --bootstrap"),
        (("--conf", "ui=false"), "spark.property=value"),
        (("--run-id", "has space"), "--run-id"),
        (("--spark-log-level", "LOUD"), "log4j level"),
    ]:
        with pytest.raises(UsageError, match=None) as caught:
            run_options(_args(*argv), environ={})
        assert message in str(caught.value), (argv, str(caught.value))


def test_secrets_are_resolved_from_the_task_environment_only() -> None:
    conf = {"sasl.username": "${USER_VAR}", "sasl.password": "${PASS_VAR}", "acks": "all"}
    env = {"USER_VAR": "writer", "PASS_VAR": "s3cr3t"}
    assert expand_environment(conf, env) == {
        "sasl.username": "writer", "sasl.password": "s3cr3t", "acks": "all",
    }  # fmt: skip
    assert expand_environment({"client.id": "job-${POD}-x"}, {"POD": "p1"}) == {
        "client.id": "job-p1-x"
    }
    with pytest.raises(UsageError, match=r"-X sasl.password refers to \$\{PASS_VAR\}") as caught:
        expand_environment(conf, {"USER_VAR": "writer"})
    assert "writer" not in str(caught.value)
    placeholders = _args("-X", "sasl.password=${PASS_VAR}", "-X", "linger.ms=${LINGER}")
    options = run_options(placeholders, environ={})  # checked in the tasks, not here
    assert options.producer_conf["sasl.password"] == "${PASS_VAR}"


def test_telemetry_dir_comes_from_the_environment_unless_given() -> None:
    env = {"HANGWATCH_TELEMETRY_DIR": "/var/run/hangwatch/telemetry"}
    assert run_options(_args(), environ=env).telemetry_dir == env["HANGWATCH_TELEMETRY_DIR"]
    assert run_options(_args("--telemetry-dir", "/t"), environ=env).telemetry_dir == "/t"
    assert run_options(_args(), environ={}).telemetry_dir is None


def test_partition_counts_and_task_rates() -> None:
    def options(**changes: object) -> RunOptions:
        return RunOptions(bootstrap="a:1", topic="t", **changes)  # type: ignore[arg-type]

    assert partition_count(options(events=100_000), 2) == 4
    assert partition_count(options(events=100_000), 8) == 8
    assert partition_count(options(events=3), 8) == 3
    assert partition_count(options(events=10**9), 8) == 10_000
    assert partition_count(options(events=None, input_path="x"), 4) == 4
    assert partition_count(options(events=100_000, partitions=7), 2) == 7
    paced = options(events=200_000, rate_per_second=10_000.0)  # 20 s on 2 slots
    assert partition_count(paced, 2) == 8  # 5 s of sending per task
    assert task_rate(paced, 8, 2) == 5_000.0  # two tasks run at once
    assert partition_count(options(events=10, rate_per_second=1.0), 2) == 4  # 2.5 events, 5 s
    assert task_rate(options(events=10, rate_per_second=6.0), 1, 4) == 6.0
    assert task_rate(options(events=10), 4, 4) is None


# -- verify -------------------------------------------------------------------------------
def test_tally_counts_missing_duplicates_and_extra() -> None:
    stats = ReadStats(partitions=3, complete=True)
    for seq in [0, 1, 1, 3, 3, 3, 7]:
        stats.add(json.dumps({"run_id": RUN, "seq": seq}).encode())
    stats.add(b"someone else's message")
    result = judge(stats, "t", 5, None, 1.0)
    assert (result.present, result.missing, result.duplicates) == (3, 2, 3)
    assert result.missing_ids == [f"{RUN}-2", f"{RUN}-4"]
    assert (result.beyond_expected, result.foreign, result.exit_code) == (1, 1, 1)
    assert "FAILED: 2 events missing" in result.render()
    assert judge(stats, "t", 2, None, 1.0).exit_code == 0
    stats.complete = False
    assert judge(stats, "t", 2, None, 1.0).exit_code == 2


def test_events_retention_may_have_deleted_are_unverifiable_not_lost() -> None:
    stats = ReadStats(partitions=2, complete=True, deleted={0: 2, 1: 0})
    for seq in [0, 3, 4]:
        stats.add(json.dumps({"run_id": RUN, "seq": seq}).encode())
    explained = judge(stats, "t", 5, None, 1.0)  # 1 and 2 missing, 2 records deleted
    assert (explained.missing, explained.unverifiable, explained.lost) == (2, 2, 0)
    assert explained.exit_code == 4 and explained.truncated_partitions == [0]
    assert "UNVERIFIABLE: 2 events not found" in explained.render()
    assert "retention deleted up to 2 records" in explained.render()
    beyond = judge(stats, "t", 7, None, 1.0)  # 1, 2, 5, 6 missing: at least 2 lost
    assert (beyond.unverifiable, beyond.lost, beyond.exit_code) == (2, 2, 1)
    assert "FAILED: 2 events missing (2 more unverifiable)" in beyond.render()
    assert beyond.as_json()["lost"] == 2 and beyond.as_json()["deleted_records"] == 2


def test_run_selection() -> None:
    one = SeqTally()
    one.add(0)
    assert select_run({"a": one}, None) == "a"
    assert select_run({}, None) is None
    assert select_run({"a": one, "b": one}, "b") == "b"
    with pytest.raises(UsageError, match=r"holds events of 2 runs: a .*; pass --run-id"):
        select_run({"a": one, "b": one}, None)
    empty = judge(ReadStats(complete=True), "t", 3, "absent", 0.1)
    assert (empty.missing, empty.exit_code) == (3, 1)


def test_tally_saturates_without_losing_duplicates() -> None:
    tally = SeqTally()
    for _ in range(300):
        tally.add(1)
    tally.add(-1)
    assert (tally.records, tally.duplicates, tally.missing(3)) == (300, 299, [0, 2])


# -- reports ------------------------------------------------------------------------------
def _summary(**changes: object) -> Summary:
    fields: dict[str, object] = {
        "run_id": RUN, "topic": "t", "master": "local[2,4]", "application_id": "local-1",
        "expected": 100, "partitions": 4,
        "tallies": Tallies(sent=100, acknowledged=100, tasks=4, retried_tasks=1,
                           earlier_attempts=1),
        "failed_attempts": 2, "duration_seconds": 2.0,
    }  # fmt: skip
    fields.update(changes)
    return Summary(**fields)  # type: ignore[arg-type]


def test_summary_is_ok_only_when_everything_was_acknowledged() -> None:
    ok = _summary()
    assert ok.ok and ok.events_per_second == 50.0
    assert "retried tasks  1 (failed task attempts: 2)" in ok.render()
    assert ok.as_json()["retried_tasks"] == 1 and ok.as_json()["ok"] is True
    assert not _summary(tallies=Tallies(sent=100, acknowledged=99)).ok
    assert not _summary(tallies=Tallies(sent=90, acknowledged=90)).ok
    assert _summary(expected=None, tallies=Tallies(sent=7, acknowledged=7)).ok
    failed = _summary(error="DeliveryFailed: x")
    assert not failed.ok and failed.render().endswith("FAILED: DeliveryFailed: x")


def test_progress_line() -> None:
    line = progress_line(12.04, TaskCounts(8, 3, 2, 1), Tallies(acknowledged=37_500), 100_000)
    assert line == (
        "[pipeline   12.0 s] tasks 3/8 done, 2 running, 1 failed attempt; "
        "37,500/100,000 events acknowledged by finished tasks"
    )


def test_failure_reason_is_the_python_exception_line() -> None:
    python_error = RuntimeError(
        "An exception was thrown from the Python worker:\nTraceback (most recent call last):\n"
        '  File "job.py", line 1, in write_partition\n'
        "hangwatch_producer.producer.DeliveryFailed: delivery failed: 0 unacknowledged and 3 "
        "failed of 3 messages (delivered 0)\n SQLSTATE: 38000\n\tat org.apache.spark.X(Y.scala:1)"
    )
    assert failure_reason(python_error).startswith("hangwatch_producer.producer.DeliveryFailed: ")
    java_error = RuntimeError(
        "An error occurred while calling o42.foreachPartition.\n"
        ": org.apache.spark.SparkException: Job aborted due to stage failure: Task 0 failed\n"
        "\tat org.apache.spark.scheduler.DAGScheduler.failJobAndIndependentStages(DAG.scala:1)"
    )
    assert failure_reason(java_error).startswith(": org.apache.spark.SparkException: Job aborted")
