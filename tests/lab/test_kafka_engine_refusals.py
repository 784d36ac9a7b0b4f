"""What the controls of refused writes need from the real Kafka engine, seen by real clients.

One 3-broker Apache Kafka lab (the default 4.x) serves the module, the one the refusal
controls use (`hangwatch_testing.clients.refusals.refusals_lab`): a SASL user allowed
to write one topic, automatic topic creation off and one topic with its own
`max.message.bytes`.
Covers, each with confluent-kafka: a topic config given at creation is the broker's (a
record over it is refused MSG_SIZE_TOO_LARGE, a smaller one written, a value Kafka
refuses is an error naming it; a running topic's limit lowered refuses, lifted writes
again); with automatic creation off a write to a topic that
does not exist fails and creates nothing; on the
SASL listener the authorizer lets a user write where an ACL allows it, refuses a topic
without one (TOPIC_AUTHORIZATION_FAILED), and a wrong password fails the login while
the PLAINTEXT listener's super user (the lab's own) writes anywhere; a client quota
throttles (the broker reports throttle time, every record is still written). The mock
refuses each with one line naming the engine that can. Settings that do not fit (a
value out of range, an option the engine does not have) are one usage error before
anything starts.
"""

from __future__ import annotations

import re
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import KafkaError, Producer
from confluent_kafka.admin import ConfigResource, ResourceType
from hypothesis import assume, given
from hypothesis import strategies as st

from hangwatch.errors import LabError, UsageError
from hangwatch_lab import Lab
from hangwatch_lab.kafka import KafkaLab
from hangwatch_testing.clients.refusals import PASSWORD, SMALL_LIMIT, refusals_lab, sasl_login

pytestmark = pytest.mark.xdist_group("kafka-engine")


@pytest.fixture(scope="module")
def lab() -> Iterator[KafkaLab]:
    with refusals_lab() as running:
        assert isinstance(running, KafkaLab)
        yield running


def _send(conf: dict[str, Any], topic: str, values: list[bytes], timeout: float = 20) -> list[Any]:
    """Produce `values` to `topic`; each delivery's error (None: written) and, last, the
    client-level errors the error callback reported."""
    reported: list[KafkaError] = []
    producer = Producer(
        {
            "log_level": 0,
            "message.timeout.ms": int(timeout * 1000) // 2,
            "error_cb": reported.append,
            **conf,
        }
    )
    delivered: list[KafkaError | None] = []
    for value in values:
        producer.produce(topic, value, callback=lambda err, _msg: delivered.append(err))
    producer.flush(timeout)
    return [*delivered, reported]


def _sasl(lab: KafkaLab, password: str) -> dict[str, Any]:
    return {"bootstrap.servers": lab.sasl_bootstrap, **sasl_login(password)}


def test_a_topic_config_given_at_creation_is_the_brokers(lab: KafkaLab) -> None:
    admin = lab.admin()
    resource = ConfigResource(ResourceType.TOPIC, "small")
    configs = admin.describe_configs([resource])[resource].result(timeout=10)
    assert configs["max.message.bytes"].value == str(SMALL_LIMIT)
    *too_large, _ = _send({"bootstrap.servers": lab.bootstrap}, "small", [b"x" * 1024])
    assert [e.code() for e in too_large] == [KafkaError.MSG_SIZE_TOO_LARGE]
    *small, _ = _send({"bootstrap.servers": lab.bootstrap}, "small", [b"x" * 10])
    assert small == [None]
    with pytest.raises(LabError, match=r"creating topic bad failed: .*max\.message\.bytes"):
        lab.create_topic("bad", 1, {"max.message.bytes": "lots"})
    assert "bad" not in lab.topics


