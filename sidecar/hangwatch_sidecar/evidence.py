"""What the verdict engine looks at: observations of the cluster and of each producer.

The sidecar's probe loop turns a probe result into a `ClusterObservation`; the
telemetry reader turns each producer's telemetry file into a `ProducerObservation`
(via `tracking.ProducerTracker`, which remembers when progress and heartbeats were
last seen). Both are plain frozen data so the rules (`rules.evaluate`) stay pure functions.
All times are the sidecar's own monotonic clock, in seconds.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from hangwatch.acceptance import MinInsync
from hangwatch.contracts import Reachability
from hangwatch_sidecar.probe.types import PartitionState

TopicPartition = tuple[str, int]


@dataclass(frozen=True)
class BrokerObservation:
    """One broker address as probed from this pod."""

    address: str
    reachability: Reachability
    node_id: int | None = None
    """The broker's id in the metadata; for an address no longer advertised, the id it
    last had (None if it never was a broker)."""
    in_bootstrap: bool = True
    advertised: bool = True
    latency_ms: float | None = None
    detail: str = ""


@dataclass(frozen=True)
class ClusterObservation:
    """The cluster as one probe round saw it."""

    at: float
    brokers: tuple[BrokerObservation, ...]
    metadata_ok: bool
    leaders: Mapping[TopicPartition, int] = field(default_factory=dict)
    """Partition -> leader broker id (-1: no leader) from the cluster's metadata."""
    leaderless: frozenset[TopicPartition] = frozenset()
    leaderless_topics: frozenset[str] = frozenset()
    """Topics whose metadata carries an error such as LEADER_NOT_AVAILABLE."""
    error: str | None = None
    absent_topics: frozenset[str] = frozenset()
    """Topics the cluster's metadata says do not exist: UNKNOWN_TOPIC_OR_PART when asked
    by name, or not listed when every topic was asked for (`listed_all_topics`)."""
    listed_all_topics: bool = False
    """The metadata answered for every topic (the sidecar was given no topics): a topic it
    does not list does not exist, or the sidecar's principal may not describe it."""
    listed_topics: frozenset[str] = frozenset()
    metadata_age_seconds: float | None = None
    """Age of the metadata this observation carries (None: there is none)."""
    partitions: Mapping[str, tuple[PartitionState, ...]] = field(default_factory=dict)
    """The written topics' partitions as the metadata lists them (replicas, ISR, error):
    what the cluster's acceptance is judged on (`unwritable`)."""
    min_insync: Mapping[str, MinInsync] = field(default_factory=dict)
    """The written topics' `min.insync.replicas` as DescribeConfigs last said it (absent:
    not asked yet)."""

    def absent_for(self, topics: frozenset[str]) -> list[str]:
        """Those of `topics` the cluster's metadata says do not exist."""
        return sorted(
            t
            for t in topics
            if t in self.absent_topics or (self.listed_all_topics and t not in self.listed_topics)
        )

    @property
    def answering(self) -> tuple[BrokerObservation, ...]:
        return tuple(b for b in self.brokers if b.reachability is Reachability.OK)

    @property
    def failing(self) -> tuple[BrokerObservation, ...]:
        return tuple(b for b in self.brokers if b.reachability is not Reachability.OK)

    def leaderless_for(self, topics: frozenset[str]) -> list[str]:
        """Leaderless partitions (`topic/partition` or `topic/*`) among `topics` (all if empty)."""
        found = [f"{t}/*" for t in sorted(self.leaderless_topics) if not topics or t in topics]
        found += [f"{t}/{p}" for t, p in sorted(self.leaderless) if not topics or t in topics]
        return found


@dataclass(frozen=True)
class ErrorObserved:
    """One error code a producer met on one topic ("" when the error names none), from its
    telemetry: how often, and how long ago first and last (sidecar seconds)."""

    code: str
    topic: str
    count: int
    last_age_seconds: float
    first_age_seconds: float | None = None
    """None when the telemetry predates per-topic errors (only `last_error` is known)."""
    first_ts: float | None = None
    """Wall time of the first occurrence (for the reason's "since")."""
    source: str = ""
    """What was counted when it is not the error itself ("": the error's occurrences)."""


