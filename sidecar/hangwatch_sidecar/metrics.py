"""Prometheus metrics of the sidecar, collected from the latest `SidecarState`.

A custom collector builds every family at scrape time from the published state, so
series of producers that went away disappear with them and no label ever holds a
message id or a timestamp (bounded: brokers, producers (<= max_producers), verdicts,
reachability classes, producer thread activities, Spark read error kinds, socket view
patterns). Names start with `hangwatch_` and carry their unit.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator, Mapping

from prometheus_client import ProcessCollector
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector, CollectorRegistry

from hangwatch.contracts import Reachability, Verdict
from hangwatch_sidecar.pystacks.types import Place
from hangwatch_sidecar.sockets.types import Pattern
from hangwatch_sidecar.spark.types import Activity
from hangwatch_sidecar.state import SidecarState

POD_VERDICTS = [v for v in Verdict if v is not Verdict.NODE_NETWORK_FAULT]


class StateCollector(Collector):
    """Yields hangwatch_* metric families from `get_state()` at every scrape."""

    def __init__(self, get_state: Callable[[], SidecarState]) -> None:
        self.get_state = get_state

    def collect(self) -> Iterator[Metric]:
        state = self.get_state()
        yield from _pod(state)
        yield from _brokers(state)
        yield from _producers(state)
        yield from _spark(state)
        yield from _sockets(state)
        yield from _stacks(state)
        yield from _sidecar(state)


def _pod(state: SidecarState) -> Iterator[Metric]:
    verdict = GaugeMetricFamily(
        "hangwatch_verdict",
        "1 for the pod's current (debounced) verdict, 0 for the others",
        labels=["verdict"],
    )
    for v in POD_VERDICTS:
        verdict.add_metric([str(v)], 1.0 if v is state.verdict else 0.0)
    yield verdict
    yield GaugeMetricFamily(
        "hangwatch_verdict_since_timestamp_seconds",
        "When the current verdict took over (Unix time)",
        value=state.since_ts or 0.0,
    )
    yield _counts(
        "hangwatch_verdict_changes", "Verdict changes, by new verdict", "verdict",
        state.verdict_changes,
    )  # fmt: skip


def _counts(name: str, doc: str, label: str, counts: Mapping[str, int]) -> Metric:
    """A counter family with one series per key of `counts` (a bounded label)."""
    family = CounterMetricFamily(name, doc, labels=[label])
    for key, n in sorted(counts.items()):
        family.add_metric([key], n)
    return family


def _brokers(state: SidecarState) -> Iterator[Metric]:
    up = GaugeMetricFamily(
        "hangwatch_broker_up", "1 when the broker answers a Kafka request", labels=["broker"]
    )
    reach = GaugeMetricFamily(
        "hangwatch_broker_reachability",
        "1 for the broker's current reachability class",
        labels=["broker", "class"],
    )
    latency = GaugeMetricFamily(
        "hangwatch_broker_probe_latency_seconds",
        "Last probe round trip (connect + ApiVersions)",
        labels=["broker"],
    )
    for b in state.cluster.brokers if state.cluster else ():
        up.add_metric([b.address], 1.0 if b.reachability is Reachability.OK else 0.0)
        for c in Reachability:
            reach.add_metric([b.address, str(c)], 1.0 if c is b.reachability else 0.0)
        if b.latency_ms is not None:
            latency.add_metric([b.address], b.latency_ms / 1000.0)
    yield from (up, reach, latency)
    yield _counts(
        "hangwatch_probe_errors", "Failed broker probes, by class", "class", state.probe_errors
    )
    yield GaugeMetricFamily(
        "hangwatch_leaderless_partitions",
        "Partitions (or whole topics) without a leader",
        value=len(state.cluster.leaderless_for(frozenset())) if state.cluster else 0,
    )
    yield GaugeMetricFamily(
        "hangwatch_cluster_metadata_age_seconds",
        "Age of the sidecar's last successful metadata fetch",
        value=time.time() - state.metadata_ts if state.metadata_ts else 0.0,
    )


def _producers(state: SidecarState) -> Iterator[Metric]:
    pending = GaugeMetricFamily(
        "hangwatch_producer_pending_messages", "Messages queued or in flight", labels=["producer"]
    )
    progress = GaugeMetricFamily(
        "hangwatch_producer_seconds_since_progress",
        "Seconds since the delivered count last grew",
        labels=["producer"],
    )
    heartbeat = GaugeMetricFamily(
        "hangwatch_producer_heartbeat_age_seconds",
        "Seconds since the telemetry file last changed",
        labels=["producer"],
    )
    delivered = CounterMetricFamily(
        "hangwatch_producer_delivered_messages", "Messages acknowledged", labels=["producer"]
    )
    failed = CounterMetricFamily(
        "hangwatch_producer_failed_messages", "Messages that failed delivery", labels=["producer"]
    )
    verdict = GaugeMetricFamily(
        "hangwatch_producer_verdict",
        "1 for each producer's latest verdict",
        labels=["producer", "verdict"],
    )
    latest = state.assessment.producers if state.assessment else {}
    for p in state.producers:
        pending.add_metric([p.key], p.pending)
        if p.progress_age_seconds is not None:
            progress.add_metric([p.key], p.progress_age_seconds)
        heartbeat.add_metric([p.key], p.heartbeat_age_seconds)
        delivered.add_metric([p.key], p.delivered_total)
        failed.add_metric([p.key], p.failed_total)
        if p.key in latest:
            verdict.add_metric([p.key, str(latest[p.key].verdict)], 1.0)
    yield from (pending, progress, heartbeat, delivered, failed, verdict)
    yield from _time_to_error(state)
    yield _counts(
        "hangwatch_telemetry_problems",
        "Telemetry files that could not be used, by reason",
        "reason",
        state.telemetry_problems,
    )


def _time_to_error(state: SidecarState) -> Iterator[Metric]:
    budget = GaugeMetricFamily(
        "hangwatch_time_to_error_budget_seconds",
        "Longest a producer's own settings may keep a send silent before it reports an error",
    )
    worst = GaugeMetricFamily(
        "hangwatch_producer_time_to_error_seconds",
        "Worst case of the producer's own settings until a send reports an error "
        "(+Inf: a timeout is disabled)",
        labels=["producer"],
    )
    over = GaugeMetricFamily(
        "hangwatch_producer_over_time_to_error_budget",
        "1 when the producer's own settings can stay silent longer than the budget",
        labels=["producer"],
    )
    checked = state.time_to_error
    if checked is not None:
        budget.add_metric([], checked.budget_seconds)
        for key, p in checked.producers.items():
            if p.unbounded or p.worst_case_seconds is not None:
                worst.add_metric([key], math.inf if p.unbounded else p.worst_case_seconds or 0.0)
            over.add_metric([key], 1.0 if p.over_budget else 0.0)
    yield from (budget, worst, over)


def _spark(state: SidecarState) -> Iterator[Metric]:
    """Spark's view of this executor; no samples when the Spark view is off."""
    up = GaugeMetricFamily(
        "hangwatch_spark_driver_up",
        "1 when Spark's view of this executor is current (the driver's REST API answered)",
    )
    tasks = GaugeMetricFamily(
        "hangwatch_spark_running_tasks", "Tasks of this executor running, as the driver says"
    )
    longest = GaugeMetricFamily(
        "hangwatch_spark_task_running_seconds",
        "How long the longest-running task of this executor has run (seen by the sidecar)",
    )
    stragglers = GaugeMetricFamily(
        "hangwatch_spark_straggler_tasks",
        "Tasks of this executor far past their stage's finished tasks and the stall threshold",
    )
    threads = GaugeMetricFamily(
        "hangwatch_spark_producer_threads",
        "Kafka producer threads in the executor's JVM, by what they do",
        labels=["activity"],
    )
    reads = CounterMetricFamily("hangwatch_spark_reads", "Reads of the driver's REST API")
    errors = CounterMetricFamily(
        "hangwatch_spark_read_errors", "Failed reads of the driver's REST API, by kind",
        labels=["reason"],
    )  # fmt: skip
    duration = GaugeMetricFamily(
        "hangwatch_spark_read_duration_seconds", "Wall time of the last read of the driver"
    )
    view = state.spark
    if state.spark_ui is not None and view is not None:
        up.add_metric([], 1.0 if view.available else 0.0)
        if view.available:
            running = len(view.tasks) or (view.counts.active_tasks if view.counts else 0)
            tasks.add_metric([], running)
            longest.add_metric([], view.task_running_seconds or 0.0)
            stragglers.add_metric([], len(view.stragglers))
            for activity in Activity:
                count = sum(1 for o in view.threads if o.thread.activity is activity)
                threads.add_metric([str(activity)], count)
        reads.add_metric([], state.spark_reads.reads)
        for reason, n in state.spark_reads.errors:
            errors.add_metric([reason], n)
        duration.add_metric([], state.spark_reads.last_read_seconds)
    yield from (up, tasks, longest, stragglers, threads, reads, errors, duration)


