"""The sidecar's published state and its /status JSON document.

The evaluation loop (`hangwatch_sidecar.loop`) builds a new immutable `SidecarState`
after every round and swaps it in; the HTTP server and the metrics collector only
read the latest one, so a slow scrape never blocks probing and vice versa.
`status_document` builds the `/status` document, whose types and bounds are
`hangwatch.wire.status` (the operator reads it with the same module; docs/sidecar.md).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from hangwatch import __version__, pod_security
from hangwatch.contracts import Verdict
from hangwatch.wire import status
from hangwatch_sidecar.assessment import Assessment, PodAssessment
from hangwatch_sidecar.evidence import BrokerObservation, ClusterObservation, ProducerObservation
from hangwatch_sidecar.probe.acceptance import acceptance, to_status
from hangwatch_sidecar.pystacks.judge import HeldView
from hangwatch_sidecar.releases.advise import Advisory
from hangwatch_sidecar.sockets.types import SocketObservation
from hangwatch_sidecar.spark.types import (
    Activity,
    ReadStats,
    RunningTask,
    SparkView,
    ThreadObservation,
)

SPARK_SHOWN = 16
STACKS_OFF = (
    "off (--python-stacks false; in a pod: the policy's processView.enabled false, or "
    "left out by the namespace's Pod Security level, see not_judged): a "
    "producer blocked inside the client cannot be told from a task busy elsewhere, so "
    "silence stays producer_silent"
)
"""Tasks and producer threads of the Spark view listed in /status at most (totals beside)."""


@dataclass(frozen=True)
class ProbeCounts:
    """What probing cost the brokers since the sidecar started (for /status and metrics)."""

    connects: Mapping[str, int] = field(default_factory=dict)
    """New probe connections per broker."""
    requests: Mapping[str, int] = field(default_factory=dict)
    """ApiVersions probe requests per broker."""
    metadata_requests: int = 0
    metadata_clients: int = 0
    """Metadata clients created (each opens its own connections)."""


@dataclass(frozen=True)
class SidecarState:
    """Everything /status and /metrics show, as of the last evaluation round."""

    started_ts: float
    verdict: Verdict = Verdict.UNKNOWN
    since_ts: float | None = None
    assessment: PodAssessment | None = None
    cluster: ClusterObservation | None = None
    cluster_ts: float | None = None
    metadata_ts: float | None = None
    producers: tuple[ProducerObservation, ...] = ()
    rounds: int = 0
    evaluated_ts: float | None = None
    round_seconds: float = 0.0
    probe_errors: Mapping[str, int] = field(default_factory=dict)
    verdict_changes: Mapping[str, int] = field(default_factory=dict)
    telemetry_problems: Mapping[str, int] = field(default_factory=dict)
    identity: Mapping[str, str] = field(default_factory=dict)
    settings: Mapping[str, Any] = field(default_factory=dict)
    time_to_error: status.TimeToError | None = None
    """Producers whose own settings can stay silent longer than the budget (a warning)."""
    spark_ui: str | None = None
    """The driver UI the Spark view reads; None when the Spark view is off."""
    local_jvm_dumps: bool = False
    """Thread dumps of the pod's own JVM are on (used when the driver's view is not)."""
    spark: SparkView | None = None
    spark_reads: ReadStats = field(default_factory=ReadStats)
    failure_budget: status.FailureBudget | None = None
    """The application's executor failure budget (`spark.failures`), as last read."""
    sockets: SocketObservation | None = None
    """The round's view of the pod's own connections to brokers (None: switched off)."""
    probe_counts: ProbeCounts = field(default_factory=ProbeCounts)
    python_stacks: bool = False
    """The Python stack view is on."""
    not_judged: Mapping[str, str] = field(default_factory=dict)
    """Feature the pod's Pod Security level left out -> the evidence the pod cannot have."""
    stacks: HeldView | None = None
    """The round's Python stack sample (None: not sampled this round)."""
    stack_samples: int = 0
    advisories: tuple[Advisory, ...] = ()
    """The pod's Kafka client releases with a published hang (advice only)."""


