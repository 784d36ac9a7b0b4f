"""Spark's own record of failed task attempts, classified with the one error table:
a refusal the next executor meets again -> `writes_rejected` (Spark's Kafka sink and
plain JVM or Python producers alike), never a restart verdict.

The exception texts are real: Spark 4.2's Kafka sink (kafka-clients 3.9.2) writing 1 KiB
records to a topic of the lab's Apache Kafka whose max.message.bytes is 200
(scripts/record_failed_attempts.py, its answers in spark_fixtures/; seen in two runs:
one or two of four attempts fail with RecordTooLargeException, the others with
"Expiring 4 record(s) ... since batch creation" after delivery.timeout.ms, the Java
producer splitting and retrying the refused batch meanwhile).

Covers: the driver's `taskList` answer -> this executor's failed attempts (others'
skipped), wrong answers -> one AnswerError line, any JSON -> attempts or AnswerError;
RecordTooLargeException / TopicAuthorizationException / SaslAuthenticationException, a
Python task's KafkaError{code=TOPIC_AUTHORIZATION_FAILED} and the wrapper's DeliveryFailed
naming MSG_SIZE_TOO_LARGE (shapes written here, not recorded) -> writes_rejected naming
the task, the exception and Kafka's name with a hint; the TimeoutException of the same
run decides nothing (a timeout alone does not tell); an
attempt older than the window is forgotten unless a later attempt of its task runs (the
recorded run: RecordTooLargeException first, then three timeouts); the pod's verdict is
writes_rejected, not a restart verdict; the message classifier on untrusted text
(hypothesis): total, bounded, finds a known exception wherever it is embedded, never a
name Kafka does not have.
"""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hangwatch import kafka_errors as ke
from hangwatch.contracts import Verdict as V
from hangwatch_sidecar.assessment import Thresholds
from hangwatch_sidecar.round import RoundEvidence
from hangwatch_sidecar.rules import evaluate
from hangwatch_sidecar.spark import answers
from hangwatch_sidecar.spark.judge import REFUSAL_WINDOW_SECONDS, judge_spark
from hangwatch_sidecar.spark.types import (
    ExecutorCounts,
    FailedAttempt,
    RunningTask,
    SparkView,
    TaskThread,
)
from tests.sidecar.builders import cluster
from tests.sidecar.spark_builders import FIXTURES

TOO_LARGE = (
    "org.apache.kafka.common.errors.RecordTooLargeException: The request included a message "
    "larger than the max message size the server will accept.\n"
)
EXPIRED = (
    "org.apache.kafka.common.errors.TimeoutException: Expiring 4 record(s) for small-0:120000 "
    "ms has passed since batch creation\n"
)
"""Both as Spark 4.2's executor reported the failed attempts of the recorded run."""
NOT_AUTHORIZED = (
    "org.apache.kafka.common.errors.TopicAuthorizationException: Not authorized to access "
    "topics: [orders]\n"
)
LOGIN = (
    "org.apache.kafka.common.errors.SaslAuthenticationException: Authentication failed "
    "during authentication due to invalid credentials with SASL mechanism SCRAM-SHA-512\n"
)
PYTHON_TASK = (
    "org.apache.spark.api.python.PythonException: Traceback (most recent call last):\n"
    '  File "job.py", line 12, in write\n'
    "cimpl.KafkaException: KafkaError{code=TOPIC_AUTHORIZATION_FAILED,val=29,"
    'str="Broker: Topic authorization failed"}\n'
)
"""A PySpark task whose plain confluent-kafka producer raised (the shape Spark reports)."""
WRAPPER_TASK = (
    "org.apache.spark.api.python.PythonException: Traceback (most recent call last):\n"
    "hangwatch_producer.producer.DeliveryFailed: delivery failed: 0 unacknowledged and 784 "
    "failed of 784 messages (delivered 0); first errors: orders[0]: MSG_SIZE_TOO_LARGE: "
    "Broker: Message size too large (x784)\n"
)
"""The wrapper's own DeliveryFailed, as the issue's run raised it."""
T = Thresholds(stall_seconds=10, heartbeat_seconds=15)


