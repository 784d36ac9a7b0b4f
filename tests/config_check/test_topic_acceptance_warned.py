"""`config-check --topic`: what a topic's min.insync.replicas means for the producer (pure).

Covers: each client's acks as its own model reads it (librdkafka's and the Java client's
default all, idempotence forcing all, sarama's default WaitForLocal, its constants by name
and a value it does not take); for a producer with acks=all, a topic whose
min.insync.replicas equals its replication factor is warned (one broker's maintenance
refuses every write), one above it refuses every write for good (the exit code says so),
partitions refused now are named with their ISR, an unreadable value is said with why;
a producer with acks=1 gets none of these (the ISR does not hold it). The live read of
the topics is tested on Apache Kafka in tests/sidecar/test_partitions_unwritable_on_the_lab.py.
"""

from __future__ import annotations

import pytest

from hangwatch.acceptance import MIN_INSYNC_FROM_BROKER, MIN_INSYNC_FROM_TOPIC, MinInsync
from hangwatch.time_to_error import java, librdkafka, sarama
from hangwatch.time_to_error.estimate import ClientSettingsError
from hangwatch_pipeline.config_check import FOR_GOOD, topic_findings
from hangwatch_sidecar.probe.acceptance import TopicAcceptance
from hangwatch_sidecar.probe.types import PartitionState

ALL = -1


def topic(
    min_insync: MinInsync | None, isr: tuple[int, ...] = (1, 2, 3), replicas: int = 3
) -> TopicAcceptance:
    ids = tuple(range(1, replicas + 1))
    return TopicAcceptance("orders", (PartitionState(0, 1, ids, isr, None),), min_insync)


def codes(acks: int, *topics: TopicAcceptance) -> list[str]:
    return [f.code for f in topic_findings(acks, list(topics))]


def test_each_clients_acks_as_its_model_reads_them() -> None:
    assert librdkafka.acks({}) == ALL and librdkafka.acks({"acks": "1"}) == 1
    assert librdkafka.acks({"request.required.acks": "0"}) == 0
    assert librdkafka.acks({"acks": "1", "enable.idempotence": "true"}) == ALL
    assert java.acks({}) == ALL and java.acks({"kafka.acks": "1"}) == 1  # Spark's prefix
    assert java.acks({"acks": "1", "enable.idempotence": "false"}) == 1
    assert sarama.acks({}) == 1 and sarama.acks({"Producer.RequiredAcks": "WaitForAll"}) == ALL
    assert sarama.acks({"Producer.RequiredAcks": "-1"}) == ALL
    assert sarama.acks({"Producer.RequiredAcks": "1", "Producer.Idempotent": "true"}) == ALL
    with pytest.raises(ClientSettingsError, match=r"Producer\.RequiredAcks must be"):
        sarama.acks({"Producer.RequiredAcks": "WaitForSome"})


def test_min_insync_equal_to_the_replicas_is_warned_and_above_them_refuses_for_good() -> None:
    equal = topic_findings(ALL, [topic(MinInsync(3, MIN_INSYNC_FROM_TOPIC))])
    assert [f.code for f in equal] == ["no-replica-to-spare"]
    assert (
        "min.insync.replicas 3 (the topic's own) equals its replication factor 3"
        in equal[0].message
    )
    assert "min.insync.replicas 2 keeps writing through one broker down" in equal[0].message
    above = topic_findings(ALL, [topic(MinInsync(3, MIN_INSYNC_FROM_BROKER), (1, 2), replicas=2)])
    assert [f.code for f in above] == [FOR_GOOD]
    assert "the brokers' default) is above its replication factor 2" in above[0].message
    assert codes(ALL, topic(MinInsync(2, MIN_INSYNC_FROM_TOPIC))) == []


def test_partitions_refused_now_and_an_unknown_value_are_named() -> None:
    now = topic_findings(ALL, [topic(MinInsync(3, MIN_INSYNC_FROM_TOPIC), isr=(1, 2))])
    assert [f.code for f in now] == ["no-replica-to-spare", "partitions-unwritable"]
    assert "ISR 2 of 3 replicas" in now[1].message and "out of the ISR: broker 3" in now[1].message
    why = "DescribeConfigs refused: ... (TOPIC_AUTHORIZATION_FAILED)"
    unknown = topic_findings(ALL, [topic(MinInsync(None, problem=why), isr=(1, 2))])
    assert [f.code for f in unknown] == ["min-insync-unknown", "partitions-in-doubt"]
    assert why in unknown[0].message


def test_a_producer_with_acks_one_is_not_held_to_min_insync() -> None:
    shrunk = topic(MinInsync(3, MIN_INSYNC_FROM_TOPIC), isr=(1,))
    assert codes(1, shrunk) == [] and codes(0, shrunk) == []
