"""The sidecar's evaluation loop: probe, read telemetry, evaluate, publish.

Every round (probe interval, jittered +-20% so sidecars started together spread
out): read the pod's own TCP connections to brokers (the socket view), plan each
broker's probe passive-first (`probing`: none for a broker that just answered the
pod's own connection, an ApiVersions request on the kept probe connection otherwise, a
new connection only at the slow fresh-connect cadence or on doubt), probe concurrently,
fetch cluster metadata through one kept metadata client when it is due (metadata
interval) or at once when anything looks wrong (a broker failing, a partition
leaderless, a producer's leaders newly disagreeing with ours), read the telemetry
directory, take the newest Spark view (read in the background every Spark interval by
`spark.watch`; a round never waits for the driver), run the pure verdict engine,
debounce, and publish a new immutable `SidecarState`. Steady-state cost per sidecar
and broker: no new connection between fresh-connect intervals, at most one ApiVersions
request per probe interval (none while the producer's own connection answers), one
Metadata request per metadata interval (and one per new leader disagreement); and one
thread dump request to the Spark driver per Spark interval.
"""

from __future__ import annotations

import logging
import os
import random
import ssl
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import asdict, replace

from hangwatch.contracts import Reachability, Verdict
from hangwatch.logs import IDENTITY_ENV
from hangwatch.wire.status import UNWRITABLE_TOPICS
from hangwatch_producer.secrets import redact
from hangwatch_sidecar import budget
from hangwatch_sidecar.assessment import Assessment, PodAssessment, Thresholds
from hangwatch_sidecar.evidence import ClusterObservation, ProducerObservation
from hangwatch_sidecar.hysteresis import Debouncer
from hangwatch_sidecar.metadata_keeper import MetadataKeeper
from hangwatch_sidecar.observing import endpoints_to_probe, observe_cluster
from hangwatch_sidecar.pod_rules import GRACE_KEY
from hangwatch_sidecar.probe.settings import Endpoint, ProbeSettings, parse_bootstrap
from hangwatch_sidecar.probe.tls import tls_context
from hangwatch_sidecar.probe.types import EndpointProbe
from hangwatch_sidecar.prober import BrokerProber
from hangwatch_sidecar.producer_reader import ProducerReader
from hangwatch_sidecar.pystacks.judge import HeldView
from hangwatch_sidecar.pystacks.reader import MAX_PROCESSES, StackReader
from hangwatch_sidecar.pystacks.watch import StackWatch
from hangwatch_sidecar.releases.advise import Advisory, advise
from hangwatch_sidecar.releases.processes import ProcessReleases
from hangwatch_sidecar.releases.read import Sighting, java_classpath
from hangwatch_sidecar.round import RefusalSeen, RoundEvidence
from hangwatch_sidecar.rules import evaluate
from hangwatch_sidecar.settings import SidecarSettings
from hangwatch_sidecar.sockets.types import SocketObservation
from hangwatch_sidecar.spark.attach import SOURCE, LocalReader
from hangwatch_sidecar.spark.client import DriverClient, DriverReader
from hangwatch_sidecar.spark.tracking import SparkTracker
from hangwatch_sidecar.spark.types import ReadStats, SparkView
from hangwatch_sidecar.spark.watch import SparkWatch
from hangwatch_sidecar.state import SidecarState, not_judged

log = logging.getLogger(__name__)
JITTER = 0.2
SPARK_CLASSPATH = "Spark's classpath (the driver's /environment)"
RELEASE_SURVEY_SECONDS = 60.0
"""How often the processes holding the pod's connections are surveyed for their client
releases (each process is read once)."""