def _assessment(a: Assessment) -> status.Assessment:
    return status.Assessment(verdict=str(a.verdict), reasons=list(a.reasons), evidence=a.evidence)


def _broker(b: BrokerObservation) -> status.BrokerStatus:
    return status.BrokerStatus(
        address=b.address,
        node_id=b.node_id,
        reachability=str(b.reachability),
        latency_ms=b.latency_ms,
        in_bootstrap=b.in_bootstrap,
        advertised=b.advertised,
        detail=b.detail,
    )


def _sockets(view: SocketObservation | None) -> status.SocketViewStatus | None:
    """The socket view, bounded: the connections that matter first, at most
    `status.MAX_CONNECTIONS` of them (all are counted)."""
    if view is None:
        return None
    writes = view.writes
    return status.SocketViewStatus(
        available=view.available,
        error=view.error,
        connections_total=len(view.connections),
        connections=[
            status.ConnectionStatus(**c.as_dict())  # type: ignore[arg-type]
            for c in view.ranked()[: status.MAX_CONNECTIONS]
        ],
        silent_seconds=view.silent_seconds,
        failed_connects=view.failed_connects,
        failed_connects_seconds=view.failed_connects_seconds,
        last_write_seconds=None if writes is None else round(writes.last_write_seconds, 3),
        closed_since_write=0 if writes is None else writes.closed,
        not_writes_since_write=0 if writes is None else writes.not_writes,
    )


def status_document(state: SidecarState) -> status.StatusDocument:
    """The /status document: pod verdict (debounced), latest raw assessment, brokers,
    producers, the producers over the time-to-error budget (`hangwatch.wire.status`)."""
    latest = state.assessment
    cluster = state.cluster
    return status.StatusDocument(
        version=__version__,
        identity=dict(state.identity),
        verdict=str(state.verdict),
        since=state.since_ts,
        reasons=list(latest.pod.reasons) if latest and latest.pod.verdict is state.verdict else [],
        latest=_assessment(latest.pod) if latest else None,
        brokers=[_broker(b) for b in (cluster.brokers if cluster else ())],
        cluster=None
        if cluster is None
        else status.ClusterStatus(
            probed_ts=state.cluster_ts,
            metadata_ts=state.metadata_ts,
            metadata_ok=cluster.metadata_ok,
            leaderless=cluster.leaderless_for(frozenset()),
            error=cluster.error,
            acceptance=_acceptance(cluster),
        ),
        producers={key: _assessment(a) for key, a in (latest.producers.items() if latest else ())},
        sidecar=status.SidecarInfo(
            started_ts=state.started_ts,
            rounds=state.rounds,
            evaluated_ts=state.evaluated_ts,
            round_seconds=round(state.round_seconds, 4),
            settings=dict(state.settings),
            probe_connects=dict(state.probe_counts.connects),
            probe_requests=dict(state.probe_counts.requests),
            metadata_requests=state.probe_counts.metadata_requests,
        ),
        time_to_error=state.time_to_error,
        spark=_spark(state),
        sockets=_sockets(state.sockets),
        python_stacks=_stacks(state),
        not_judged=dict(state.not_judged),
        advisories=[_advisory(a) for a in state.advisories],
    )


def _advisory(advisory: Advisory) -> status.Advisory:
    hang = advisory.hang
    return status.Advisory(
        client=advisory.client,
        version=advisory.version,
        hang=hang.id,
        report=hang.report,
        affected=hang.affected,
        fixed=hang.fixed,
        what=hang.what,
        seen_in=list(advisory.seen_in),
    )


def _acceptance(cluster: ClusterObservation) -> list[status.TopicAcceptance]:
    """Each written topic the metadata lists, with what the cluster accepts there."""
    addresses = {
        b.node_id: f"{b.address}: {b.reachability}"
        for b in cluster.brokers
        if b.node_id is not None
    }
    return [
        to_status(found, addresses)
        for found in acceptance(cluster.partitions, cluster.min_insync, cluster.partitions)
    ]


