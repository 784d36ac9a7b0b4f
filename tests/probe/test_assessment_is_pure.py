"""The judging layer is pure: hand-made results in, findings and health out (no network).

Covers what the lab cannot produce or what is cheaper to pin down without it:
- under-replicated partitions (ISR < replicas) and a leader of -1 are warnings; a topic
  error such as LEADER_NOT_AVAILABLE is leaderless even when no partition is listed;
- findings come most severe first; a cluster where nothing answers is unavailable;
- a reachable bootstrap entry that is not advertised (a load balancer) is only info;
- an ok endpoint whose broker rejected the metadata client's credentials is auth_error;
- long partition lists are shortened; health maps to exit codes 0/1/2;
- bootstrap parsing (protocol prefix, bracketed IPv6, case, duplicates);
- the ApiVersions v0 frame is byte-exact; librdkafka error texts are attributed to the
  broker they name.
"""

from __future__ import annotations

from dataclasses import replace

from confluent_kafka import KafkaError

from hangwatch.contracts import ExitCode, Reachability
from hangwatch_sidecar.probe.endpoints import api_versions_request
from hangwatch_sidecar.probe.metadata import classify_client_error
from hangwatch_sidecar.probe.report import Health, Severity, assess
from hangwatch_sidecar.probe.settings import Endpoint, ProbeSettings, parse_bootstrap
from hangwatch_sidecar.probe.types import (
    BrokerInfo,
    ClientError,
    ClusterMetadata,
    EndpointProbe,
    MetadataProbe,
    PartitionState,
    ProbeResult,
    TopicState,
)

B1, B2 = Endpoint("10.0.0.1", 9092), Endpoint("10.0.0.2", 9092)
LB = Endpoint("kafka.example.com", 9092)


def _ok(endpoint: Endpoint, address: str | None = None) -> EndpointProbe:
    addresses = (address or endpoint.host,)
    return EndpointProbe(endpoint, Reachability.OK, "", addresses, 0.1, 0.2, None, 0.3)


def _partition(n: int, leader: int = 1, isr: tuple[int, ...] = (1, 2)) -> PartitionState:
    return PartitionState(n, leader, (1, 2), isr, None)


def _result(
    endpoints: tuple[EndpointProbe, ...],
    partitions: tuple[PartitionState, ...] = (_partition(0),),
    bootstrap: tuple[Endpoint, ...] = (B1, B2),
    client_errors: tuple[ClientError, ...] = (),
) -> ProbeResult:
    metadata = ClusterMetadata(
        "c1", 1, (BrokerInfo(1, B1), BrokerInfo(2, B2)), (TopicState("t", None, partitions),)
    )
    return ProbeResult(
        bootstrap=bootstrap,
        topics=(),
        endpoints=endpoints,
        metadata=MetadataProbe(metadata, "", None, client_errors, 1.0),
        settings=ProbeSettings(),
        started_at=0.0,
        elapsed_ms=2.0,
    )


def test_under_replicated_and_leaderless_partitions_are_warnings() -> None:
    partitions = (_partition(0), _partition(1, isr=(1,)), _partition(2, leader=-1))

    assessment = assess(_result((_ok(B1), _ok(B2)), partitions))

    assert assessment.health is Health.DEGRADED
    messages = {f.code: f.message for f in assessment.findings}
    assert messages == {
        "leaderless_partitions": "topic t: partition 2 without a leader",
        "under_replicated_partitions": "topic t: partition 1 under-replicated (ISR < replicas)",
    }


def test_topic_error_without_partitions_is_still_leaderless() -> None:
    result = _result((_ok(B1), _ok(B2)))
    metadata = result.metadata.metadata
    assert metadata is not None
    electing = replace(metadata, topics=(TopicState("t", "LEADER_NOT_AVAILABLE", ()),))
    result = replace(result, metadata=replace(result.metadata, metadata=electing))

    (finding,) = assess(result).findings

    assert finding.code == "leaderless_partitions"
    assert finding.message == (
        "topic t: no leader (LEADER_NOT_AVAILABLE: leader election under way?)"
    )