class SidecarLoop:
    """Owns the probing, tracking and debouncing state of one sidecar."""

    def __init__(
        self,
        settings: SidecarSettings,
        identity: dict[str, str] | None = None,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
    ) -> None:
        self.settings = settings
        self.clock, self.wall = clock, wall
        self.bootstrap: tuple[Endpoint, ...] = parse_bootstrap(settings.bootstrap)
        self.probe_settings = ProbeSettings(
            connect_timeout_ms=settings.connect_timeout_ms,
            request_timeout_ms=settings.request_timeout_ms,
            client_config=dict(settings.kafka),
            client_id="hangwatch-sidecar",
        )
        self.tls: ssl.SSLContext | None = tls_context(self.probe_settings)
        self.thresholds = Thresholds(
            stall_seconds=settings.stall_seconds,
            heartbeat_seconds=settings.heartbeat_seconds,
            metadata_max_age_seconds=settings.metadata_max_age_seconds,
            election_grace_seconds=settings.election_grace_seconds,
            producer_request_timeout_seconds=settings.producer_request_timeout_seconds,
            expected_write_interval_seconds=settings.expected_write_interval_seconds or None,
        )
        self.debouncer = Debouncer(hold=settings.hysteresis_intervals)
        self.producers = ProducerReader(settings, wall)
        self.metadata = MetadataKeeper(
            self.bootstrap,
            self.probe_settings,
            settings.topic_set,
            interval_seconds=settings.metadata_interval_seconds,
            stall_seconds=settings.stall_seconds,
            new_client_each_fetch=settings.probe_mode == "fresh",
            wall=wall,
        )
        self.leaderless_since: float | None = None
        self.refusal: RefusalSeen | None = None
        """When the cluster was last seen refusing the pod's writes (`_remember_refusal`)."""
        self.probe_errors: Counter[str] = Counter()
        self.verdict_changes: Counter[str] = Counter()
        self._pool = ThreadPoolExecutor(max_workers=16, thread_name_prefix="hangwatch-probe")
        self.prober = BrokerProber(settings, self.probe_settings, self.tls, self._pool, clock)
        self._lock = threading.Lock()
        self.spark = _spark_watch(settings, self._pool, clock)
        self.local = _local_watch(settings, self._pool, clock)
        self._stack_pool = ThreadPoolExecutor(MAX_PROCESSES, thread_name_prefix="hangwatch-stacks")
        self.stacks = (
            StackWatch(
                StackReader(
                    settings.socket_process_root,
                    self._stack_pool,
                    settings.python_stacks_timeout_ms / 1000.0,
                    clock,
                ),
                settings.stall_seconds,
            )
            if settings.python_stacks and self.spark is not None
            else None
        )
        self.releases = (
            ProcessReleases(RELEASE_SURVEY_SECONDS, clock) if settings.client_releases else None
        )
        self._advised: set[str] = set()
        self._state = SidecarState(
            started_ts=wall(),
            identity=identity or _identity_from_env(),
            settings=redact({k: v for k, v in asdict(settings).items() if k != "kafka"}),
            spark_ui=settings.spark_ui.url if settings.spark_ui else None,
            local_jvm_dumps=self.local is not None,
            not_judged=not_judged(settings.not_judged),
        )

    # -- published state ---------------------------------------------------------------------
    def state(self) -> SidecarState:
        with self._lock:
            return self._state

    def _publish(self, state: SidecarState) -> None:
        with self._lock:
            self._state = state

    # -- one round -----------------------------------------------------------------------------
    def round(self) -> SidecarState:
        """One full evaluation round; returns (and publishes) the new state."""
        started = self.clock()
        previous = self.state()
        written = self.settings.topic_set.union(*(p.topics for p in previous.producers))
        fetching, sampling = self._start_reads(started, previous, written)
        probes, passive, view = self.prober.probe(
            endpoints_to_probe(self.bootstrap, self.metadata.metadata), started
        )
        if fetching is not None:
            fetching.result()
        now = self.clock()
        cluster = self._cluster(now, probes, passive, written)
        producers = self.producers.with_disagreement(cluster, self.producers.read(now), now)
        spark = self._thread_view()
        stacks: HeldView | None = sampling.result() if sampling is not None else None
        evidence = RoundEvidence(
            cluster,
            producers,
            leaderless_since=self.leaderless_since,
            topics=self.settings.topic_set,
            sockets=view,
            spark=spark,
            stacks=stacks,
            refusal=self.refusal,
        )
        assessment = evaluate(evidence, thresholds=self.thresholds, now=now)
        advisories = self._advisories(producers, view)
        self._remember_refusal(assessment.pod, now)
        wall_now = self.wall()
        self._debounce(assessment, wall_now)
        state = replace(
            previous,
            verdict=self.debouncer.current,
            since_ts=self.debouncer.since,
            assessment=assessment,
            cluster=cluster,
            cluster_ts=wall_now,
            metadata_ts=self.metadata.fetched_ts,
            producers=tuple(producers),
            rounds=previous.rounds + 1,
            evaluated_ts=wall_now,
            round_seconds=self.clock() - started,
            probe_errors=dict(self.probe_errors),
            verdict_changes=dict(self.verdict_changes),
            telemetry_problems=dict(self.producers.telemetry_problems),
            sockets=view,
            probe_counts=self.prober.counts(self.metadata.requests, self.metadata.clients),
            time_to_error=budget.time_to_error(
                self.producers.configs, self.settings.time_to_error_budget_seconds
            ),
            spark=spark,
            spark_reads=self._reads(spark, previous),
            python_stacks=self.stacks is not None,
            stacks=stacks,
            stack_samples=self.stacks.samples if self.stacks else 0,
            failure_budget=self.spark.budget if self.spark else previous.failure_budget,
            advisories=advisories,
        )
        self._publish(state)
        return state

    def _advisories(
        self, producers: Sequence[ProducerObservation], view: SocketObservation | None
    ) -> tuple[Advisory, ...]:
        """The published hangs of the client releases seen this round (each logged once)."""
        if self.releases is None:
            return ()
        sightings = [
            Sighting(p.client_release[0], p.client_release[1], f"telemetry of producer {p.key}")
            for p in producers
            if p.client_release is not None
        ]
        if view is not None and view.available:
            inodes = {c.inode for c in view.connections if c.inode}
            sightings += self.releases.sightings(inodes)
        if self.spark is not None:
            sightings += java_classpath(self.spark.classpath, SPARK_CLASSPATH)
        found = advise(sightings)
        for advisory in found:
            key = f"{advisory.client} {advisory.version} {advisory.hang.id}"
            if key not in self._advised:
                self._advised.add(key)
                log.warning("known-bad client release", extra={"advisory": advisory.line})
        return found

    def _remember_refusal(self, pod: Assessment, now: float) -> None:
        """Keep when the cluster was last seen refusing the pod's writes (the rule's own
        finding, not its grace after one): the next rounds' `RoundEvidence.refusal`."""
        if pod.verdict is Verdict.PARTITIONS_UNWRITABLE and GRACE_KEY not in pod.evidence:
            topics = tuple(pod.evidence.get(UNWRITABLE_TOPICS) or ())
            self.refusal = RefusalSeen(now, pod.reasons, topics)

    def _start_reads(
        self, started: float, previous: SidecarState, written: frozenset[str]
    ) -> tuple[Future[None] | None, Future[HeldView] | None]:
        """The round's metadata fetch (and the `written` topics' configs), when due, and
        its sample of the Python stacks, when due, started in the background while the
        brokers are probed."""
        doubt = previous.cluster is not None and bool(previous.cluster.failing)
        fetching = (
            self._pool.submit(self.metadata.fetch, started, doubt, written)
            if self.metadata.due(
                started,
                previous.cluster,
                previous.producers,
                self.producers.disagreeing_since.values(),
            )
            else None
        )
        sampling = None
        if self.stacks is not None:
            running = previous.spark.task_running if previous.spark is not None else None
            if self.stacks.due(running, previous.sockets):
                sampling = self._pool.submit(self.stacks.sample)
            else:
                self.stacks.skip()
        return fetching, sampling

    def _cluster(
        self,
        now: float,
        probes: list[EndpointProbe],
        passive: dict[str, str],
        written: frozenset[str],
    ) -> ClusterObservation:
        """The cluster as this round's probes and metadata saw it (each broker the pod's
        own connections vouched for with what they said; the `written` topics'
        partitions and configs), counting the probe errors and when partitions were first
        seen without a leader."""
        for p in probes:
            if p.reachability is not Reachability.OK:
                self.probe_errors[str(p.reachability)] += 1
        cluster = observe_cluster(
            now,
            self.bootstrap,
            probes,
            self.metadata.metadata,
            self.metadata.error,
            self.metadata.known_nodes,
            all_topics=not self.settings.topic_set,
            metadata_age_seconds=self.metadata.age_seconds(now),
            written=written,
            min_insync=self.metadata.min_insync,
        )
        cluster = replace(
            cluster,
            brokers=tuple(
                replace(b, detail=passive[b.address]) if b.address in passive else b
                for b in cluster.brokers
            ),
        )
        if cluster.leaderless_for(frozenset()):
            self.leaderless_since = self.leaderless_since or now
        else:
            self.leaderless_since = None
        return cluster

    def _debounce(self, assessment: PodAssessment, wall_now: float) -> None:
        """Feed the round's pod verdict to the debouncer; log and count a change."""
        if self.debouncer.update(assessment.pod.verdict, wall_now, held=assessment.pod.held):
            self.verdict_changes[str(self.debouncer.current)] += 1
            log.info(
                "verdict changed",
                extra={
                    "verdict": str(self.debouncer.current),
                    "reasons": list(assessment.pod.reasons),
                },
            )

    def _thread_view(self) -> SparkView | None:
        """The driver's view; the local JVM's thread dump when the driver's is off or
        unavailable (and the local source is on). A local dump is taken only then."""
        spark = self.spark.poll() if self.spark else None
        if self.local is None or (spark is not None and spark.available):
            return spark
        local = self.local.poll()
        if local.available or spark is None:
            return local
        return replace(spark, error=f"{spark.error}; {local.label}: {local.error}")

    def _reads(self, view: SparkView | None, previous: SidecarState) -> ReadStats:
        """The read statistics of the source the view came from."""
        watch = self.local if view is not None and view.source == SOURCE else self.spark
        return watch.stats if watch is not None else previous.spark_reads

    def run(self, stop: threading.Event, done: Callable[[], bool] = lambda: False) -> None:
        """Rounds until `stop` is set or `done()`, one every (jittered) probe interval.

        Rounds start on a cadence (start to start), so a slow round (blackholed brokers)
        does not stretch detection: the next one starts at once when it is overdue.
        """
        next_start = self.clock()
        while not stop.is_set() and not done():
            try:
                self.round()
            except Exception:
                log.exception("evaluation round failed")
            interval = self.settings.probe_interval_seconds
            next_start = max(
                next_start + interval * random.uniform(1 - JITTER, 1 + JITTER), self.clock()
            )
            stop.wait(next_start - self.clock())

    def close(self) -> None:
        for watch in (self.spark, self.local):
            if watch is not None:
                watch.close()
        self._pool.shutdown(wait=False, cancel_futures=True)
        self._stack_pool.shutdown(wait=False, cancel_futures=True)
        self.metadata.close()
        self.prober.close()