def not_judged(setting: str) -> dict[str, str]:
    """`--not-judged` (the webhook's `pod_security.NOT_JUDGED_ENV`) as /status shows it."""
    return {str(f): pod_security.LOST[f] for f in pod_security.parse_not_judged(setting)}


def _stacks(state: SidecarState) -> status.PythonStacksStatus | None:
    """The Python stack view: threads inside a client first, at most `SPARK_SHOWN`."""
    if not state.python_stacks:
        return None if state.spark_ui is None else status.PythonStacksStatus(error=STACKS_OFF)
    held = state.stacks
    if held is None:
        return status.PythonStacksStatus(samples_total=state.stack_samples)
    ranked = sorted(held.threads, key=lambda h: h.place.place == "outside")
    return status.PythonStacksStatus(
        sampled=True,
        available=held.view.available,
        error=held.view.error,
        processes=held.view.processes,
        samples_total=state.stack_samples,
        threads=[
            status.PythonThread(
                pid=h.place.pid,
                tid=h.place.tid,
                name=h.place.name,
                place=str(h.place.place),
                active=h.place.active,
                client_call=h.place.client_call,
                user_frame=h.place.user_frame,
                caller=h.place.caller,
                held_seconds=round(h.held_seconds, 3),
                samples=h.samples,
            )
            for h in ranked[:SPARK_SHOWN]
        ],
    )


def _spark(state: SidecarState) -> status.SparkStatus | None:
    """The Spark view: where the driver is, whether it answers and why not, what it says."""
    if state.spark_ui is None and not state.local_jvm_dumps:
        return None
    driver_ui, local = state.spark_ui or "", state.local_jvm_dumps
    reads = state.spark_reads
    read_stats = status.SparkReads(
        total=reads.reads,
        errors=dict(reads.errors),
        last_read_seconds=round(reads.last_read_seconds, 4),
        last_requests=reads.last_requests,
        last_response_bytes=reads.last_response_bytes,
    )
    view = state.spark
    if view is None:
        return status.SparkStatus(
            driver_ui=driver_ui,
            local_jvm_dumps=local,
            reads=read_stats,
            failure_budget=state.failure_budget,
        )
    threads = sorted(view.threads, key=lambda o: o.thread.activity == Activity.SENDING)
    running = view.task_running_seconds
    return status.SparkStatus(
        driver_ui=driver_ui,
        source=view.source,
        local_jvm_dumps=local,
        available=view.available,
        error=view.error,
        application_id=view.application_id or None,
        executor_id=view.executor_id or None,
        thread_dump=view.thread_dump,
        task_running=view.task_running,
        task_running_seconds=None if running is None else round(running, 3),
        tasks_total=len(view.tasks),
        tasks=[_task(t) for t in view.tasks[:SPARK_SHOWN]],
        producer_threads_total=len(view.threads),
        producer_threads=[_thread(o) for o in threads[:SPARK_SHOWN]],
        reads=read_stats,
        failure_budget=state.failure_budget,
    )


def _task(t: RunningTask) -> status.SparkTask:
    peers, stage = t.peers, t.task.stage
    median = None if peers is None or peers.median_seconds is None else peers.median_seconds
    return status.SparkTask(
        task_id=t.task.task_id,
        stage=None if stage is None else f"{stage[0]}.{stage[1]}",
        index=t.task.index,
        attempt=t.task.attempt,
        running_seconds=round(t.running_seconds, 3),
        straggler=t.straggler,
        stage_median_seconds=None if median is None else round(median, 3),
        stage_complete=None if peers is None else peers.complete,
        stage_failed=None if peers is None else peers.failed,
    )


def _thread(o: ThreadObservation) -> status.SparkThread:
    t = o.thread
    return status.SparkThread(
        thread=t.name,
        role=str(t.role),
        activity=str(t.activity),
        state=t.state,
        held_seconds=round(o.held_seconds, 3),
        frame=t.frame,
        user_frame=t.user_frame,
        waits_on=t.waits_on,
        detail=t.detail,
        task_id=t.task_id,
    )
