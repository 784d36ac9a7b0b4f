"""`hangwatch pipeline verify` reads a partition's offsets through a leader that just moved.

Found by the demo (`jvm-election-recovers`, right after a real election): the verify
step asked the old leader for a partition's watermarks and ended the whole run with
"Broker: Not leader for partition", although the error is retriable and the client's
metadata catches up within a second. Covers, with a consumer that answers as scripted
(the error objects are confluent-kafka's own): a retriable error (as Apache Kafka flags
it) is asked again until it answers; an error a retry cannot change ends the read at
once, naming it; a retriable error outlasting the deadline ends the read, naming it.
"""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError, KafkaException, TopicPartition

from hangwatch_pipeline.verify import OFFSETS_RETRY_SECONDS, VerifyError, watermarks


class _Scripted:
    """A consumer whose `get_watermark_offsets` raises the scripted errors, then answers."""

    def __init__(self, errors: list[int], answer: tuple[int, int] = (0, 42)) -> None:
        self.errors, self.answer, self.asked = list(errors), answer, 0

    def get_watermark_offsets(self, partition: TopicPartition, timeout: float) -> tuple[int, int]:
        self.asked += 1
        if self.errors:
            raise KafkaException(KafkaError(self.errors.pop(0)))
        return self.answer


class _Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def _ask(consumer: _Scripted, clock: _Clock, deadline: float = 30.0) -> tuple[int, int]:
    return watermarks(consumer, TopicPartition("t", 0), deadline, clock, clock.sleep)  # type: ignore[arg-type]


def test_a_leader_that_moved_is_asked_again_until_it_answers() -> None:
    moved = [KafkaError.NOT_LEADER_FOR_PARTITION, KafkaError.LEADER_NOT_AVAILABLE]
    consumer, clock = _Scripted(moved), _Clock()
    assert _ask(consumer, clock) == (0, 42)
    assert consumer.asked == 3 and clock.now == 2 * OFFSETS_RETRY_SECONDS


def test_an_error_a_retry_cannot_change_ends_the_read_at_once() -> None:
    consumer, clock = _Scripted([KafkaError.TOPIC_AUTHORIZATION_FAILED]), _Clock()
    with pytest.raises(VerifyError, match=r"cannot read the offsets of t\[0\]: .*[Aa]uthoriz"):
        _ask(consumer, clock)
    assert consumer.asked == 1 and clock.now == 0


def test_a_leader_that_never_comes_back_ends_the_read_at_the_deadline() -> None:
    consumer, clock = _Scripted([KafkaError.NOT_LEADER_FOR_PARTITION] * 100), _Clock()
    with pytest.raises(VerifyError, match=r"t\[0\]: .*[Nn]ot leader"):
        _ask(consumer, clock, deadline=5.0)
    assert clock.now <= 5.0 and consumer.asked == 10
