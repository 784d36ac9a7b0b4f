"""Spark tasks write telemetry as documented, and file inputs go through the same path.

Covered, with pyspark `local[2,4]` and the 3-broker lab:
- telemetry: while a paced run is under way every task's producer writes
  `producer-<pid>-<n>.json` into the HANGWATCH_TELEMETRY_DIR given to the tasks through
  `spark.executorEnv`; each document carries every top-level field documented in
  docs/telemetry.md, the Spark task identity (stage, partition, attempt, task attempt
  id), the application id, counters, bootstrap and topic; the files are gone once the
  tasks finished;
- `--input` JSON lines: every record is enriched (event_id, amount_band,
  amount_eur_cents, attributes) and verified present;
- `--input` CSV: a directory of two files, each with its header, is read whole;
- a malformed input record fails the run with a one-line reason naming the record.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from pyspark.sql import SparkSession

from hangwatch_lab import Lab
from hangwatch_pipeline.job import run_pipeline
from hangwatch_pipeline.run_options import RunOptions, new_run_id
from hangwatch_pipeline.verify import verify
from hangwatch_producer.wire import telemetry as wire

from .helpers import TelemetryWatcher, read_events

DOCS = Path(__file__).resolve().parents[2] / "docs" / "telemetry.md"


def documented_fields(section: str) -> set[str]:
    """Field names of the table under `### <section>` in docs/telemetry.md."""
    text = DOCS.read_text().split(f"### {section}\n", 1)[1].split("\n### ", 1)[0]
    return set(re.findall(r"^\| `([a-z_]+)` \|", text, flags=re.MULTILINE))


def _options(kafka: Lab, topic: str, **changes: object) -> RunOptions:
    fields: dict[str, object] = {
        "bootstrap": kafka.bootstrap,
        "topic": topic,
        "events": None,
        "run_id": new_run_id(),
    }
    fields.update(changes)
    return RunOptions(**fields)  # type: ignore[arg-type]


def test_tasks_write_the_documented_telemetry(
    spark: SparkSession, kafka: Lab, telemetry_dir: Path
) -> None:
    options = _options(kafka, "telemetry", events=8_000, rate_per_second=2_000.0)
    with TelemetryWatcher(telemetry_dir).running() as watcher:
        summary = run_pipeline(spark, options, None)
    assert summary.ok, summary.render()
    docs = watcher.all()
    assert len(watcher.documents) >= 2, "expected one producer file per concurrent task"
    top_level = documented_fields("Top level") - wire.JAVA_ONLY  # the wrapper writes the rest
    identity_fields = documented_fields("`identity`")
    counter_fields = documented_fields("`counters`")
    assert {"schema", "seq", "identity", "counters", "stats"} <= top_level
    for doc in docs:
        assert top_level <= doc.keys(), top_level - doc.keys()
        assert (doc["schema"], doc["kind"]) == (1, "hangwatch.producer.telemetry")
        identity = doc["identity"]
        assert identity_fields <= identity.keys()
        assert identity["application_id"] == spark.sparkContext.applicationId
        task = identity["task"]
        assert set(task) == {"stage", "partition", "attempt", "task_attempt_id"}
        assert all(isinstance(v, int) for v in task.values())
        assert counter_fields <= doc["counters"].keys()
        assert doc["bootstrap"] == kafka.bootstrap.split(",")
        assert doc["topics"] in ([], ["telemetry"])
        assert doc["interval_seconds"] == 1.0
    assert {d["identity"]["task"]["partition"] for d in docs} == set(range(summary.partitions))
    refreshed = [d for d in docs if d["stats"] is not None]
    assert refreshed, "no statistics refresh seen during a multi-second run"
    assert max(d["counters"]["delivered"] for d in refreshed) > 0
    assert not list(telemetry_dir.glob("producer-*")), "producers left files behind"


def test_json_lines_input_is_enriched_and_delivered(
    spark: SparkSession, kafka: Lab, tmp_path: Path
) -> None:
    source = tmp_path / "orders.jsonl"
    records = [
        {"entity_id": f"shop-{i % 7}", "amount_cents": i * 37, "currency": "USD", "order": i}
        for i in range(1_000)
    ]
    source.write_text("\n".join(json.dumps(r) for r in records) + "\n\n")
    options = _options(kafka, "json-input", input_path=str(source), input_format="json")
    summary = run_pipeline(spark, options, None)
    assert summary.ok and summary.expected is None, summary.render()
    assert summary.tallies.acknowledged == 1_000
    result = verify(kafka.bootstrap, "json-input", 1_000, options.run_id, timeout_seconds=30)
    assert (result.missing, result.beyond_expected) == (0, 0), result.render()
    by_seq = {e["seq"]: e for e in read_events(kafka.bootstrap, "json-input")}
    event = by_seq[300]
    assert event["event_id"] == f"{options.run_id}-300"
    assert event["entity_id"] == "shop-6" and event["attributes"] == {"order": 300}
    assert (event["amount_band"], event["amount_eur_cents"]) == ("large", round(11_100 * 0.92))
    assert by_seq[10]["amount_band"] == "small" and by_seq[100]["amount_band"] == "medium"


def test_csv_directory_input_is_read_whole(spark: SparkSession, kafka: Lab, tmp_path: Path) -> None:
    folder = tmp_path / "csv"
    folder.mkdir()
    for part in range(2):
        rows = [f"c-{part}-{i},{i},EUR" for i in range(250)]
        (folder / f"part-{part}.csv").write_text(
            "entity_id,amount_cents,currency\n" + "\n".join(rows)
        )
    options = _options(kafka, "csv-input", input_path=str(folder), input_format="csv")
    summary = run_pipeline(spark, options, None)
    assert summary.ok and summary.tallies.sent == 500, summary.render()
    result = verify(kafka.bootstrap, "csv-input", 500, options.run_id, timeout_seconds=30)
    assert result.missing == 0 and result.beyond_expected == 0, result.render()


def test_malformed_record_fails_the_run_naming_it(
    spark: SparkSession, kafka: Lab, tmp_path: Path
) -> None:
    source = tmp_path / "bad.jsonl"
    source.write_text('{"entity_id": "a", "amount_cents": 1}\n{"entity_id": "b"}\n')
    options = _options(kafka, "bad-input", input_path=str(source), input_format="json")
    summary = run_pipeline(spark, options, None)
    assert not summary.ok
    assert summary.error is not None
    assert "InvalidRecordError: record 1: missing 'amount_cents'" in summary.error
