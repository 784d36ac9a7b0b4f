"""Detection defaults: the one table, with the two profiles hangwatch ships and why they differ.

`STANDALONE` fills the sidecar's own settings (`hangwatch sidecar`, `hangwatch probe`
users, the verdict engine's `Thresholds`) when nobody says otherwise. `POLICY` is what a
`ProducerHealthPolicy` gets for every field it leaves out (the CRD's `default:` values
equal it, checked by a test), and the operator passes the policy's values to every
sidecar it injects, so in a cluster `POLICY` is what runs.

Why two: a sidecar run by hand watches one producer someone is looking at, next to
hangwatch's own producer wrapper (metadata refreshed every 60 s, expired after 180 s),
so it judges fast. A policy covers a fleet of arbitrary clients (librdkafka's own
metadata expiry is 900 s, the Java client's requests time out after 30 s) and its
verdicts can restart executors: it waits about twice as long before calling a hang,
and a false restart costs more than a minute of delay.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class DetectionDefaults:
    """Probe rhythm and detection thresholds, in seconds."""

    probe_interval_seconds: int
    """Seconds between probe rounds (the verdict cannot change faster)."""
    stall_seconds: int
    """Pending messages with no delivery this long, cluster healthy: producer_hung. Above
    the client's request timeout (30 s in librdkafka and Java), which a healthy producer
    answers well within."""
    heartbeat_seconds: int
    """Telemetry unchanged this long while the producer lives: its I/O thread is stuck.
    Telemetry refreshes every statistics interval (1 s)."""
    metadata_max_age_seconds: int
    """A producer's metadata older than this is stale."""
    election_grace_seconds: int
    """Leaderless partitions are an expected election this long (managed Kafka elections
    take 1-2 s, controlled shutdowns up to ~10 s)."""
    producer_request_timeout_seconds: int
    """The producers' own request timeout (Java's and librdkafka's `request.timeout.ms`,
    30 s by default). A broker may hold a Produce request this long before it must answer
    (with `acks=all` it waits for its in-sync replicas: a frozen or slow follower holds
    every write until the controller fences it or the follower falls out of the ISR), so a
    request the socket view sees unanswered for less is no proof that the client hangs;
    past it, a client that still waits on the same connection has stopped enforcing its
    own timeout."""
    time_to_error_budget_seconds: int
    """Longest a producer's own timeouts may keep a send silent before it reports an error."""


STANDALONE = DetectionDefaults(
    probe_interval_seconds=5,
    stall_seconds=30,
    heartbeat_seconds=15,
    metadata_max_age_seconds=180,
    election_grace_seconds=15,
    producer_request_timeout_seconds=30,
    time_to_error_budget_seconds=60,
)
"""A sidecar without a policy: next to the wrapper, judged fast."""

POLICY = DetectionDefaults(
    probe_interval_seconds=10,
    stall_seconds=60,
    heartbeat_seconds=30,
    metadata_max_age_seconds=900,
    election_grace_seconds=30,
    producer_request_timeout_seconds=30,
    time_to_error_budget_seconds=120,
)
"""A `ProducerHealthPolicy` field left out: any client, verdicts that restart executors."""
