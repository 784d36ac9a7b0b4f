"""Thread dumps -> running tasks and Kafka producer thread states, from public names alone.

Covers, on thread dumps RECORDED from real Spark executors (the driver's REST API) whose
tasks ran the REAL Java Kafka client - kafka-clients 0.11.0.3 (S4's) and 3.9.2 (the
version Spark's Kafka sink pins) - against Apache Kafka (scripts/record_thread_dumps.py):
- S4: the I/O thread inside a delivery callback that waits for a send's result on itself
  is `in_callback`, naming the user frame and the Kafka frame that called it;
- tasks waiting in `BufferPool.allocate` (the buffer that stalled I/O thread never
  frees), in `flush` and for metadata from a bootstrap that answers nothing;
- controls: producers at work (`sending`); a real PySpark executor with no producer;
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

CALLERS = {
    "recorded_kafka_clients_0.11.0.3_states.json":
        "org.apache.kafka.clients.producer.internals.ProducerBatch.completeFutureAndFireCallbacks",
    "recorded_kafka_clients_3.9.2_states.json":
        "org.apache.kafka.clients.producer.KafkaProducer$AppendCallbacks.onCompletion",
}  # fmt: skip
"""Real executors running the real Java client, S4's version and Spark's (see the labels),
and the client's frame that calls the user's callback in each (3.x wraps it)."""
RECORDED_STATES = list(CALLERS)


def _by_name(name: str) -> dict[str, Any]:
    result = classify_dump(dump(name))
    return {t.name: t for t in result.threads} | {"_tasks": result.tasks}


def _task_in(threads: dict[str, Any], activity: Activity) -> Any:
    (found,) = [t for k, t in threads.items() if k != "_tasks" and t.activity is activity]
    return found


@pytest.mark.parametrize("name", RECORDED_STATES)
def test_s4_io_thread_waits_for_itself_inside_its_callback(name: str) -> None:
    threads = _by_name(name)
    io = threads["kafka-producer-network-thread | s4-callback"]
    assert io.role is ThreadRole.NETWORK and io.activity is Activity.IN_CALLBACK
    assert io.user_frame.startswith("dev.hangwatch.recording.ProducerStates$$Lambda")
    assert io.user_frame.endswith(".onCompletion")
    assert io.frame == CALLERS[name]
    assert io.state == "WAITING" and "waits for itself" in io.detail
    assert io.waits_on is not None and "CountDownLatch" in io.waits_on


def test_spark_3_5_dumps_name_the_lock_in_blocked_by_lock() -> None:
    """Spark 3.5's entries have no lockName, only `blockedByLock: "Lock(<lock>)"` (seen in
    a real 3.5.7 driver's dump); the waited-on lock is the same."""
    entries = dump(RECORDED_STATES[-1])
    older = []
    for entry in entries:
        shaped = {k: v for k, v in entry.items() if k != "lockName"}
        if entry.get("lockName"):
            shaped["blockedByLock"] = f"Lock({entry['lockName']})"
        older.append(shaped)
    io = {t.name: t for t in classify_dump(older).threads}[
        "kafka-producer-network-thread | s4-callback"
    ]
    newer = {t.name: t for t in classify_dump(entries).threads}
    assert io.waits_on == newer[io.name].waits_on and "CountDownLatch" in (io.waits_on or "")
    assert [t.waits_on for t in classify_dump(older).threads] == [
        t.waits_on for t in newer.values()
    ]


@pytest.mark.parametrize("name", RECORDED_STATES)
def test_tasks_wait_for_buffer_memory_flush_and_metadata(name: str) -> None:
    threads = _by_name(name)
    buffer = _task_in(threads, Activity.AWAITING_BUFFER)
    flush = _task_in(threads, Activity.FLUSHING)
    metadata = _task_in(threads, Activity.AWAITING_METADATA)
    assert buffer.frame == "org.apache.kafka.clients.producer.internals.BufferPool.allocate"
    assert flush.frame.endswith("RecordAccumulator.awaitFlushCompletion")
    assert metadata.frame.endswith(".awaitUpdate")  # Metadata (0.11) / ProducerMetadata (3.x)
    for waiting in (buffer, flush, metadata):
        assert waiting.role is ThreadRole.TASK and waiting.task_id is not None
    tasks = {t.task_id for t in threads["_tasks"]}
    assert {buffer.task_id, flush.task_id, metadata.task_id} < tasks and len(tasks) == 4


@pytest.mark.parametrize("name", RECORDED_STATES)
def test_producers_at_work_are_sending(name: str) -> None:
    threads = _by_name(name)
    for client_id in ("healthy", "no-metadata"):
        io = threads[f"kafka-producer-network-thread | {client_id}"]
        assert io.activity is Activity.SENDING
        assert io.frame.startswith("org.apache.kafka.clients.producer.internals.Sender.")


def test_a_pyspark_executor_shows_no_producer() -> None:
    result = classify_dump(dump("recorded_pyspark_executor_threads.json"))
    assert result.skipped == 0 and result.threads == () and len(result.tasks) == 1


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
    optional={"lockName": JSON, "blockedByLock": JSON},
)


@settings(max_examples=300)
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
    entry = next(  # the wedged I/O thread
        e for e in dump(RECORDED_STATES[0]) if e["threadName"].endswith("| s4-callback")
    )
    result = classify_dump([entry] * (MAX_THREADS + 500))
    assert result.skipped == 500 and len(result.threads) == MAX_THREADS
