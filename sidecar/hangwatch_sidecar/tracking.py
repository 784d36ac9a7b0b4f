"""Per-producer memory: when did its heartbeat, deliveries and failures last move?

Telemetry files are snapshots; a hang is the *absence* of change. `ProducerTracker`
compares each new document of a producer with the previous one and remembers, on the
sidecar's monotonic clock, when the sequence number last moved (heartbeat), when the
delivered count last grew (progress), since when messages have been pending, and
since when failures grow without deliveries. It emits `ProducerObservation`s for the
pure verdict engine. On first sight, ages are taken from the document's own wall
timestamps, so a restarted sidecar still sees an old hang.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from hangwatch_producer.wire.telemetry import (
    IDENTITY_SUMMARY,
    JAVA_CLIENT,
    Client,
    Splits,
    Statistics,
    TelemetryDocument,
    acks_of,
)
from hangwatch_sidecar.evidence import (
    ErrorObserved,
    ProducerObservation,
    SplitsObserved,
    TopicPartition,
)


@dataclass
class _Memory:
    seq: int
    heartbeat_at: float
    delivered: int
    progress_at: float | None
    failed: int
    pending_since: float | None
    failing_since: float | None
    answered_at: float | None = None
    broker_responses: dict[str, int] = field(default_factory=dict)
    """Responses received per broker, as of the previous document."""


def producer_leaders(stats: Statistics | None) -> dict[TopicPartition, int]:
    """Partition leaders as the producer's librdkafka statistics report them."""
    leaders: dict[TopicPartition, int] = {}
    for topic, body in (stats.topics if stats else {}).items():
        for pid, part in (body.partitions or {}).items():
            if pid != "-1" and part.leader is not None:
                leaders[(topic, int(pid))] = part.leader
    return leaders


def metadata_age_seconds(stats: Statistics | None) -> float | None:
    """Oldest topic metadata age in the producer's statistics (librdkafka reports ms)."""
    ages = [
        body.metadata_age / 1000.0
        for body in (stats.topics if stats else {}).values()
        if body.metadata_age is not None
    ]
    return max(ages) if ages else None


def unanswered_waits(
    stats: Statistics | None, previous: dict[str, int] | None
) -> tuple[int, dict[str, int]]:
    """(requests awaiting a response on brokers that answered nothing since `previous`,
    responses received per broker now). A broker that keeps answering while requests
    wait is busy, not wedged: a producer refused by answering brokers (S1) always has
    some request in flight at the instant its statistics are taken, a wedged
    connection (S2) has requests waiting and no response at all."""
    waiting = 0
    responses: dict[str, int] = {}
    for name, broker in (stats.brokers if stats else {}).items():
        responses[name] = rx = broker.rx or 0
        answered = previous is not None and rx > previous.get(name, rx)
        if not answered:
            waiting += broker.waitresp_cnt or 0
    return waiting, responses


def errors_observed(doc: TelemetryDocument, wall_now: float) -> tuple[ErrorObserved, ...]:
    """The document's errors per topic and code with their ages; a document written before
    per-topic errors existed gives its `last_error` alone (topic and first time unknown)."""

    def age(ts: float) -> float:
        return max(0.0, wall_now - ts)

    found = [
        ErrorObserved(
            code=e.code,
            topic=e.topic,
            count=e.count,
            last_age_seconds=age(e.last_ts if e.last_ts is not None else e.first_ts or 0.0),
            first_age_seconds=None if e.first_ts is None else age(e.first_ts),
            first_ts=e.first_ts,
        )
        for e in doc.errors
        if e.last_ts is not None or e.first_ts is not None
    ]
    last = doc.last_error
    if not doc.errors and last is not None and last.code and last.ts is not None:
        found.append(ErrorObserved(last.code, "", doc.error_counts.get(last.code, 1), age(last.ts)))
    return tuple(found)


def splits_observed(doc: TelemetryDocument, wall_now: float) -> SplitsObserved | None:
    """The Java client's batch splits with their ages (None: it split none)."""
    splits = doc.splits
    if not isinstance(splits, Splits) or splits.count <= 0 or splits.first_ts is None:
        return None
    last = splits.last_ts if splits.last_ts is not None else splits.first_ts
    return SplitsObserved(
        count=splits.count,
        last_age_seconds=max(0.0, wall_now - last),
        first_age_seconds=max(0.0, wall_now - splits.first_ts),
        first_ts=splits.first_ts,
    )


def _throttle_age(doc: TelemetryDocument, wall_now: float) -> float | None:
    """Time since a broker last reported throttling the producer (None: never)."""
    if doc.throttle is None or doc.throttle.last_ts is None:
        return None
    return max(0.0, wall_now - doc.throttle.last_ts)


def _when(ts: float | None, now: float, wall_now: float) -> float | None:
    """The sidecar-monotonic time of a wall timestamp from the document (never in the future)."""
    if ts is None:
        return None
    return now - max(0.0, wall_now - ts)