def test_nothing_answers_is_unavailable_with_the_critical_finding_first() -> None:
    down = EndpointProbe(B1, Reachability.REFUSED, "connection refused")
    gone = EndpointProbe(B2, Reachability.TIMEOUT, "no answer")

    assessment = assess(_result((down, gone)))

    assert assessment.health is Health.UNAVAILABLE
    assert [f.severity for f in assessment.findings][:1] == [Severity.CRITICAL]
    assert "refused: 1" in assessment.findings[0].message
    assert [f.severity for f in assessment.findings[1:]] == [Severity.WARNING] * 3
    assert "leader_unreachable" in {f.code for f in assessment.findings}


def test_reachable_load_balancer_entry_is_only_info() -> None:
    result = _result((_ok(LB, "192.0.2.7"), _ok(B1), _ok(B2)), bootstrap=(LB,))

    assessment = assess(result)

    assert assessment.health is Health.HEALTHY
    (finding,) = assessment.findings
    assert (finding.severity, finding.code) == (Severity.INFO, "bootstrap_not_advertised")
    assert assessment.rows[0].advertised is False


def test_bootstrap_alias_resolving_to_a_broker_is_advertised() -> None:
    alias = Endpoint("kafka-1.internal", 9092)
    result = _result((_ok(alias, "10.0.0.1"), _ok(B1), _ok(B2)), bootstrap=(alias,))

    rows = assess(result).rows

    assert (rows[0].broker_id, rows[0].advertised) == (1, True)


def test_broker_rejecting_credentials_is_auth_error() -> None:
    rejected = ClientError(B2, Reachability.AUTH_ERROR, "SASL authentication error")

    assessment = assess(_result((_ok(B1), _ok(B2)), client_errors=(rejected,)))

    assert [r.reachability for r in assessment.rows] == [Reachability.OK, Reachability.AUTH_ERROR]
    assert assessment.health is Health.DEGRADED


def test_long_partition_lists_are_shortened() -> None:
    partitions = tuple(_partition(n, leader=-1) for n in range(25))

    (finding,) = assess(_result((_ok(B1), _ok(B2)), partitions)).findings

    assert finding.message.startswith("topic t: partitions 0, 1, 2, 3, 4, 5, 6, 7, 8, 9 and 15")


def test_health_exit_codes() -> None:
    assert Health.HEALTHY.exit_code == ExitCode.OK == 0
    assert Health.DEGRADED.exit_code == ExitCode.DEGRADED == 1
    assert Health.UNAVAILABLE.exit_code == ExitCode.UNAVAILABLE == 2


def test_bootstrap_parsing() -> None:
    parsed = parse_bootstrap("SASL_SSL://Kafka-0:9093, [::1]:9092,kafka-0:9093,10.1.2.3:1")

    assert parsed == (Endpoint("kafka-0", 9093), Endpoint("::1", 9092), Endpoint("10.1.2.3", 1))
    assert [str(e) for e in parsed] == ["kafka-0:9093", "[::1]:9092", "10.1.2.3:1"]


def test_api_versions_v0_frame_is_byte_exact() -> None:
    frame = api_versions_request(7, "hw")

    # size 12, api_key 18, api_version 0, correlation id 7, client id "hw" (int16 length)

    assert frame == bytes.fromhex("0000000c00120000000000070002") + b"hw"


def test_librdkafka_errors_are_attributed_to_their_broker() -> None:
    auth = KafkaError(
        KafkaError._AUTHENTICATION,
        "sasl_ssl://kafka-1.example.com:9093/bootstrap: SASL authentication error: bad creds",
    )
    tls = KafkaError(
        KafkaError._TRANSPORT, "ssl://[::1]:9093/2: SSL handshake failed: certificate verify failed"
    )
    refused = KafkaError(KafkaError._TRANSPORT, "10.0.0.1:9092/1: Connection refused")

    found_auth, found_tls = classify_client_error(auth), classify_client_error(tls)

    assert found_auth is not None and found_tls is not None
    assert found_auth.endpoint == Endpoint("kafka-1.example.com", 9093)
    assert found_auth.reachability is Reachability.AUTH_ERROR
    assert (found_tls.endpoint, found_tls.reachability) == (
        Endpoint("::1", 9093),
        Reachability.TLS_ERROR,
    )
    assert classify_client_error(refused) is None