def task_entry(tid: int, error: str, executor: str = "1", **changes: Any) -> dict[str, Any]:
    return {
        "taskId": tid, "index": 0, "attempt": tid - 1, "launchTime": "2026-11-27T11:13:10.127GMT",
        "duration": 120_000, "executorId": executor, "status": "FAILED", "errorMessage": error,
        **changes,
    }  # fmt: skip


def view(*errors: str, age: float = 1.0) -> SparkView:
    attempts = tuple(
        FailedAttempt(
            task_id=i,
            stage_id=1,
            stage_attempt=0,
            index=0,
            attempt=i - 1,
            error=e,
            seen_at=100.0 - age,
        )
        for i, e in enumerate(errors, start=1)
    )
    return SparkView(at=100.0, available=True, failed_attempts=attempts, executor_id="1")


def test_the_task_list_gives_this_executors_failed_attempts() -> None:
    doc = [task_entry(1, EXPIRED), task_entry(2, TOO_LARGE), task_entry(3, TOO_LARGE, "2")]
    found = answers.failed_attempts(doc, "1", (1, 0))
    assert [(a.task_id, a.label) for a in found] == [
        (1, "task 0.0 of stage 1.0 (TID 1)"), (2, "task 0.1 of stage 1.0 (TID 2)"),
    ]  # fmt: skip
    assert found[1].error == TOO_LARGE
    assert found[0].ended_ts == pytest.approx(1_795_777_990.127 + 120.0)
    stages = [{"stageId": 1, "attemptId": 0, "numFailedTasks": 4},
              {"stageId": 2, "attemptId": 0, "numFailedTasks": 0}]  # fmt: skip
    assert answers.stages_with_failures(stages) == [(1, 0)]
    listed = [{"id": "1", "activeTasks": 1, "failedTasks": 4, "completedTasks": 9}]
    assert answers.listed_counts(listed, "1") == ExecutorCounts(1, 4, 9)
    assert answers.listed_counts(listed, "2") is None


@pytest.mark.parametrize(
    "doc",
    [
        {"taskId": 1},
        [task_entry(1, TOO_LARGE, taskId=-1)],
        [task_entry(1, TOO_LARGE, errorMessage=7)],
        [task_entry(1, TOO_LARGE, launchTime="yesterday")],
        [task_entry(1, TOO_LARGE, duration=True)],
    ],
)
def test_wrong_task_lists_are_one_answer_error(doc: Any) -> None:
    with pytest.raises(answers.AnswerError) as caught:
        answers.failed_attempts(doc, "1", (1, 0))
    assert "\n" not in str(caught.value) and str(caught.value).startswith("task list:")


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=6)
    ),
    max_leaves=20,
)


@given(JSON)
def test_any_json_is_attempts_or_one_answer_error(doc: Any) -> None:
    try:
        found = answers.failed_attempts(doc, "1", (1, 0))
    except answers.AnswerError as exc:
        assert "\n" not in str(exc)
    else:
        assert all(isinstance(a, FailedAttempt) for a in found)


@pytest.mark.parametrize(
    ("error", "kafka_name"),
    [
        (TOO_LARGE, "MESSAGE_TOO_LARGE"),
        (NOT_AUTHORIZED, "TOPIC_AUTHORIZATION_FAILED"),
        (LOGIN, "SASL_AUTHENTICATION_FAILED"),
        (PYTHON_TASK, "TOPIC_AUTHORIZATION_FAILED"),
        (WRAPPER_TASK, "MESSAGE_TOO_LARGE"),
    ],
)
def test_a_refused_attempt_is_writes_rejected(error: str, kafka_name: str) -> None:
    (finding,) = judge_spark(view(error), stall_seconds=10, heartbeat_seconds=15,
                             cluster_healthy=True)  # fmt: skip
    assert finding.verdict is V.WRITES_REJECTED and finding.tasks == (1,)
    assert finding.reason.startswith("task 0.0 of stage 1.0 (TID 1) failed with ")
    assert f"({kafka_name})" in finding.reason and "a restart cannot help (hint:" in finding.reason


