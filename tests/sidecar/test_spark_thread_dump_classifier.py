"""Thread dumps -> running tasks and Kafka producer thread states, from public names alone.

Covers, on fixtures labelled inside as constructed (built by hand from the Java Kafka
client's public class and thread names in Spark's REST format) or recorded (from a real
Spark 4.3 executor's REST API):
- S4: the I/O thread inside a delivery callback that waits for a send's result on itself
  is `in_callback`, naming the user frame and the Kafka frame that called it; tasks in
  `BufferPool.allocate` wait for buffer memory; the same on the real executor JVM that
  ran the constructed classes (recorded), where task 0 waits for metadata;
- S2: `flush` and a synchronous send's `FutureRecordMetadata.get` on task threads, the
  I/O thread in its own loop (`sending`); a retried attempt's number;
- S1/S3: Spark's own Kafka sink waiting in `waitOnMetadata`; the old Scala producer's
  metadata refresh under a pre-3.1 Spark thread name (TID only);
- controls: a Java producer at work, an idle pool thread that kept its last task's
  name, a real PySpark executor (recorded) - no waits, only real running tasks;
- frames in every format Spark and jstack print (module and loader prefixes, hidden
  lambda classes, `at `), task thread names of old and new Spark;
- hostile input (hypothesis): any JSON gives a ThreadDump or a ThreadDumpError, and a
  huge dump costs bounded work.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hangwatch_sidecar.spark.threads import (
    MAX_THREADS,
    Frame,
    ThreadDumpError,
    classify_dump,
    parse_frame,
    task_of,
)
from hangwatch_sidecar.spark.types import Activity, ThreadRole

from .spark_builders import dump


def _by_name(name: str) -> dict[str, Any]:
    result = classify_dump(dump(name))
    return {t.name: t for t in result.threads} | {"_tasks": result.tasks}


def test_s4_io_thread_waits_for_itself_inside_its_callback() -> None:
    threads = _by_name("constructed_s4_callback_waits_for_itself.json")
    io = threads["kafka-producer-network-thread | orders-writer"]
    assert io.role is ThreadRole.NETWORK and io.activity is Activity.IN_CALLBACK
    assert io.user_frame == "com.example.orders.OrdersWriter$ResendCallback.onCompletion"
    assert io.frame == (
        "org.apache.kafka.clients.producer.internals.ProducerBatch.completeFutureAndFireCallbacks"
    )
    assert io.state == "WAITING" and "waits for itself" in io.detail
    assert io.waits_on == "java.util.concurrent.CountDownLatch$Sync@785982e7"
    buffer = [
        t for t in threads.values() if getattr(t, "activity", None) is Activity.AWAITING_BUFFER
    ]
    assert sorted(t.task_id for t in buffer) == [120, 121]
    assert all(t.role is ThreadRole.TASK for t in buffer)
    assert [t.task_id for t in threads["_tasks"]] == [120, 121]  # the idle pool thread is no task


def test_s4_on_a_real_executor_jvm_running_constructed_classes() -> None:
    threads = _by_name("recorded_constructed_jvm_threads.json")
    io = threads["kafka-producer-network-thread | constructed-1"]
    assert io.activity is Activity.IN_CALLBACK
    assert io.user_frame == "constructed.user.DeliveryCallback.onCompletion"
    assert "waits for itself" in io.detail
    waiting = threads["Executor task launch worker for task 0.0 in stage 0.0 (TID 0)"]
    assert waiting.activity is Activity.AWAITING_METADATA and waiting.task_id == 0
    assert waiting.frame.endswith("ProducerMetadata.awaitUpdate")
    (running,) = threads["_tasks"]
    assert (running.task_id, running.stage, running.index, running.attempt) == (0, (0, 0), 0, 0)


def test_s2_flush_and_result_waits_while_the_io_thread_polls() -> None:
    threads = _by_name("constructed_s2_flush_and_get_wait.json")
    flush = threads["Executor task launch worker for task 2.0 in stage 9.0 (TID 310)"]
    get = threads["Executor task launch worker for task 5.1 in stage 9.0 (TID 318)"]
    assert flush.activity is Activity.FLUSHING
    assert flush.frame.endswith("RecordAccumulator.awaitFlushCompletion")
    assert get.activity is Activity.AWAITING_RESULT and get.task_id == 318
    assert threads["kafka-producer-network-thread | clicks"].activity is Activity.SENDING
    attempts = {t.task_id: t.attempt for t in threads["_tasks"]}
    assert attempts == {310: 0, 318: 1}


def test_s1_spark_sink_and_s3_old_scala_producer_wait_for_metadata() -> None:
    threads = _by_name("constructed_s1_s3_metadata_waits.json")
    sink = threads["Executor task launch worker for task 0.0 in stage 2.0 (TID 14)"]
    old = threads["Executor task launch worker for task 7"]
    assert sink.activity is Activity.AWAITING_METADATA
    assert sink.frame.endswith("ProducerMetadata.awaitUpdate")
    assert old.activity is Activity.AWAITING_METADATA and old.state == "RUNNABLE"
    assert old.frame == "kafka.client.ClientUtils$.fetchTopicMetadata"
    old_task = next(t for t in threads["_tasks"] if t.task_id == 7)
    assert old_task.stage is None and old_task.label == "task TID 7"


@pytest.mark.parametrize(
    "name", ["constructed_healthy_java_producer.json", "recorded_pyspark_executor_threads.json"]
)
def test_controls_show_no_wait(name: str) -> None:
    result = classify_dump(dump(name))
    assert all(t.activity is Activity.SENDING for t in result.threads)
    assert result.skipped == 0
    if name.startswith("constructed"):
        assert [t.task_id for t in result.tasks] == [21]  # TID 20's thread is idle
    else:
        assert len(result.tasks) == 1 and result.threads == ()


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("java.base@17.0.15/java.lang.Object.wait(Native Method)\n\t-  waiting on x\n",
         Frame("java.lang.Object", "wait")),
        ("app//org.apache.spark.rdd.RDD$$Lambda$809/0x00007fa5145ae5a8.apply(Unknown Source)\n",
         Frame("org.apache.spark.rdd.RDD$$Lambda$809", "apply")),
        ("org.apache.kafka.clients.Metadata.awaitUpdate(Metadata.java:177)",
         Frame("org.apache.kafka.clients.Metadata", "awaitUpdate")),
        ("\tat com.example.Cb.onCompletion(Cb.java:3)", Frame("com.example.Cb", "onCompletion")),
        ("loader/module@1.0/a.B.c(B.java:1)", Frame("a.B", "c")),
        ("- locked <0x1>", None),
        ("", None),
        ("(no class)", None),
        ("a b.c(x)", None),
    ],
)  # fmt: skip
def test_frames_in_every_printed_format(text: str, expected: Frame | None) -> None:
    assert parse_frame(text) == expected


def test_task_thread_names_of_old_and_new_spark() -> None:
    new = task_of("Executor task launch worker for task 12.3 in stage 4.1 (TID 99)")
    assert new is not None and (new.task_id, new.stage, new.index, new.attempt) == (
        99,
        (4, 1),
        12,
        3,
    )
    old = task_of("Executor task launch worker for task 99")
    assert old is not None and old.task_id == 99 and old.stage is None
    for name in ("Executor task idle worker#33", "Executor task launch worker-3", "main", ""):
        assert task_of(name) is None


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=40),
    lambda inner: (
        st.lists(inner, max_size=5) | st.dictionaries(st.text(max_size=12), inner, max_size=6)
    ),
    max_leaves=40,
)
ENTRY = st.fixed_dictionaries(
    {
        "threadId": st.integers() | st.booleans() | st.text(max_size=3),
        "threadName": st.sampled_from(
            ["kafka-producer-network-thread | p", "Executor task launch worker for task 1", "x"]
        )
        | st.text(max_size=30),
        "threadState": st.sampled_from(["WAITING", "RUNNABLE"]) | st.integers(),
        "stackTrace": st.fixed_dictionaries(
            {"elems": st.lists(st.text(max_size=80) | st.integers(), max_size=8)}
        )
        | JSON,
    },
    optional={"lockName": JSON},
)


@settings(max_examples=300, deadline=None)
@given(st.one_of(JSON, st.lists(ENTRY | JSON, max_size=12)))
def test_any_json_is_a_dump_or_one_error(doc: Any) -> None:
    try:
        result = classify_dump(doc)
    except ThreadDumpError:
        assert not isinstance(doc, list)
        return
    read = len(doc) - result.skipped  # every entry read is a thread: one task, one producer at most
    assert 0 <= read <= len(doc)
    assert len(result.threads) <= read and len(result.tasks) <= read


def test_a_huge_dump_is_read_only_up_to_the_bound() -> None:
    entry = dump("constructed_s4_callback_waits_for_itself.json")[0]
    result = classify_dump([entry] * (MAX_THREADS + 500))
    assert result.skipped == 500 and len(result.threads) == MAX_THREADS