def test_a_running_topics_limit_is_lowered_then_lifted(lab: KafkaLab) -> None:
    """`alter_topic` changes the running topic's config: refused while it holds, written
    once its override is removed (the demo's message-too-large fault and its heal)."""
    conf, topic = {"bootstrap.servers": lab.bootstrap}, f"alter-{uuid.uuid4().hex[:6]}"
    lab.create_topic(topic, 1)
    assert _send(conf, topic, [b"x" * 1024])[:-1] == [None]
    lab.alter_topic(topic, {"max.message.bytes": str(SMALL_LIMIT)})
    *refused, _ = _send(conf, topic, [b"x" * 1024])
    assert [e.code() for e in refused] == [KafkaError.MSG_SIZE_TOO_LARGE]
    lab.alter_topic(topic, {"max.message.bytes": None})
    resource, admin = ConfigResource(ResourceType.TOPIC, topic), lab.admin()
    configs = admin.describe_configs([resource])[resource].result(timeout=10)
    assert configs["max.message.bytes"].value != str(SMALL_LIMIT)
    assert _send(conf, topic, [b"x" * 1024])[:-1] == [None]
    with pytest.raises(LabError, match=rf"altering topic {topic} .*max\.message\.bytes"):
        lab.alter_topic(topic, {"max.message.bytes": "lots"})


def test_without_automatic_creation_a_write_to_a_missing_topic_fails_and_creates_nothing(
    lab: KafkaLab,
) -> None:
    missing = f"missing-{uuid.uuid4().hex[:6]}"
    # librdkafka fails a message to a topic that never appears after
    # topic.metadata.propagation.max.ms (30 s by default; the message times out first
    # when its timeout is shorter): 2 s here
    conf = {"bootstrap.servers": lab.bootstrap, "topic.metadata.propagation.max.ms": 2000}
    *failed, _ = _send(conf, missing, [b"v"], timeout=20)
    assert len(failed) == 1 and failed[0] is not None
    assert failed[0].code() in (KafkaError._UNKNOWN_TOPIC, KafkaError.UNKNOWN_TOPIC_OR_PART)
    assert missing not in lab.admin().list_topics(timeout=10).topics


def test_the_authorizer_checks_sasl_users_against_acls(lab: KafkaLab) -> None:
    *allowed, errors = _send(_sasl(lab, PASSWORD), "open", [b"v"])
    assert allowed == [None], errors
    *denied, _ = _send(_sasl(lab, PASSWORD), "closed", [b"v"])
    assert [e.code() for e in denied] == [KafkaError.TOPIC_AUTHORIZATION_FAILED]
    *super_user, _ = _send({"bootstrap.servers": lab.bootstrap}, "closed", [b"v"])
    assert super_user == [None]


def test_a_wrong_password_fails_the_login(lab: KafkaLab) -> None:
    *failed, reported = _send(_sasl(lab, "wrong"), "open", [b"v"], timeout=10)
    assert failed and all(e is not None for e in failed)
    assert KafkaError._AUTHENTICATION in {e.code() for e in reported}, reported
    assert "Authentication failed" in " ".join(e.str() for e in reported)


def test_a_client_quota_throttles_without_refusing(lab: KafkaLab) -> None:
    lab.set_quota("slow", producer_byte_rate=4096)
    throttled: list[float] = []
    producer = Producer(
        {
            "bootstrap.servers": lab.bootstrap,
            "client.id": "slow",
            "log_level": 0,
            "linger.ms": 5,
            "throttle_cb": lambda event: throttled.append(event.throttle_time),
        }
    )
    delivered: list[KafkaError | None] = []
    deadline = time.monotonic() + 60
    while not throttled and time.monotonic() < deadline:
        for _ in range(8):
            producer.produce("open", b"q" * 1024, callback=lambda err, _m: delivered.append(err))
        producer.flush(30)
    assert throttled and max(throttled) > 0, "the broker never reported a throttle time"
    assert delivered and all(err is None for err in delivered), delivered[:3]


@pytest.mark.parametrize(
    ("call", "fault"),
    [
        (lambda lab: lab.create_topic("t2", 1, {"max.message.bytes": "200"}), "create_topic"),
        (lambda lab: lab.alter_topic("t", {"max.message.bytes": "200"}), "alter_topic"),
        (lambda lab: lab.grant("u", "t"), "grant"),
        (lambda lab: lab.set_quota("c", producer_byte_rate=1024), "set_quota"),
    ],
    ids=["create_topic", "alter_topic", "grant", "set_quota"],
)
def test_the_mock_says_which_engine_can(call: Any, fault: str) -> None:
    with Lab(brokers=1, topics={"t": 1}) as mock, pytest.raises(UsageError) as err:
        call(mock)
    assert str(err.value).startswith(f"{fault} needs --engine kafka (the mock ")