def _spark_watch(
    settings: SidecarSettings, pool: ThreadPoolExecutor, clock: Callable[[], float]
) -> SparkWatch | None:
    """The Spark view's reader, when the settings say where the driver is."""
    ui = settings.spark_ui
    if ui is None:
        return None
    timeout = settings.spark_timeout_ms / 1000.0
    reader = DriverReader(
        DriverClient(ui, timeout), settings.application_id, settings.executor_id, clock
    )
    tracker = SparkTracker(settings.stall_seconds, settings.executor_id)
    # A view stays evidence for two reads and the longest a read may take (three requests).
    max_age = 2 * settings.spark_interval_seconds + 3 * timeout
    return SparkWatch(reader, tracker, pool, settings.spark_interval_seconds, max_age, clock)


def _local_watch(
    settings: SidecarSettings, pool: ThreadPoolExecutor, clock: Callable[[], float]
) -> SparkWatch | None:
    """The local JVM's thread dumps (attach mechanism), when switched on."""
    if not settings.jvm_thread_dumps:
        return None
    timeout = settings.spark_timeout_ms / 1000.0
    reader = LocalReader(settings.socket_process_root, timeout, clock)
    tracker = SparkTracker(settings.stall_seconds, settings.executor_id)
    max_age = 2 * settings.spark_interval_seconds + timeout
    return SparkWatch(reader, tracker, pool, settings.spark_interval_seconds, max_age, clock)


def _identity_from_env() -> dict[str, str]:
    return {k: v for k, env in IDENTITY_ENV.items() if (v := os.environ.get(env))}
