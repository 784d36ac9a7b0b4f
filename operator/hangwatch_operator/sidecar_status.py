"""The sidecar's `/status` document, read into typed values the operator relies on.

Fed by `status_polling` with the body of `GET /status`, decoded with the document's one
definition (`hangwatch.wire.status`: types, bounds, the version rule). Only the parts
correlation and decisions use are kept: the debounced verdict with its reasons and
start, each broker's reachability and the sidecar's own freshness. Anything the
operator cannot trust raises `StatusFormatError`, which the poller reports as an
unreachable sidecar, so a garbled answer is never read as a hang: a body that is not
the contract's, a verdict only the operator may give (`node_network_fault`), and an
evaluation time that is missing, not a finite number, stale, or in the future beyond
`CLOCK_SKEW_SECONDS`. Pure: no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass

from hangwatch.contracts import Reachability, Verdict
from hangwatch.known_hangs import advice_line
from hangwatch.pod_security import Feature, parse_not_judged
from hangwatch.verdicts import VERDICTS, JudgedBy
from hangwatch.wire import status
from hangwatch_operator.watched import WatchedPod
from hangwatch_producer.wire.schema import WireFormatError

OPERATOR_ONLY = frozenset(p.verdict for p in VERDICTS if p.judged_by is JudgedBy.OPERATOR)
"""Verdicts only the operator gives (from several pods, `hangwatch.verdicts`); a sidecar
claiming one is refused."""

CLOCK_SKEW_SECONDS = 30.0
"""How far a sidecar's clock may run ahead of the operator's: nodes synchronised by NTP
differ by milliseconds; an evaluation time further in the future is not believed."""


class StatusFormatError(ValueError):
    """A /status answer the operator cannot use (wrong schema, missing or bad fields)."""


@dataclass(frozen=True)
class BrokerReach:
    """One broker address and how it answered the sidecar's last probe."""

    address: str
    reachability: str
    """A `Reachability` value; kept as text so a newer sidecar's class is not fatal."""

    @property
    def ok(self) -> bool:
        return self.reachability == Reachability.OK


MAX_TOPIC_CHARS = 249
"""Kafka's longest topic name: a longer one is not a topic."""
MAX_UNWRITABLE_TOPICS = 50
"""Topics one pod's report names as refusing writes at most (the rest are not named)."""


@dataclass(frozen=True)
class UnwritableTopic:
    """A topic whose writes the cluster refuses, as one pod's sidecar names it."""

    topic: str
    partitions: tuple[int, ...] = ()
    reason: str = ""


def _named_topics(named: object) -> tuple[UnwritableTopic, ...]:
    """The `partitions_unwritable` evidence's topics (another program's JSON: each entry
    checked, anything else skipped)."""
    if not isinstance(named, list):
        return ()
    found: dict[str, UnwritableTopic] = {}
    for entry in named[: status.MAX_ITEMS]:
        if not isinstance(entry, dict):
            continue
        topic, parts, reason = entry.get("topic"), entry.get("partitions"), entry.get("reason")
        if not isinstance(topic, str) or not 0 < len(topic) <= MAX_TOPIC_CHARS:
            continue
        ids = tuple(
            p for p in (parts if isinstance(parts, list) else []) if type(p) is int and p >= 0
        )
        found.setdefault(
            topic, UnwritableTopic(topic, ids, reason if isinstance(reason, str) else "")
        )
    return tuple(found.values())[:MAX_UNWRITABLE_TOPICS]


def unwritable_topics(report: status.StatusDocument) -> tuple[UnwritableTopic, ...]:
    """The topics a `partitions_unwritable` pod names: its latest assessment's evidence
    when that is the reported verdict's, else the written topics `cluster.acceptance`
    shows refusing writes or in doubt (kept when the evidence was cut for size)."""
    latest = report.latest
    if latest is not None and latest.verdict == report.verdict:
        named = _named_topics(latest.evidence.get(status.UNWRITABLE_TOPICS))
        if named:
            return named
    accepting = report.cluster.acceptance if report.cluster is not None else []
    return tuple(
        UnwritableTopic(a.topic[:MAX_TOPIC_CHARS], tuple(a.unwritable or a.in_doubt), a.reason)
        for a in accepting
        if a.topic and (a.unwritable or a.in_doubt)
    )[:MAX_UNWRITABLE_TOPICS]


