"""Cluster metadata as the producer's own client library sees it, fetched once per probe.

`endpoints.probe_cluster` opens a `MetadataClient` (a confluent-kafka AdminClient built from
the probe settings, so SASL and TLS behave as in the producer) and fetches brokers,
controller and per-partition leader, replicas and ISR, bounded by the request timeout.
Errors the client reports on its own (authentication, TLS) are kept per broker so the
report can classify them. The client's log lines go to the `RDKAFKA_LOG` logger
(`hangwatch_sidecar.probe.rdkafka`), never straight to stderr.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient

# confluent-kafka's stubs export these from their modules only.
from confluent_kafka.admin._config import ConfigResource, ConfigSource

# The type list_topics returns; confluent-kafka's own stub imports it from here.
from confluent_kafka.admin._metadata import ClusterMetadata as RawMetadata
from confluent_kafka.admin._resource import ResourceType

from hangwatch.acceptance import (
    MIN_INSYNC_FROM_BROKER,
    MIN_INSYNC_FROM_TOPIC,
    MIN_INSYNC_KEY,
    MinInsync,
    parse_min_insync,
)
from hangwatch.contracts import Reachability
from hangwatch_sidecar.probe.settings import Endpoint, ProbeConfigError, ProbeSettings
from hangwatch_sidecar.probe.types import (
    BrokerInfo,
    ClientError,
    ClusterMetadata,
    MetadataProbe,
    PartitionState,
    TopicState,
)

RDKAFKA_LOG = logging.getLogger("hangwatch_sidecar.probe.rdkafka")
"""Receives librdkafka's log lines; silent unless the application configures logging."""
RDKAFKA_LOG.addHandler(logging.NullHandler())

_AUTH_CODES = frozenset({KafkaError._AUTHENTICATION, KafkaError.SASL_AUTHENTICATION_FAILED})
_BROKER_PREFIX = re.compile(r"^(?:[a-z_]+://)?(\[[^\]]+\]|[^\s/\[\]]+):(\d+)/\S*: ")
_MAX_CLIENT_ERRORS = 50
MAX_DESCRIBED_TOPICS = 100
"""Topics whose configs one DescribeConfigs request asks for at most (the rest are not
described: `NOT_DESCRIBED`); a pod writes a handful."""
NOT_DESCRIBED = "not described (more topics than one request asks for)"
_DESCRIBE_PROBLEMS = {
    "TOPIC_AUTHORIZATION_FAILED": "DescribeConfigs refused: the principal lacks the "
    "DESCRIBE_CONFIGS ACL on the topic",
    "UNKNOWN_TOPIC_OR_PART": "the topic does not exist",
    "_UNSUPPORTED_FEATURE": "the brokers do not support DescribeConfigs (Kafka before 0.11)",
    "UNSUPPORTED_VERSION": "the brokers do not support DescribeConfigs (Kafka before 0.11)",
    "_TIMED_OUT": "DescribeConfigs was not answered within the request timeout",
}


def _error_name(err: KafkaError | None) -> str | None:
    return None if err is None or err.code() == KafkaError.NO_ERROR else err.name()


def _convert(raw: RawMetadata) -> ClusterMetadata:
    brokers = tuple(
        BrokerInfo(b.id, Endpoint(str(b.host).lower(), b.port))
        for b in sorted(raw.brokers.values(), key=lambda b: b.id)
    )
    topics = tuple(
        TopicState(
            name=name,
            error=_error_name(topic.error),
            partitions=tuple(
                PartitionState(
                    p.id, p.leader, tuple(p.replicas), tuple(p.isrs), _error_name(p.error)
                )
                for p in sorted(topic.partitions.values(), key=lambda p: p.id)
            ),
        )
        for name, topic in sorted(raw.topics.items())
    )
    return ClusterMetadata(raw.cluster_id, raw.controller_id, brokers, topics)


def _merge(parts: Sequence[ClusterMetadata]) -> ClusterMetadata | None:
    if not parts:
        return None
    topics = {t.name: t for part in parts for t in part.topics}
    return ClusterMetadata(
        parts[0].cluster_id,
        parts[0].controller_id,
        parts[0].brokers,
        tuple(topics[name] for name in sorted(topics)),
    )


