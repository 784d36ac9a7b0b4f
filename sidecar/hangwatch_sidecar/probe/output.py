"""Output of a probe run: the on-call summary text and the `--json` document.

Fed by `hangwatch probe` with a `ProbeResult` and its `ProbeAssessment` (`report`).
Pure string and dict building; the document's fields are described in docs/probe.md
and versioned by `DOCUMENT_SCHEMA`. Secret values never reach it: endpoint details are
scrubbed by the engine and the client configuration is shown redacted.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict
from datetime import UTC, datetime
from typing import Any

import msgspec

from hangwatch_sidecar.probe.acceptance import TopicAcceptance, ids_text, min_insync_text, to_status
from hangwatch_sidecar.probe.report import (
    EndpointRow,
    ProbeAssessment,
    broker_addresses,
    topic_acceptance,
)
from hangwatch_sidecar.probe.types import ProbeResult

DOCUMENT_SCHEMA = "hangwatch.probe/v1"
"""`schema` field of the JSON document; bumped when a field changes meaning or disappears."""


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


def _role(row: EndpointRow) -> str:
    if row.advertised is None:
        return "bootstrap" if row.in_bootstrap else "?"
    if row.in_bootstrap:
        return "bootstrap, advertised" if row.advertised else "bootstrap only"
    return "advertised"


def _table(rows: Sequence[EndpointRow], tls: bool) -> list[str]:
    header = ["ENDPOINT", "BROKER", "ROLE", "REACHABILITY", "DNS ms", "CONNECT ms"]
    header += ["TLS ms"] if tls else []
    header += ["KAFKA ms", "LEADS"]
    cells = [header]
    for row in rows:
        p = row.probe
        line = [str(p.endpoint), "-" if row.broker_id is None else str(row.broker_id), _role(row)]
        line += [str(row.reachability), _ms(p.dns_ms), _ms(p.connect_ms)]
        line += [_ms(p.tls_ms)] if tls else []
        line += [_ms(p.api_versions_ms), str(row.leader_of)]
        cells.append(line)
    widths = [max(len(c[i]) for c in cells) for i in range(len(header))]
    return [
        "  " + "  ".join(c.ljust(w) for c, w in zip(line, widths, strict=True)).rstrip()
        for line in cells
    ]


def _metadata_line(result: ProbeResult) -> str:
    md = result.metadata
    if md.metadata is None:
        return f"Metadata: unavailable after {md.elapsed_ms:.0f} ms ({md.failure})"
    m = md.metadata
    partitions = sum(len(t.partitions) for t in m.topics)
    return (
        f"Metadata: cluster {m.cluster_id or '?'}, controller {m.controller_id}, "
        f"{_count(len(m.brokers), 'broker')}, {_count(len(m.topics), 'topic')}, "
        f"{_count(partitions, 'partition')} "
        f"({md.elapsed_ms:.1f} ms)"
    )


def _acceptance_line(topic: TopicAcceptance) -> str:
    known = topic.min_insync
    if known is None or known.value is None:
        why = known.problem if known is not None else "not asked"
        what = f"min.insync.replicas unknown ({why})"
    else:
        what = min_insync_text(known)
    what += f", replication factor {topic.replication_factor}"
    if topic.refused:
        ids = [p.partition for p in topic.refused]
        return f"  {topic.topic}: {what}: {ids_text(ids)} refuse writes"
    if topic.in_doubt:
        ids = [p.partition for p in topic.in_doubt]
        return f"  {topic.topic}: {what}: {ids_text(ids)} under-replicated, may refuse writes"
    if known is None or known.value is None:
        return f"  {topic.topic}: {what}: every ISR full"
    return f"  {topic.topic}: {what}: accepts writes"


def render_text(result: ProbeResult, assessment: ProbeAssessment) -> str:
    """The on-call summary: verdict line, what is wrong, then the per-endpoint table."""
    answering = sum(row.ok for row in assessment.rows)
    lines = [
        f"hangwatch probe: {assessment.health.upper()} (exit {assessment.exit_code}) - "
        f"{answering} of {len(assessment.rows)} endpoints answer, probed in "
        f"{result.elapsed_ms:.0f} ms",
        "",
    ]
    if assessment.findings:
        lines.append("What is wrong:")
        lines += [f"  {f.severity.upper():8} {f.code}: {f.message}" for f in assessment.findings]
    else:
        lines.append("Nothing wrong: every endpoint answers; partitions have leaders and full ISR.")
    lines += ["", "Endpoints:", *_table(assessment.rows, result.settings.uses_tls), ""]
    accepting = topic_acceptance(result)
    if accepting:
        lines.append("Acceptance of acks=all writes (ISR against min.insync.replicas):")
        lines += [_acceptance_line(t) for t in accepting] + [""]
    lines.append(_metadata_line(result))
    settings = result.settings
    lines.append(
        f"Settings: connect timeout {settings.connect_timeout_ms} ms, request timeout "
        f"{settings.request_timeout_ms} ms, security.protocol {settings.security_protocol}"
    )
    return "\n".join(lines) + "\n"


def to_document(result: ProbeResult, assessment: ProbeAssessment) -> dict[str, Any]:
    """The `--json` document (schema hangwatch.probe/v1, fields in docs/probe.md)."""
    md = result.metadata
    settings = result.settings
    return {
        "schema": DOCUMENT_SCHEMA,
        "status": str(assessment.health),
        "exit_code": assessment.exit_code,
        "started_at": datetime.fromtimestamp(result.started_at, UTC).isoformat(
            timespec="milliseconds"
        ),
        "elapsed_ms": round(result.elapsed_ms, 3),
        "bootstrap": [str(e) for e in result.bootstrap],
        "topics": list(result.topics),
        "settings": {
            "connect_timeout_ms": settings.connect_timeout_ms,
            "request_timeout_ms": settings.request_timeout_ms,
            "security_protocol": settings.security_protocol,
            "client_config": settings.redacted_config(),
        },
        "findings": [asdict(f) for f in assessment.findings],
        "endpoints": [_endpoint_document(row) for row in assessment.rows],
        "acceptance": [
            msgspec.to_builtins(to_status(t, broker_addresses(assessment.rows)))
            for t in topic_acceptance(result)
        ],
        "metadata": {
            "ok": md.metadata is not None and not md.error,
            "error": md.error or None,
            "failure": md.failure,
            "elapsed_ms": round(md.elapsed_ms, 3),
            "client_errors": [asdict(e) for e in md.client_errors],
            "cluster": None if md.metadata is None else asdict(md.metadata),
        },
    }


def _endpoint_document(row: EndpointRow) -> dict[str, Any]:
    p = row.probe
    return {
        "endpoint": str(p.endpoint),
        "host": p.endpoint.host,
        "port": p.endpoint.port,
        "broker_id": row.broker_id,
        "in_bootstrap": row.in_bootstrap,
        "advertised": row.advertised,
        "reachability": str(row.reachability),
        "detail": row.detail,
        "probe_reachability": str(p.reachability),
        "addresses": list(p.addresses),
        "dns_ms": p.dns_ms,
        "connect_ms": p.connect_ms,
        "tls_ms": p.tls_ms,
        "api_versions_ms": p.api_versions_ms,
        "leader_of": row.leader_of,
    }
