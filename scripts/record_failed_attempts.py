"""Records what Spark's driver REST API says of task attempts the Kafka cluster refused.

Starts the lab's real Apache Kafka (one broker), creates a topic whose
`max.message.bytes` is 200, writes 1 KiB records to it with Spark's own Kafka sink
(`df.write.format("kafka")`, pyspark `local[1,4]`: one core, four attempts per task;
`delivery.timeout.ms` 20 s) and
saves the driver's answers about the failed attempts - the stage list and each failed
stage's `taskList?status=FAILED` - to `tests/sidecar/spark_fixtures/`. The sidecar's
tests classify these real `errorMessage`s. Run again when Spark or kafka-clients change:

    python scripts/record_failed_attempts.py
"""

from __future__ import annotations

import json
import sys
import urllib.request
from pathlib import Path
from typing import Any

from confluent_kafka import admin as kafka_admin
from confluent_kafka.cimpl import NewTopic
from py4j.protocol import Py4JJavaError  # type: ignore[import-untyped]
from pyspark.sql import SparkSession

from hangwatch_lab import Lab
from hangwatch_pipeline.job import session_conf
from hangwatch_pipeline.run_options import SINK_CONNECTOR, RunOptions
from hangwatch_testing.spark_driver import stop_spark

OUT = Path(__file__).resolve().parents[1] / "tests/sidecar/spark_fixtures"
TOPIC = "small-records"
LIMIT = 200


def _get(ui: str, path: str) -> Any:
    with urllib.request.urlopen(f"{ui}/api/v1{path}", timeout=30) as answer:
        return json.load(answer)


def record() -> Path:
    with Lab(brokers=1, topics={}, engine="kafka") as lab:
        admin = kafka_admin.AdminClient({"bootstrap.servers": lab.bootstrap})
        topic = NewTopic(TOPIC, 1, 1, config={"max.message.bytes": str(LIMIT)})
        admin.create_topics([topic])[TOPIC].result(60)
        print(f"record-failed-attempts: topic {TOPIC} max.message.bytes={LIMIT}", flush=True)
        master = "local[1,4]"
        options = RunOptions(
            bootstrap=lab.bootstrap, topic=TOPIC, events=1, sink=SINK_CONNECTOR, master=master
        )
        conf = {**session_conf(options), "spark.ui.enabled": "true", "spark.ui.port": "0"}
        builder = SparkSession.builder.master(master).appName("hangwatch-refused")
        for key, value in conf.items():
            builder = builder.config(key, value)
        spark = builder.getOrCreate()
        try:
            spark.sparkContext.setLogLevel("OFF")
            rows = spark.range(4).selectExpr(
                "CAST(id AS STRING) AS key", "repeat('x', 1024) AS value"
            )
            try:
                (rows.write.format("kafka").option("kafka.bootstrap.servers", lab.bootstrap)
                 .option("kafka.request.timeout.ms", "10000")
                 .option("kafka.delivery.timeout.ms", "20000")
                 .option("topic", TOPIC).save())  # fmt: skip
            except Py4JJavaError as exc:  # the job fails: that is the recording
                print(f"record-failed-attempts: job failed: {str(exc)[:160]}", flush=True)
            ui = spark.sparkContext.uiWebUrl or ""
            app = spark.sparkContext.applicationId
            query = "status=active&status=failed&details=false"
            stages = _get(ui, f"/applications/{app}/stages?{query}")
            lists = {
                f"{s['stageId']}/{s['attemptId']}": _get(
                    ui,
                    f"/applications/{app}/stages/{s['stageId']}/{s['attemptId']}"
                    "/taskList?status=FAILED&length=20",
                )
                for s in stages
                if s.get("numFailedTasks")
            }
            version = _get(ui, "/version")["spark"]
        finally:
            stop_spark(spark)
    out = OUT / "recorded_failed_attempts_record_too_large.json"
    doc = {"spark": version, "topic": TOPIC, "max_message_bytes": LIMIT,
           "stages": stages, "task_lists": lists}  # fmt: skip
    out.write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n")
    print(f"record-failed-attempts: wrote {out}", flush=True)
    return out


if __name__ == "__main__":
    record()
    sys.exit(0)