@dataclass(frozen=True)
class SplitsObserved:
    """Batches the broker refused as too large and the Java client split to send again
    (only a MESSAGE_TOO_LARGE answer makes it split), from its reporter's telemetry: how
    many, and how long ago the count was first and last seen to grow (sidecar seconds)."""

    count: int
    last_age_seconds: float
    first_age_seconds: float
    first_ts: float


@dataclass(frozen=True)
class ProducerObservation:
    """One producer process as its telemetry and the tracker's memory describe it."""

    key: str
    pid: int
    alive: bool | None
    """True/False from the producer's liveness lock; None when it cannot be told."""
    pending: int
    """Messages enqueued and not yet acknowledged or failed (librdkafka's queue)."""
    delivered_total: int
    failed_total: int
    topics: frozenset[str]
    heartbeat_age_seconds: float
    """Time since the telemetry file last changed (sequence number moved)."""
    progress_age_seconds: float | None
    """Time since the delivered count last grew; None if it never delivered."""
    pending_seconds: float
    """How long `pending` has been above zero without interruption."""
    failing_seconds: float
    """How long failures have grown while deliveries did not."""
    leaders: Mapping[TopicPartition, int] = field(default_factory=dict)
    """The producer's own view of partition leaders (from its statistics)."""
    answered_age_seconds: float | None = None
    """Time since brokers last answered the producer (responses received grew)."""
    awaiting_responses: int = 0
    """Requests the producer waits an answer for on brokers that answered nothing since its
    previous telemetry document (waits on brokers that keep answering are not counted)."""
    metadata_age_seconds: float | None = None
    disagreeing_seconds: float = 0.0
    """How long, without interruption, the producer's leaders have disagreed with the
    cluster's as the sidecar saw both (0: they agree, or it has not been seen yet)."""
    identity: Mapping[str, object] = field(default_factory=dict)
    errors: tuple[ErrorObserved, ...] = ()
    """The errors its telemetry reports, most recently met first."""
    throttle_age_seconds: float | None = None
    """Time since a broker last reported throttling it (a quota), or stopping to; None
    when none ever did (or the wrapper is older than `throttle`)."""
    throttle_seconds: float = 0.0
    """The throttle time that report gave (0: the broker stopped throttling)."""

    def throttled(self, stall_seconds: float) -> bool:
        """A broker's quota explains a wait: the producer was throttled, and its latest
        throttle time plus `stall_seconds` has not passed since (Kafka does not bound a
        byte-rate quota's throttle time; a throttled producer hears from the broker with
        each answer, so the clock restarts while throttling goes on)."""
        age = self.throttle_age_seconds
        return (
            self.throttle_seconds > 0
            and age is not None
            and age <= (self.throttle_seconds + stall_seconds)
        )

    problem: str | None = None
    """Set when the telemetry could not be used (garbage, too large, wrong schema...)."""
    java: bool = False
    """The Java client's reporter wrote the telemetry (`hangwatch_pipeline.kafka_telemetry`):
    its refusals, throttles and splits count; its stall and heartbeat rules do not (the
    reporter's own thread writes the file, and Spark's view of the JVM's threads judges a
    Java producer's hangs)."""
    counts_pending: bool = True
    """`pending` says what awaits an answer: always for the wrapper; for the Java reporter
    once it runs as the client's interceptor too (it counts the sends and answers)."""
    splits: SplitsObserved | None = None
    """The Java client's batch splits (None: none, or not a Java client)."""
    client_release: tuple[str, str] | None = None
    """(client, version) its telemetry names: the wrapper's librdkafka, the Java client's
    reporter's kafka-clients (None: not said, or an older writer)."""
    acks: int | None = None
    """The producer's acks as its telemetry says it (-1: all); None when it does not say
    (the client's default, `hangwatch.acceptance.DEFAULT_ACKS`, applies)."""