def min_insync_from_answer(answer: object) -> MinInsync:
    """A topic's `min.insync.replicas` from its DescribeConfigs answer (config name ->
    entry with `value` and `source`, as confluent-kafka gives it): a broker's text, never
    trusted; anything but a whole number from 1 up is not known, with why."""
    entry = answer.get(MIN_INSYNC_KEY) if isinstance(answer, dict) else None
    if entry is None:
        return MinInsync(None, problem=f"the answer has no {MIN_INSYNC_KEY}")
    raw = getattr(entry, "value", None)
    value = parse_min_insync(raw)
    if value is None:
        shown = repr(raw)[:40] if isinstance(raw, str) else type(raw).__name__
        return MinInsync(None, problem=f"{MIN_INSYNC_KEY} is not a number from 1 up: {shown}")
    own = getattr(entry, "source", None) == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    return MinInsync(value, MIN_INSYNC_FROM_TOPIC if own else MIN_INSYNC_FROM_BROKER)


def describe_problem(name: str) -> str:
    """What a DescribeConfigs error (librdkafka's name) means for reading a topic's
    `min.insync.replicas`."""
    meaning = _DESCRIBE_PROBLEMS.get(name)
    return f"{meaning} ({name})" if meaning else f"DescribeConfigs failed: {name}"


def classify_client_error(err: KafkaError) -> ClientError | None:
    """An auth or TLS failure of the metadata client, attributed to its broker; else None."""
    message = err.str()
    if err.code() in _AUTH_CODES:
        kind = Reachability.AUTH_ERROR
    elif err.code() == KafkaError._SSL or (
        err.code() == KafkaError._TRANSPORT and "SSL" in message
    ):
        kind = Reachability.TLS_ERROR
    else:
        return None
    match = _BROKER_PREFIX.match(message)
    endpoint = None
    if match:
        endpoint = Endpoint(match.group(1).strip("[]").lower(), int(match.group(2)))
    return ClientError(endpoint, kind, message)


