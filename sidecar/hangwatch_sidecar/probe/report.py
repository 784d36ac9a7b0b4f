"""Judging a probe run: pure functions from a `ProbeResult` to rows, findings and health.

Fed by `hangwatch probe` with the `ProbeResult` of `endpoints.probe_cluster` (the
sidecar's loop judges its own rounds with `observing` and `verdicts` instead). It
matches probed endpoints to advertised brokers, decides each endpoint's effective
reachability (a broker that answers ApiVersions but rejects our credentials is an
`auth_error`), lists what is wrong (most severe first), and derives the overall health
and exit code; `output` turns the assessment into text and JSON. No I/O here.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

from hangwatch.acceptance import brokers_tolerated
from hangwatch.contracts import ExitCode, Reachability
from hangwatch_sidecar.probe.acceptance import (
    TopicAcceptance,
    acceptance,
    doubt_reason,
    min_insync_text,
    refused_reason,
)
from hangwatch_sidecar.probe.types import (
    ELECTION_ERRORS,
    UNKNOWN_TOPIC,
    BrokerInfo,
    ClusterMetadata,
    EndpointProbe,
    ProbeResult,
    TopicState,
)


class Severity(StrEnum):
    """How much a finding matters: critical -> unavailable, warning -> degraded."""

    CRITICAL = "critical"
    WARNING = "warning"
    INFO = "info"


class Health(StrEnum):
    """Overall outcome of a probe run."""

    HEALTHY = "healthy"
    DEGRADED = "degraded"
    """Something is wrong (a broker, a bootstrap entry, partitions) but some broker works."""
    UNAVAILABLE = "unavailable"
    """No broker answers from here."""

    @property
    def exit_code(self) -> int:
        return {
            Health.HEALTHY: ExitCode.OK,
            Health.DEGRADED: ExitCode.DEGRADED,
            Health.UNAVAILABLE: ExitCode.UNAVAILABLE,
        }[self]


@dataclass(frozen=True)
class ProbeFinding:
    """One thing that is wrong (or worth knowing); `code` is stable for scripts and alerts."""

    severity: Severity
    code: str
    subject: str
    message: str


@dataclass(frozen=True)
class EndpointRow:
    """A probed endpoint joined with what the cluster says about it."""

    probe: EndpointProbe
    reachability: Reachability
    """Effective class: the probe's, or the metadata client's auth/TLS failure for it."""
    detail: str
    broker_id: int | None
    in_bootstrap: bool
    advertised: bool | None
    """None when no metadata arrived."""
    leader_of: int
    """Partitions (of the topics looked at) this broker leads."""

    @property
    def ok(self) -> bool:
        return self.reachability is Reachability.OK


@dataclass(frozen=True)
class ProbeAssessment:
    """Health, findings (most severe first) and one row per probed endpoint."""

    health: Health
    findings: tuple[ProbeFinding, ...]
    rows: tuple[EndpointRow, ...]

    @property
    def exit_code(self) -> int:
        return self.health.exit_code


_SEVERITY_ORDER = {Severity.CRITICAL: 0, Severity.WARNING: 1, Severity.INFO: 2}


# -- rows --------------------------------------------------------------------------------------
def _same_place(a: EndpointProbe, b: EndpointProbe) -> bool:
    """Same endpoint, or same port on an address both resolve to (an alias)."""
    if a.endpoint == b.endpoint:
        return True
    return a.endpoint.port == b.endpoint.port and bool(set(a.addresses) & set(b.addresses))


def _broker_id(probe: EndpointProbe, brokers: dict[int, EndpointProbe]) -> int | None:
    exact = [bid for bid, p in brokers.items() if p.endpoint == probe.endpoint]
    alias = [bid for bid, p in brokers.items() if _same_place(p, probe)]
    matches = exact or alias
    return matches[0] if matches else None


def _effective(probe: EndpointProbe, result: ProbeResult) -> tuple[Reachability, str]:
    if not probe.ok:
        return probe.reachability, probe.detail
    md = result.metadata
    for error in md.client_errors:
        if error.endpoint == probe.endpoint:
            return error.reachability, error.message
    if md.failure in (Reachability.AUTH_ERROR, Reachability.TLS_ERROR):
        return md.failure, f"metadata client: {md.error}"
    return Reachability.OK, ""


def _leader_counts(metadata: ClusterMetadata | None) -> Counter[int]:
    if metadata is None:
        return Counter()
    return Counter(p.leader for t in metadata.topics for p in t.partitions if not t.error)


def build_rows(result: ProbeResult) -> tuple[EndpointRow, ...]:
    """One row per probed endpoint, bootstrap entries first."""
    metadata = result.metadata.metadata
    by_endpoint = {p.endpoint: p for p in result.endpoints}
    advertised: list[BrokerInfo] = list(metadata.brokers) if metadata else []
    broker_probes = {b.id: by_endpoint[b.endpoint] for b in advertised if b.endpoint in by_endpoint}
    leads = _leader_counts(metadata)
    rows = []
    for probe in result.endpoints:
        broker_id = _broker_id(probe, broker_probes)
        reachability, detail = _effective(probe, result)
        rows.append(
            EndpointRow(
                probe=probe,
                reachability=reachability,
                detail=detail,
                broker_id=broker_id,
                in_bootstrap=probe.endpoint in result.bootstrap,
                advertised=None if metadata is None else broker_id is not None,
                leader_of=leads[broker_id] if broker_id is not None else 0,
            )
        )
    return tuple(rows)


# -- findings ----------------------------------------------------------------------------------
def _where(row: EndpointRow) -> str:
    name = str(row.probe.endpoint)
    if row.broker_id is not None:
        name = f"broker {row.broker_id} at {name}"
    return f"{name} (bootstrap)" if row.in_bootstrap else name


def _endpoint_findings(rows: Sequence[EndpointRow]) -> list[ProbeFinding]:
    found = []
    for row in rows:
        subject = str(row.probe.endpoint)
        if row.in_bootstrap and row.advertised is False:
            if row.ok:
                found.append(
                    ProbeFinding(
                        Severity.INFO,
                        "bootstrap_not_advertised",
                        subject,
                        f"bootstrap entry {subject} answers but is not an advertised broker "
                        "address (a load balancer or alias?)",
                    )
                )
            else:
                found.append(
                    ProbeFinding(
                        Severity.WARNING,
                        "dead_bootstrap_entry",
                        subject,
                        f"bootstrap entry {subject} is not advertised by the cluster and does "
                        f"not answer ({row.reachability}: {row.detail}): a removed or stopped "
                        "broker; drop it from bootstrap.servers if it is gone for good",
                    )
                )
        elif not row.ok:
            found.append(
                ProbeFinding(
                    Severity.WARNING,
                    "broker_unreachable",
                    subject,
                    f"{_where(row)}: {row.reachability}: {row.detail}",
                )
            )
    return found


def _partition_list(ids: Sequence[int], limit: int = 10) -> str:
    shown = ", ".join(str(i) for i in ids[:limit])
    more = f" and {len(ids) - limit} more" if len(ids) > limit else ""
    return f"partition{'s' if len(ids) > 1 else ''} {shown}{more}"


def _topic_findings(
    topic: TopicState, rows: Sequence[EndpointRow], advertised: set[int]
) -> list[ProbeFinding]:
    name = topic.name
    if topic.error == UNKNOWN_TOPIC:
        return [
            ProbeFinding(Severity.WARNING, "topic_missing", name, f"topic {name} does not exist")
        ]
    if topic.error and topic.error not in ELECTION_ERRORS:
        return [ProbeFinding(Severity.WARNING, "topic_error", name, f"topic {name}: {topic.error}")]
    found = []
    leaderless = [p.partition for p in topic.partitions if topic.error or p.leaderless]
    if leaderless or topic.error:
        what = f"{_partition_list(leaderless)} without a leader" if leaderless else "no leader"
        why = f" ({topic.error}: leader election under way?)" if topic.error else ""
        found.append(
            ProbeFinding(
                Severity.WARNING,
                "leaderless_partitions",
                name,
                f"topic {name}: {what}{why}",
            )
        )
    urp = [p.partition for p in topic.partitions if p.under_replicated]
    if urp:
        found.append(
            ProbeFinding(
                Severity.WARNING,
                "under_replicated_partitions",
                name,
                f"topic {name}: {_partition_list(urp)} under-replicated (ISR < replicas)",
            )
        )
    if not topic.error:
        found += _unreachable_leaders(topic, rows, advertised)
    return found


def _leader_trouble(broker_id: int, rows: Sequence[EndpointRow], advertised: set[int]) -> str:
    """Why writes to partitions led by `broker_id` stall from here, or "" when they do not."""
    if broker_id not in advertised:
        return "which the cluster does not advertise"
    mine = [r for r in rows if r.broker_id == broker_id]
    if mine and not any(r.ok for r in mine):
        return f"which does not answer from here ({mine[0].reachability})"
    return ""


def _unreachable_leaders(
    topic: TopicState, rows: Sequence[EndpointRow], advertised: set[int]
) -> list[ProbeFinding]:
    found = []
    for leader in sorted({p.leader for p in topic.partitions if p.leader >= 0}):
        trouble = _leader_trouble(leader, rows, advertised)
        if trouble:
            led = [p.partition for p in topic.partitions if p.leader == leader]
            found.append(
                ProbeFinding(
                    Severity.WARNING,
                    "leader_unreachable",
                    topic.name,
                    f"topic {topic.name}: {_partition_list(led)} led by broker {leader}, "
                    f"{trouble}; writes to them stall",
                )
            )
    return found


def _cluster_findings(result: ProbeResult, rows: Sequence[EndpointRow]) -> list[ProbeFinding]:
    found = []
    if not any(row.ok for row in rows):
        counts = Counter(str(row.reachability) for row in rows)
        summary = ", ".join(f"{kind}: {n}" for kind, n in counts.most_common())
        found.append(
            ProbeFinding(
                Severity.CRITICAL,
                "cluster_unreachable",
                "cluster",
                f"no broker answers from here ({len(rows)} endpoints: {summary})",
            )
        )
    md = result.metadata
    if md.metadata is None:
        found.append(
            ProbeFinding(
                Severity.WARNING,
                "metadata_failed",
                "cluster",
                f"no cluster metadata in {result.settings.request_timeout_ms} ms "
                f"({md.failure}): {md.error}",
            )
        )
    elif md.error:
        found.append(
            ProbeFinding(
                Severity.WARNING,
                "metadata_failed",
                "cluster",
                f"part of the metadata is missing: {md.error}",
            )
        )
    return found


def topic_acceptance(result: ProbeResult) -> list[TopicAcceptance]:
    """The described topics with their partitions and `min.insync.replicas`."""
    metadata = result.metadata.metadata
    if metadata is None:
        return []
    partitions = {t.name: t.partitions for t in metadata.topics if not t.error}
    return acceptance(partitions, result.min_insync, result.min_insync)


def broker_addresses(rows: Sequence[EndpointRow]) -> dict[int, str]:
    """Broker id -> `endpoint: reachability`, for naming the brokers out of an ISR."""
    return {
        r.broker_id: f"{r.probe.endpoint}: {r.reachability}"
        for r in rows
        if r.broker_id is not None
    }


def _acceptance_findings(result: ProbeResult, rows: Sequence[EndpointRow]) -> list[ProbeFinding]:
    addresses = broker_addresses(rows)
    found = []
    for topic in topic_acceptance(result):
        if topic.refused:
            found.append(
                ProbeFinding(
                    Severity.WARNING,
                    "partitions_unwritable",
                    topic.topic,
                    refused_reason(topic, addresses),
                )
            )
        elif topic.in_doubt:
            found.append(
                ProbeFinding(
                    Severity.INFO, "acceptance_unknown", topic.topic, doubt_reason(topic, addresses)
                )
            )
        known, factor = topic.min_insync, topic.replication_factor
        if (
            known is not None
            and known.value is not None
            and not topic.refused
            and brokers_tolerated(factor, known.value) == 0
        ):
            found.append(
                ProbeFinding(
                    Severity.INFO,
                    "no_replica_to_spare",
                    topic.topic,
                    f"topic {topic.topic}: {min_insync_text(known)} equals its replication "
                    f"factor {factor}: while any one broker holding its replicas is down (its "
                    "maintenance, a rolling upgrade), every acks=all write to those partitions "
                    "is refused",
                )
            )
    return found


def assess(result: ProbeResult) -> ProbeAssessment:
    """Rows, findings and health of a probe run (pure; the sidecar calls this too)."""
    rows = build_rows(result)
    findings = _cluster_findings(result, rows) + _endpoint_findings(rows)
    metadata = result.metadata.metadata
    if metadata is not None:
        wanted = set(result.topics)
        advertised = {b.id for b in metadata.brokers}
        for topic in metadata.topics:
            if not wanted or topic.name in wanted:
                findings += _topic_findings(topic, rows, advertised)
        findings += _acceptance_findings(result, rows)
    findings.sort(key=lambda f: _SEVERITY_ORDER[f.severity])
    if any(f.severity is Severity.CRITICAL for f in findings):
        health = Health.UNAVAILABLE
    elif any(f.severity is Severity.WARNING for f in findings):
        health = Health.DEGRADED
    else:
        health = Health.HEALTHY
    return ProbeAssessment(health, tuple(findings), rows)
