"""The producer's error table is Kafka's own: every name, code, exception class and
retriable flag in it is Apache Kafka's (`Errors` of the lab's kafka-clients jar) or
librdkafka's (confluent-kafka's `KafkaError`), and what a restart does is written for the
errors the issue names.

Covers: the generated lists equal what the jar and librdkafka list now (a Java program
run against the jar; the generator's --check); every entry of the table is a row of
those lists (name, code, exception, retriable), its librdkafka name is librdkafka's for
that code; a name hangwatch wrote in its restart column that Kafka does not have fails;
the refusals a restart cannot fix include the ones the issue lists and the errors that
live in the client clear; every refusal has a hint; Java exception classes and
librdkafka names reach the same entry.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import confluent_kafka
import pytest

from hangwatch import kafka_errors as ke
from hangwatch.kafka_error_list import APACHE_KAFKA, LIBRDKAFKA

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))
import generate_kafka_errors  # noqa: E402


@pytest.fixture(scope="module")
def jar_errors() -> list[tuple[int, str, str, bool]]:
    """Apache Kafka's `Errors.values()`, listed by running Java against the lab's jar."""
    return generate_kafka_errors.apache_kafka_errors()[1]


def test_the_committed_lists_are_what_kafka_lists_now(
    jar_errors: list[tuple[int, str, str, bool]],
) -> None:
    assert list(APACHE_KAFKA) == jar_errors
    assert list(LIBRDKAFKA) == generate_kafka_errors.librdkafka_errors()[1]
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts/generate_kafka_errors.py"), "--check"],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr


def test_every_entry_is_a_row_of_kafkas_lists(
    jar_errors: list[tuple[int, str, str, bool]],
) -> None:
    broker = {code: (name, exc, retriable) for code, name, exc, retriable in jar_errors}
    for code, info in ke.TABLE.items():
        if code >= 0 or info.exception is not None:
            assert broker[code] == (info.name, info.exception, info.retriable), info
        # librdkafka's own name of the code, read from the library itself
        assert info.rdkafka_name == confluent_kafka.KafkaError(code).name(), info
    assert len(ke.TABLE) == len(ke.RESTART_EFFECTS)


def test_a_name_kafka_does_not_have_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    names = {n for _, n, _, _ in APACHE_KAFKA} | {n for _, n in LIBRDKAFKA}
    assert set(ke.RESTART_EFFECTS) <= names
    monkeypatch.setitem(ke.RESTART_EFFECTS, "MESSAGE_TOO_BIG", (ke.Restart.MEETS_AGAIN, "x"))
    assert "MESSAGE_TOO_BIG" not in {i.name for i in ke._table().values()}


REFUSED = [
    "MSG_SIZE_TOO_LARGE", "TOPIC_AUTHORIZATION_FAILED", "SASL_AUTHENTICATION_FAILED",
    "_AUTHENTICATION", "_UNKNOWN_TOPIC", "INVALID_RECORD", "POLICY_VIOLATION",
    "UNSUPPORTED_COMPRESSION_TYPE", "CLUSTER_AUTHORIZATION_FAILED",
]  # fmt: skip
CLEARED = [
    "NOT_LEADER_FOR_PARTITION", "OUT_OF_ORDER_SEQUENCE_NUMBER", "UNKNOWN_PRODUCER_ID",
    "INVALID_PRODUCER_EPOCH", "PRODUCER_FENCED", "_FENCED",
]  # fmt: skip


@pytest.mark.parametrize("name", REFUSED)
def test_refusals_the_next_client_meets_again_alert(name: str) -> None:
    info = ke.by_name(name)
    assert info is not None and info.restart is ke.Restart.MEETS_AGAIN
    assert info.action is ke.Action.ALERT and info.hint


@pytest.mark.parametrize("name", CLEARED)
def test_errors_that_live_in_the_client_keep_their_restart(name: str) -> None:
    info = ke.by_name(name)
    assert info is not None and info.restart is ke.Restart.CLEARS
    assert info.action is ke.Action.RESTART


def test_timeouts_and_the_clusters_state_decide_nothing_alone() -> None:
    for name in ("_MSG_TIMED_OUT", "REQUEST_TIMED_OUT", "_TRANSPORT", "UNKNOWN_TOPIC_OR_PART"):
        assert ke.by_name(name).restart is ke.Restart.EVIDENCE  # type: ignore[union-attr]
    for name in ("LEADER_NOT_AVAILABLE", "NOT_ENOUGH_REPLICAS", "_ALL_BROKERS_DOWN"):
        assert ke.by_name(name).action is ke.Action.WAIT  # type: ignore[union-attr]
    assert ke.by_name("OFFSET_OUT_OF_RANGE") is None  # a consumer's, not a producer's


def test_every_refusal_has_a_hint_and_java_and_librdkafka_reach_one_entry() -> None:
    assert all(i.hint for i in ke.refusals())
    assert ke.by_exception("RecordTooLargeException") is ke.by_name("MSG_SIZE_TOO_LARGE")
    assert ke.by_exception(
        "org.apache.kafka.common.errors.TopicAuthorizationException"
    ) is ke.by_name("TOPIC_AUTHORIZATION_FAILED")
    assert ke.by_exception("SaslAuthenticationException") is ke.by_code(58)
    assert ke.by_exception("SslAuthenticationException") is ke.by_name("_SSL")
    assert ke.by_exception("UnknownTopicOrPartitionException") is ke.by_code(3)
    assert ke.by_code(10) is ke.by_name("MESSAGE_TOO_LARGE")


def test_the_partition_refusals_are_the_clusters_and_reached_by_every_name() -> None:
    """`partitions_unwritable`'s errors: each in the table as the cluster's state (never a
    refusal the restart column alerts on, never one a restart clears), reached by its
    librdkafka name, its Apache Kafka name and its Java exception alike."""
    assert set(ke.RESTART_EFFECTS) >= ke.PARTITION_REFUSALS
    for name in ke.PARTITION_REFUSALS:
        info = ke.by_name(name)
        assert info is not None and info.restart is ke.Restart.CLUSTER, name
        assert ke.refuses_partition(info), name
    assert ke.by_exception("NotEnoughReplicasException") is ke.by_name("NOT_ENOUGH_REPLICAS")
    assert ke.refuses_partition(ke.by_exception("KafkaStorageException"))
    assert ke.refuses_partition(ke.by_code(20))  # NOT_ENOUGH_REPLICAS_AFTER_APPEND
    for other in ("LEADER_NOT_AVAILABLE", "THROTTLING_QUOTA_EXCEEDED", "_MSG_TIMED_OUT"):
        assert not ke.refuses_partition(ke.by_name(other)), other
    assert not ke.refuses_partition(None)