class MetadataClient:
    """A metadata-only Kafka client for one probe run; use it as a context manager."""

    def __init__(self, bootstrap: Sequence[Endpoint], settings: ProbeSettings) -> None:
        self.settings = settings
        self._errors: list[KafkaError] = []
        conf: dict[str, str | int | float | bool] = {
            "bootstrap.servers": ",".join(str(e) for e in bootstrap),
            "client.id": settings.client_id,
            # Never let a probe create the topic it asks about.
            "allow.auto.create.topics": False,
            # librdkafka waits reconnect.backoff.ms / 2 between choosing brokers to dial
            # (sparse connections): after the bootstrap connection a metadata request can
            # wait that long. 20 ms keeps it near 10 ms instead of 50 ms; the exponential
            # backoff keeps retries to a dead broker at a handful per probe.
            "reconnect.backoff.ms": 20,
            "socket.connection.setup.timeout.ms": max(1000, settings.connect_timeout_ms),
            "socket.timeout.ms": max(10, settings.request_timeout_ms),
            **settings.client_config,
        }
        try:
            self._admin: AdminClient | None = AdminClient(
                conf, logger=RDKAFKA_LOG, error_cb=self._errors.append
            )
        except KafkaException as exc:
            reason = settings.scrub(exc.args[0].str() if exc.args else str(exc))
            raise ProbeConfigError(f"invalid client configuration: {reason}") from None

    def __enter__(self) -> MetadataClient:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Destroy the client in a daemon thread: rd_kafka_destroy waits for its broker
        threads, and one stuck in a slow DNS lookup can take seconds a probe must not wait."""
        holder: list[AdminClient | None] = [self._admin]
        self._admin = None
        threading.Thread(target=holder.clear, name="hangwatch-metadata-close", daemon=True).start()

    def _list(self, topic: str | None) -> ClusterMetadata | str:
        """Metadata, or the client's error text (no exception object outlives the call: its
        traceback would keep the client alive until a garbage collection destroys it)."""
        if self._admin is None:
            raise RuntimeError("the metadata client is closed")
        try:
            raw = self._admin.list_topics(topic=topic, timeout=self.settings.request_timeout_s)
        except KafkaException as exc:
            return str(exc.args[0].str() if exc.args else exc)
        return _convert(raw)

    def fetch(self, topics: Sequence[str] = ()) -> MetadataProbe:
        """Metadata for `topics` (all topics when empty), requests in parallel, bounded.

        Call it right after opening the client: a request queued before the first
        connection is up is answered at once, a later one can wait ~10 ms for librdkafka
        to pick a broker (see reconnect.backoff.ms above).
        """
        started = time.perf_counter()
        wanted: list[str | None] = list(topics) or [None]
        if len(wanted) == 1:
            outcomes = [self._list(wanted[0])]
        else:
            with ThreadPoolExecutor(len(wanted), thread_name_prefix="hangwatch-metadata") as pool:
                outcomes = list(pool.map(self._list, wanted))
        parts = [o for o in outcomes if isinstance(o, ClusterMetadata)]
        errors = [o for o in outcomes if isinstance(o, str)]
        elapsed_ms = (time.perf_counter() - started) * 1000
        client_errors = self._client_errors()
        failure = None
        if not parts:
            kinds = {e.reachability for e in client_errors}
            failure = next(
                (k for k in (Reachability.AUTH_ERROR, Reachability.TLS_ERROR) if k in kinds),
                Reachability.TIMEOUT,
            )
        scrub = self.settings.scrub
        return MetadataProbe(
            metadata=_merge(parts),
            error=scrub("; ".join(dict.fromkeys(errors))),
            failure=failure,
            client_errors=tuple(
                ClientError(e.endpoint, e.reachability, scrub(e.message)) for e in client_errors
            ),
            elapsed_ms=elapsed_ms,
        )

    def describe_min_insync(self, topics: Sequence[str]) -> dict[str, MinInsync]:
        """Each topic's `min.insync.replicas` (the topic's own, else the brokers' default,
        which the topic's answer carries), in one DescribeConfigs request for at most
        `MAX_DESCRIBED_TOPICS` topics, bounded by the request timeout; a topic whose
        answer failed is not known, with why. Never raises for the cluster's answers."""
        if self._admin is None:
            raise RuntimeError("the metadata client is closed")
        wanted = sorted(set(topics))
        found = {t: MinInsync(None, problem=NOT_DESCRIBED) for t in wanted[MAX_DESCRIBED_TOPICS:]}
        asked = wanted[:MAX_DESCRIBED_TOPICS]
        if not asked:
            return found
        timeout = self.settings.request_timeout_s
        try:
            futures = self._admin.describe_configs(
                [ConfigResource(ResourceType.TOPIC, t) for t in asked], request_timeout=timeout
            )
        except (KafkaException, ValueError, TypeError) as exc:  # a name librdkafka refuses
            problem = f"DescribeConfigs not sent: {self.settings.scrub(str(exc))[:200]}"
            return found | {t: MinInsync(None, problem=problem) for t in asked}
        for resource, future in futures.items():
            try:
                answer = future.result(timeout=timeout + 1.0)
            except KafkaException as exc:
                error = exc.args[0] if exc.args else None
                name = error.name() if isinstance(error, KafkaError) else type(exc).__name__
                found[resource.name] = MinInsync(None, problem=describe_problem(name))
            except Exception as exc:  # noqa: BLE001 - a timeout or a cancelled future
                found[resource.name] = MinInsync(None, problem=describe_problem(type(exc).__name__))
            else:
                found[resource.name] = min_insync_from_answer(answer)
        return found

    def _client_errors(self) -> list[ClientError]:
        if self._admin is not None:
            self._admin.poll(0)  # serves error_cb
        seen: dict[tuple[Endpoint | None, Reachability], ClientError] = {}
        for err in self._errors:
            found = classify_client_error(err)
            if found is not None:
                seen.setdefault((found.endpoint, found.reachability), found)
        self._errors.clear()
        return list(seen.values())[:_MAX_CLIENT_ERRORS]