@given(st.text(max_size=80), st.text(max_size=140))
def test_a_sasl_user_or_password_the_broker_config_cannot_hold_is_one_usage_error(
    user: str, password: str
) -> None:
    """Users and passwords go into the broker's JAAS line: only what it holds verbatim."""
    valid = re.fullmatch(r"[A-Za-z0-9_.-]{1,64}", user) and re.fullmatch(
        r'[^"\\;\s]{1,128}', password
    )
    if valid:
        assert KafkaLab(brokers=1, sasl_users={user: password}).settings.sasl_users == {
            user: password
        }
    else:
        with pytest.raises(UsageError, match=r"invalid (SASL user name|password)") as err:
            KafkaLab(brokers=1, sasl_users={user: password})
        assert "\n" not in str(err.value)


@given(
    brokers=st.integers(-2, 12),
    ports=st.none() | st.lists(st.integers(1, 65535), max_size=12),
    session_timeout_ms=st.integers(-10, 3000),
    ready_timeout_seconds=st.floats(-5, 300, allow_nan=False),
    controllers=st.integers(-2, 8),
    configured=st.sampled_from(["t", "absent"]),
    unknown=st.sampled_from(["", "broker_count", "sasl_user", "hosts"]),
    broker_configs=st.sampled_from(
        [{}, {"connections.max.idle.ms": "5000"}, {"Bad.Key": "1"}, {"a": "x\ny"}]
    ),
)
def test_settings_that_do_not_fit_are_one_usage_error_before_anything_starts(
    brokers: int,
    ports: list[int] | None,
    session_timeout_ms: int,
    ready_timeout_seconds: float,
    controllers: int,
    configured: str,
    unknown: str,
    broker_configs: dict[str, str],
) -> None:
    """The kafka engine's options (`KafkaSettings`): each out of range, a broker property
    that cannot be written into server.properties, an option the engine does not have, a
    port list of another length than the brokers, configs for a topic the lab does not
    create: one line naming it; anything else is taken as given."""
    options: dict[str, Any] = {
        "ports": ports,
        "session_timeout_ms": session_timeout_ms,
        "ready_timeout_seconds": ready_timeout_seconds,
        "controllers": controllers,
        "topic_configs": {configured: {"max.message.bytes": "1000"}},
        "broker_configs": broker_configs,
    }
    if unknown:
        options[unknown] = 1
    fits = (
        1 <= brokers <= 9
        and (ports is None or len(ports) == brokers)
        and session_timeout_ms >= 1000
        and ready_timeout_seconds > 0
        and 0 <= controllers <= 5
        and configured == "t"
        and not unknown
        and broker_configs in ({}, {"connections.max.idle.ms": "5000"})
    )
    if fits:
        lab = KafkaLab(brokers=brokers, topics={"t": 1}, **options)
        assert lab.settings.ports == (None if ports is None else tuple(ports))
        assert lab.topic_configs == {"t": {"max.message.bytes": "1000"}}
        return
    with pytest.raises(UsageError) as err:
        KafkaLab(brokers=brokers, topics={"t": 1}, **options)
    assert "\n" not in str(err.value)
    if unknown and brokers >= 1:
        assert f"unknown kafka engine option {unknown}" in str(err.value)


@given(st.text(max_size=120))
def test_a_quota_client_id_outside_the_safe_names_is_one_usage_error(client_id: str) -> None:
    assume(not re.fullmatch(r"[A-Za-z0-9_.-]{1,100}", client_id))
    with pytest.raises(UsageError, match="invalid client id") as err:
        KafkaLab(brokers=1).set_quota(client_id, producer_byte_rate=1024)
    assert "\n" not in str(err.value)