def _sockets(state: SidecarState) -> Iterator[Metric]:
    up = GaugeMetricFamily(
        "hangwatch_socket_view_up",
        "1 when the pod's own TCP connections could be read this round (sock_diag netlink)",
    )
    view = state.sockets
    up.add_metric([], 1.0 if view is not None and view.available else 0.0)
    yield up
    connections = GaugeMetricFamily(
        "hangwatch_socket_connections",
        "The pod's own connections to brokers, by what they show",
        labels=["pattern"],
    )
    for pattern in Pattern:
        found = view.by_pattern(pattern) if view is not None else ()
        connections.add_metric([str(pattern)], len(found))
    yield connections
    yield _counts(
        "hangwatch_probe_connections",
        "New connections the sidecar's probes opened, by broker",
        "broker",
        state.probe_counts.connects,
    )
    yield _counts(
        "hangwatch_probe_requests",
        "ApiVersions requests the sidecar's probes sent, by broker",
        "broker",
        state.probe_counts.requests,
    )
    yield CounterMetricFamily(
        "hangwatch_metadata_requests",
        "Metadata fetches of the sidecar's metadata client",
        value=state.probe_counts.metadata_requests,
    )


def _stacks(state: SidecarState) -> Iterator[Metric]:
    if not state.python_stacks:
        return
    samples = CounterMetricFamily(
        "hangwatch_python_stack_samples",
        "Samples of the executor's Python stacks (taken only while the pod is silent)",
        value=state.stack_samples,
    )
    threads = GaugeMetricFamily(
        "hangwatch_python_threads",
        "Threads of the executor's Python processes in the last sample, by place",
        labels=["place"],
    )
    held = state.stacks
    for place in Place:
        count = sum(1 for h in held.threads if h.place.place is place) if held else 0
        threads.add_metric([str(place)], count)
    yield from (samples, threads)


def _sidecar(state: SidecarState) -> Iterator[Metric]:
    yield CounterMetricFamily(
        "hangwatch_sidecar_rounds", "Evaluation rounds completed", value=state.rounds
    )
    yield GaugeMetricFamily(
        "hangwatch_sidecar_round_duration_seconds",
        "Wall time of the last evaluation round",
        value=state.round_seconds,
    )
    yield GaugeMetricFamily(
        "hangwatch_sidecar_last_round_timestamp_seconds",
        "When the last evaluation round finished (Unix time)",
        value=state.evaluated_ts or 0.0,
    )


def registry_for(get_state: Callable[[], SidecarState]) -> CollectorRegistry:
    """A registry holding only the sidecar's collector (plus process metrics)."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(StateCollector(get_state))
    ProcessCollector(namespace="hangwatch_sidecar", registry=registry)
    return registry