def test_the_runs_timeout_decides_nothing_and_old_attempts_are_forgotten() -> None:
    assert judge_spark(view(EXPIRED), stall_seconds=10, heartbeat_seconds=15,
                       cluster_healthy=True) == ()  # fmt: skip
    old = view(TOO_LARGE, age=REFUSAL_WINDOW_SECONDS + 1)
    assert judge_spark(old, stall_seconds=10, heartbeat_seconds=15, cluster_healthy=True) == ()


def test_the_recorded_run_is_writes_rejected_while_its_task_retries() -> None:
    doc = json.loads((FIXTURES / "recorded_failed_attempts_record_too_large.json").read_text())
    assert answers.stages_with_failures(doc["stages"]) == [(0, 0)]
    found = answers.failed_attempts(doc["task_lists"]["0/0"], "driver", (0, 0))
    assert [a.attempt for a in found] == [0, 1, 2, 3]
    first = found[0]
    ended = first.ended_ts or 0.0
    seen = tuple(replace(a, seen_at=(a.ended_ts or 0.0) - ended) for a in found[:1])
    just_failed = SparkView(at=1.0, available=True, failed_attempts=seen)
    (finding,) = judge_spark(just_failed, stall_seconds=10, heartbeat_seconds=15,
                             cluster_healthy=True)  # fmt: skip
    assert finding.verdict is V.WRITES_REJECTED and "RecordTooLargeException" in finding.reason
    later = replace(just_failed, at=REFUSAL_WINDOW_SECONDS + 60)
    assert judge_spark(later, stall_seconds=10, heartbeat_seconds=15, cluster_healthy=True) == ()
    retried = RunningTask(TaskThread(99, "t", 0, 0, first.index, 1), running_seconds=50.0)
    still = replace(later, tasks=(retried,))
    again = judge_spark(still, stall_seconds=10, heartbeat_seconds=15, cluster_healthy=True)
    assert [f.verdict for f in again] == [V.WRITES_REJECTED, None]  # and "attempt 2"
    expired = [a for a in found if "TimeoutException" in a.error]
    assert len(expired) == 3
    alone = SparkView(at=1.0, available=True, failed_attempts=tuple(expired))
    assert judge_spark(alone, stall_seconds=10, heartbeat_seconds=15, cluster_healthy=True) == ()


def test_the_pod_is_writes_rejected_not_a_restart_verdict() -> None:
    result = evaluate(
        RoundEvidence(cluster(), [], spark=view(EXPIRED, TOO_LARGE)), thresholds=T, now=100.0
    )
    assert result.pod.verdict is V.WRITES_REJECTED
    assert "TID 2" in result.pod.reasons[0] and result.pod.evidence["spark_tasks"] == [2]


NAMES = st.sampled_from(sorted({i.exception for i in ke.TABLE.values() if i.exception}))


@given(st.text(max_size=3000))
def test_any_text_classifies_to_a_kafka_entry_or_none(text: str) -> None:
    said = ke.classify_message(text)
    if said is not None:
        assert said.info in ke.TABLE.values()
        assert len(said.detail) <= 200 and said.detail.isprintable()
        assert len(said.exception) <= 200


@given(st.text(alphabet=" \n\t:;,()[]", max_size=50), NAMES, st.text(max_size=200))
def test_a_known_exception_is_found_wherever_it_is(before: str, name: str, after: str) -> None:
    said = ke.classify_message(f"{before}org.apache.kafka.common.errors.{name}: {after}")
    assert said is not None and said.info is ke.by_exception(name)


@given(st.text(alphabet="abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_$",
               min_size=1, max_size=40), NAMES)  # fmt: skip
def test_a_longer_name_ending_in_a_known_one_is_not_it(prefix: str, name: str) -> None:
    said = ke.classify_message(f"{prefix}{name}: detail")
    assert said is None or said.info is ke.by_exception(prefix + name)
