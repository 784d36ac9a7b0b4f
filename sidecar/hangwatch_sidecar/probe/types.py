"""What a probe run found, as plain data, and the one definition of a leaderless partition.

Produced by the I/O modules (`endpoints` probes each broker, `metadata` fetches the
cluster's metadata), read by the pure ones (`report`, `output`, the sidecar's
`observing`). No I/O and no Kafka client here, so the judging modules stay pure.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from hangwatch.acceptance import MinInsync
from hangwatch.contracts import Reachability
from hangwatch_sidecar.probe.settings import Endpoint, ProbeSettings

ELECTION_ERRORS = frozenset(
    {"LEADER_NOT_AVAILABLE", "NOT_LEADER_FOR_PARTITION", "NOT_LEADER_OR_FOLLOWER"}
)
"""Kafka error names that mean "no usable leader right now" (an election is under way).
The one definition of leaderless: a partition without a leader (-1) or with one of
these errors, or a topic whose metadata carries one of them."""

UNKNOWN_TOPIC = "UNKNOWN_TOPIC_OR_PART"
"""librdkafka's name for the metadata error of a topic that does not exist."""


def is_leaderless(leader: int, error: str | None) -> bool:
    """A partition (leader id, error name) that has no usable leader."""
    return leader < 0 or error in ELECTION_ERRORS


@dataclass(frozen=True)
class BrokerInfo:
    """A broker the cluster advertises."""

    id: int
    endpoint: Endpoint


@dataclass(frozen=True)
class PartitionState:
    """One partition: leader (-1 when none), replicas, in-sync replicas, error name or None."""

    partition: int
    leader: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    error: str | None

    @property
    def leaderless(self) -> bool:
        return is_leaderless(self.leader, self.error)

    @property
    def under_replicated(self) -> bool:
        return len(self.isr) < len(self.replicas)


@dataclass(frozen=True)
class TopicState:
    """One topic: its error name (e.g. LEADER_NOT_AVAILABLE during an election) and partitions."""

    name: str
    error: str | None
    partitions: tuple[PartitionState, ...]


@dataclass(frozen=True)
class ClusterMetadata:
    """What the cluster advertises: id, controller (-1 unknown), brokers and topics by name."""

    cluster_id: str | None
    controller_id: int
    brokers: tuple[BrokerInfo, ...]
    topics: tuple[TopicState, ...]


@dataclass(frozen=True)
class ClientError:
    """An authentication or TLS failure the metadata client reported for one broker."""

    endpoint: Endpoint | None
    reachability: Reachability
    message: str


@dataclass(frozen=True)
class MetadataProbe:
    """Outcome of the metadata fetch: metadata (None when it failed) and what went wrong."""

    metadata: ClusterMetadata | None
    error: str
    """Empty when every request succeeded."""
    failure: Reachability | None
    """`auth_error`, `tls_error` or `timeout` when no metadata arrived, else None."""
    client_errors: tuple[ClientError, ...]
    elapsed_ms: float


@dataclass(frozen=True)
class EndpointProbe:
    """How one endpoint answered; a stage's latency is None when it was not reached."""

    endpoint: Endpoint
    reachability: Reachability
    detail: str
    """Why it is not `ok` (empty when ok); secrets scrubbed."""
    addresses: tuple[str, ...] = ()
    dns_ms: float | None = None
    connect_ms: float | None = None
    tls_ms: float | None = None
    api_versions_ms: float | None = None
    span: tuple[float, float] | None = None
    """`time.monotonic()` when this probe started and ended: orders the probes of one run."""
    fetch_min_version: int | None = None
    """The lowest Fetch version the broker's ApiVersions answer lists (None: not asked, or
    not said). 4 and above: Apache Kafka 4.0's floor (KIP-896), where the broker also
    refuses Produce below v3, every write smaller than a record batch, though it still
    lists Produce v0 in that answer (KAFKA-18659)."""

    @property
    def ok(self) -> bool:
        return self.reachability is Reachability.OK


@dataclass(frozen=True)
class ProbeResult:
    """One probe run: every endpoint probed (bootstrap first) and the metadata fetch."""

    bootstrap: tuple[Endpoint, ...]
    topics: tuple[str, ...]
    endpoints: tuple[EndpointProbe, ...]
    metadata: MetadataProbe
    settings: ProbeSettings = field(repr=False)
    started_at: float
    """Wall-clock start, seconds since the epoch."""
    elapsed_ms: float
    min_insync: dict[str, MinInsync] = field(default_factory=dict)
    """The topics' `min.insync.replicas` (DescribeConfigs, once the metadata came)."""