class ProducerTracker:
    """Turns successive telemetry documents of each producer into observations."""

    def __init__(self) -> None:
        self._memory: dict[str, _Memory] = {}

    def observe(
        self, key: str, doc: TelemetryDocument, alive: bool | None, now: float, wall_now: float
    ) -> ProducerObservation:
        """Record `doc` (a decoded telemetry document) for producer `key` at time `now`."""
        seq, delivered, failed = doc.seq, doc.counters.delivered, doc.counters.failed
        pending = doc.counters.pending
        memory = self._memory.get(key)
        waiting, per_broker = unanswered_waits(
            doc.stats, memory.broker_responses if memory is not None else None
        )
        if memory is None:
            memory = self._first_sight(doc, seq, delivered, failed, pending, now, wall_now)
            self._memory[key] = memory
        else:
            self._update(memory, doc, (seq, delivered, failed, pending), now, wall_now)
            if sum(per_broker.values()) > sum(memory.broker_responses.values()):
                memory.answered_at = now
        memory.broker_responses = per_broker
        client = doc.client if isinstance(doc.client, Client) else None
        java = client is not None and client.library == JAVA_CLIENT
        return ProducerObservation(
            key=key,
            pid=doc.identity.pid,
            alive=alive,
            pending=pending,
            delivered_total=delivered,
            failed_total=failed,
            topics=frozenset(doc.topics),
            heartbeat_age_seconds=max(0.0, now - memory.heartbeat_at),
            progress_age_seconds=None if memory.progress_at is None else now - memory.progress_at,
            pending_seconds=0.0 if memory.pending_since is None else now - memory.pending_since,
            failing_seconds=0.0 if memory.failing_since is None else now - memory.failing_since,
            leaders=producer_leaders(doc.stats),
            answered_age_seconds=None if memory.answered_at is None else now - memory.answered_at,
            awaiting_responses=waiting,
            metadata_age_seconds=metadata_age_seconds(doc.stats),
            identity=_identity(doc),
            errors=errors_observed(doc, wall_now),
            throttle_age_seconds=_throttle_age(doc, wall_now),
            throttle_seconds=(doc.throttle.last_seconds or 0.0) if doc.throttle else 0.0,
            java=java,
            counts_pending=not java or (client is not None and client.acknowledgements),
            splits=splits_observed(doc, wall_now) if java else None,
            client_release=_client_release(doc, client),
            acks=doc.acks if doc.acks is not None else acks_of(doc.config),
        )

    @staticmethod
    def _first_sight(
        doc: TelemetryDocument,
        seq: int,
        delivered: int,
        failed: int,
        pending: int,
        now: float,
        wall_now: float,
    ) -> _Memory:
        heartbeat_at = _when(doc.ts, now, wall_now)
        return _Memory(
            seq=seq,
            heartbeat_at=now if heartbeat_at is None else heartbeat_at,
            delivered=delivered,
            progress_at=_when(doc.last_delivery_ts, now, wall_now),
            failed=failed,
            pending_since=now if pending > 0 else None,
            failing_since=None,
        )

    @staticmethod
    def _update(
        memory: _Memory,
        doc: TelemetryDocument,
        counts: tuple[int, int, int, int],
        now: float,
        wall_now: float,
    ) -> None:
        """Producer and sidecar share the node's clock, so the document's own timestamps
        (when it was written, when it last delivered) are more precise than the time the
        sidecar happened to read it; the read time is the fallback."""
        seq, delivered, failed, pending = counts
        if seq != memory.seq:
            memory.seq = seq
            memory.heartbeat_at = _when(doc.ts, now, wall_now) or now
        if delivered > memory.delivered:
            memory.progress_at = _when(doc.last_delivery_ts, now, wall_now) or now
            memory.failing_since = None
        elif failed > memory.failed and memory.failing_since is None:
            memory.failing_since = now
        memory.delivered, memory.failed = delivered, failed
        if pending <= 0:
            memory.pending_since = None
        elif memory.pending_since is None:
            memory.pending_since = now

    def forget(self, keep: set[str]) -> None:
        """Drop the memory of producers not in `keep` (their files are gone)."""
        for key in set(self._memory) - keep:
            del self._memory[key]

    def __len__(self) -> int:
        return len(self._memory)


def _client_release(doc: TelemetryDocument, client: Client | None) -> tuple[str, str] | None:
    """The client library and release the document names: the Java reporter's own
    `client`, else the wrapper's librdkafka."""
    if client is not None and client.library and client.version:
        return client.library, client.version
    if doc.wrapper.librdkafka:
        return "librdkafka", doc.wrapper.librdkafka
    return None


def _identity(doc: TelemetryDocument) -> dict[str, object]:
    """Who the producer is, for evidence: pod, node, application, executor, pid, client."""
    named = {name: getattr(doc.identity, name) for name in IDENTITY_SUMMARY}
    return {k: v for k, v in named.items() if v is not None}
