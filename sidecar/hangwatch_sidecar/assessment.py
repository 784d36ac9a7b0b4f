"""What the verdict engine concludes, and the thresholds it judges with (plain data).

`Assessment` is a verdict with its reasons (sentences) and evidence (numbers and names);
`PodAssessment` the pod's and each producer's; `Thresholds` the detection thresholds the
sidecar's settings fill. The rules (`hangwatch_sidecar.rules`) produce assessments, the
debouncer (`hysteresis`) steadies the pod's verdict, `state` publishes both.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from hangwatch.contracts import Verdict
from hangwatch.defaults import STANDALONE
from hangwatch.wire import status

MAX_CONNECTIONS_SHOWN = status.MAX_CONNECTIONS
"""Connections listed in a verdict's evidence at most (outstanding and blackholed first),
as many as /status lists."""


@dataclass(frozen=True)
class Thresholds:
    """Detection thresholds, in seconds (the sidecar's settings fill these; the defaults are
    `hangwatch.defaults.STANDALONE`)."""

    stall_seconds: float = float(STANDALONE.stall_seconds)
    """Pending messages with no delivery for this long while the cluster is healthy is a
    hang. librdkafka's default request timeout is 30 s; a healthy producer delivers or
    fails well within it."""
    heartbeat_seconds: float = float(STANDALONE.heartbeat_seconds)
    """Telemetry unchanged this long while the process lives means the producer's poll
    loop stopped (S4). Telemetry refreshes every statistics interval (1 s by default)."""
    metadata_max_age_seconds: float = float(STANDALONE.metadata_max_age_seconds)
    """A producer whose metadata is older than this is stale (S1). A healthy producer's
    topic metadata ages up to its refresh interval (the wrapper: 60 s) and librdkafka
    expires its cache at metadata.max.age.ms (the wrapper: 180 s). A leader disagreement
    counts once the producer's metadata is older than the election grace."""
    election_grace_seconds: float = float(STANDALONE.election_grace_seconds)
    """Leaderless partitions are expected this long (S2: managed Kafka elections take
    1-2 s; controlled shutdowns up to ~10 s); past it they still block restarts."""
    producer_request_timeout_seconds: float = float(STANDALONE.producer_request_timeout_seconds)
    """The producers' own request timeout: a request the socket view sees unanswered is the
    broker's business until it has waited this long (a broker may hold it), the
    producer's fault only past it (`sockets.judge`)."""
    expected_write_interval_seconds: float | None = None
    """How often the pod's producers write at least, when someone said so (a policy's
    `detection.expectedWriteIntervalSeconds`): every connection of the pod silent longer
    than this is silence to weigh even when Spark's view does not say a task runs
    (`sockets.judge`). None: silence counts only while Spark runs a task."""


@dataclass(frozen=True)
class Assessment:
    """A verdict with its reasons (sentences) and evidence (numbers and names)."""

    verdict: Verdict
    reasons: tuple[str, ...] = ()
    evidence: dict[str, Any] = field(default_factory=dict)
    held: bool = False
    """The verdict's evidence already held for a threshold of its own, so the debouncer
    may take it at once (`hysteresis.HELD_WHEN_MEASURED`); not part of /status."""


@dataclass(frozen=True)
class PodAssessment:
    """The pod's verdict and each producer's."""

    pod: Assessment
    producers: dict[str, Assessment]