@dataclass(frozen=True)
class SidecarReport:
    """What one sidecar says about its pod."""

    verdict: Verdict
    since: float | None
    reasons: tuple[str, ...]
    brokers: tuple[BrokerReach, ...]
    evaluated_ts: float | None
    version: str = ""
    failure_budget: status.FailureBudget | None = None
    """The pod's application's executor failure budget (Spark view), when known."""
    not_judged: tuple[Feature, ...] = ()
    """Features the pod's Pod Security level left out of its sidecar (known ones only)."""
    advisories: tuple[str, ...] = ()
    """The pod's Kafka client releases with a published hang, one line each (advice)."""
    unwritable: tuple[UnwritableTopic, ...] = ()
    """The topics whose writes the cluster refuses, as the sidecar names them
    (`unwritable_topics`)."""

    @property
    def cut_off(self) -> bool:
        """No broker answers from this pod (the sidecar's verdict or its probe results)."""
        if self.verdict is Verdict.CLUSTER_UNREACHABLE:
            return True
        return bool(self.brokers) and not any(b.ok for b in self.brokers)

    @property
    def reaches_cluster(self) -> bool:
        """At least one broker answers from this pod."""
        return not self.cut_off and any(b.ok for b in self.brokers)

    @property
    def failing_brokers(self) -> tuple[str, ...]:
        return tuple(b.address for b in self.brokers if not b.ok)


@dataclass(frozen=True)
class PodReport:
    """One watched pod and what its sidecar said (or, in `error`, why it said nothing)."""

    pod: WatchedPod
    status: SidecarReport | None = None
    error: str | None = None


def parse_status(doc: object, *, now: float, stale_after_seconds: float) -> SidecarReport:
    """A `SidecarReport` from a /status body (bytes) or its decoded JSON value.

    `stale_after_seconds`: a sidecar whose last evaluation round is older than this is
    wedged (its /healthz will soon fail too); its verdict is not used.
    """
    try:
        report = status.decode(doc) if isinstance(doc, bytes) else status.from_builtins(doc)
    except WireFormatError as exc:
        raise StatusFormatError(str(exc)) from None
    try:
        verdict = Verdict(report.verdict)
    except ValueError:
        raise StatusFormatError(f"unknown verdict {report.verdict[:40]!r}") from None
    if verdict in OPERATOR_ONLY:
        raise StatusFormatError(f"verdict {verdict} is the operator's, not a sidecar's")
    evaluated = report.sidecar.evaluated_ts
    if evaluated is None:
        raise StatusFormatError("sidecar.evaluated_ts is missing: no evaluation round yet")
    if evaluated - now > CLOCK_SKEW_SECONDS:
        raise StatusFormatError(f"sidecar's last evaluation is {evaluated - now:.0f} s ahead")
    if now - evaluated > stale_after_seconds:
        raise StatusFormatError(f"sidecar's last evaluation is {now - evaluated:.0f} s old")
    return SidecarReport(
        verdict=verdict,
        since=report.since,
        reasons=tuple(report.reasons),
        brokers=tuple(BrokerReach(b.address, b.reachability) for b in report.brokers),
        evaluated_ts=evaluated,
        version=report.version,
        failure_budget=None if report.spark is None else report.spark.failure_budget,
        not_judged=parse_not_judged(",".join(report.not_judged)),
        advisories=tuple(
            advice_line(a.client, a.version, a.hang, a.what, a.fixed, a.report)
            for a in report.advisories
        ),
        unwritable=unwritable_topics(report),
    )
