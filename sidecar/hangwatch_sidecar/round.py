"""What the rules judge: one round's evidence (`RoundEvidence`), and the `Round` every
pod-level rule receives (pure).

`RoundEvidence` is what the sidecar's loop observed: the cluster as probed, each
producer's telemetry, the socket view, Spark's view, the Python stacks. `Round` adds the
thresholds and the time, and derives once, on first use, what several rules share: the
brokers' evidence, whether the cluster is healthy from this pod, each producer's own
assessment (the telemetry's rules, `telemetry.judge`), and each view's findings (its
judge's: `sockets.judge`, `spark.judge`, `pystacks.judge`, and the evidence ladder's
weighing of silence, `ladder`). A rule reads what it needs; nothing is computed that no
rule asked for.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any, NamedTuple

from hangwatch.contracts import Verdict
from hangwatch_sidecar.assessment import MAX_CONNECTIONS_SHOWN, Assessment, Thresholds
from hangwatch_sidecar.evidence import ClusterObservation, ProducerObservation
from hangwatch_sidecar.ladder import SilenceWeighed, weigh_silence
from hangwatch_sidecar.pystacks.judge import HeldView, StackFinding, judge_stacks
from hangwatch_sidecar.sockets.judge import SocketFinding, judge_sockets
from hangwatch_sidecar.sockets.types import SocketObservation
from hangwatch_sidecar.spark.judge import SparkFinding, judge_spark
from hangwatch_sidecar.spark.types import SparkView
from hangwatch_sidecar.telemetry.judge import ProducerJudge, ProducerRound, judge_producer


@dataclass(frozen=True)
class RefusalSeen:
    """The last round the cluster was seen refusing writes to the pod's partitions (the
    `partitions_unwritable` rule's own finding, not its grace): when, and what it said."""

    at: float
    """The loop's clock."""
    reasons: tuple[str, ...]
    topics: tuple[dict[str, Any], ...]
    """Its `unwritable_topics` evidence."""


@dataclass(frozen=True)
class RoundEvidence:
    """Everything one round observed: what the rules judge."""

    cluster: ClusterObservation | None
    """None until a probe round has completed."""
    producers: Sequence[ProducerObservation] = ()
    """The wrapper's telemetry, one per producer."""
    leaderless_since: float | None = None
    """When leaderless partitions were first seen."""
    topics: frozenset[str] = frozenset()
    """The topics the sidecar was told the pod writes (besides the producers' own)."""
    sockets: SocketObservation | None = None
    """This round's view of the pod's own connections to brokers (None: not read)."""
    spark: SparkView | None = None
    """Spark's view of this executor this round (None: the Spark view is off)."""
    spark_task_running: bool | None = None
    """True: one of this executor's tasks runs; False: none; None: unknown. Combined with
    the socket view's silence; by default it comes from `spark`."""
    stacks: HeldView | None = None
    """The newest sample of the executor's Python stacks (None: not sampled)."""
    refusal: RefusalSeen | None = None
    """When the cluster was last seen refusing writes to the pod's partitions (None:
    never, as far as the loop remembers)."""

    @property
    def task_running(self) -> bool | None:
        if self.spark_task_running is None and self.spark is not None:
            return self.spark.task_running  # None while the view is unavailable
        return self.spark_task_running


class Findings(NamedTuple):
    """Each view's findings of one round (`Round.findings`)."""

    sockets: tuple[SocketFinding, ...]
    """The socket view's, without the silence finding."""
    spark: tuple[SparkFinding, ...]
    stacks: tuple[StackFinding, ...]
    silence: SocketFinding | None
    """The socket view's every-connection silence, if it found one."""
    weighed: SilenceWeighed | None
    """What the evidence ladder made of that silence."""


class NoProbeRound(LookupError):
    """A rule read `Round.cluster` before any probe round completed: it must come after
    the `no_probe_round` rule in the table."""


@dataclass(frozen=True)
class Round:
    """What a pod-level rule receives: the round's evidence, the thresholds, the time,
    and what several rules share, derived once on first use."""

    evidence: RoundEvidence
    thresholds: Thresholds
    now: float
    producer_rules: tuple[ProducerJudge, ...] = ()
    """The telemetry's rules, in the table's order (`producers` applies them)."""

    @property
    def cluster(self) -> ClusterObservation:
        """The cluster as this round probed it (`NoProbeRound` before the first round)."""
        if self.evidence.cluster is None:
            raise NoProbeRound("no probe round has completed: judge `no_probe_round` first")
        return self.evidence.cluster

    @cached_property
    def brokers(self) -> dict[str, Any]:
        """Each broker address as probed: the `brokers` evidence of most verdicts."""
        return {
            b.address: {
                "reachability": str(b.reachability),
                "node_id": b.node_id,
                "in_bootstrap": b.in_bootstrap,
                "advertised": b.advertised,
                "latency_ms": b.latency_ms,
            }
            for b in self.cluster.brokers
        }

    @cached_property
    def cluster_healthy(self) -> bool:
        """Every broker the cluster advertises answers, and metadata came. Dead bootstrap
        entries the cluster does not advertise (S1) are a configuration smell, not a
        cluster problem: producers are judged by the brokers that are members."""
        members_failing = [b for b in self.cluster.failing if b.advertised]
        return not members_failing and self.cluster.metadata_ok

    @cached_property
    def producers(self) -> dict[str, Assessment]:
        """Each producer's own assessment (the telemetry's rules); none before the first
        probe round (they judge against the cluster)."""
        cluster = self.evidence.cluster
        if cluster is None:
            return {}
        return {
            p.key: judge_producer(
                ProducerRound(p, cluster, self.thresholds, self.cluster_healthy),
                self.producer_rules,
            )
            for p in self.evidence.producers
        }

    @cached_property
    def findings(self) -> Findings:
        """Each view's findings, the silence finding (taken out of the socket findings)
        and what the evidence ladder made of it."""
        sockets = self._socket_findings()
        stacks = self._stack_findings()
        silence = next((f for f in sockets if f.verdict is Verdict.PRODUCER_SILENT), None)
        t, evidence = self.thresholds, self.evidence
        weighed = None
        if silence is not None:
            weighed = weigh_silence(
                silence.reason,
                producers=evidence.producers,
                stacks=stacks,
                spark=evidence.spark,
                stall_seconds=t.stall_seconds,
                heartbeat_seconds=t.heartbeat_seconds,
            )
        spark = judge_spark(
            evidence.spark,
            stall_seconds=t.stall_seconds,
            heartbeat_seconds=t.heartbeat_seconds,
            cluster_healthy=self.cluster_healthy,
            absent_topics=tuple(self.cluster.absent_for(evidence.topics)),
        )
        others = tuple(f for f in sockets if f is not silence)
        return Findings(others, spark, stacks, silence, weighed)

    def _socket_findings(self) -> tuple[SocketFinding, ...]:
        t, producers = self.thresholds, self.evidence.producers
        return judge_sockets(
            self.evidence.sockets,
            stall_seconds=t.stall_seconds,
            request_timeout_seconds=t.producer_request_timeout_seconds,
            cluster_healthy=self.cluster_healthy,
            spark_task_running=self.evidence.task_running,
            failing_brokers=frozenset(b.address for b in self.cluster.failing),
            write_interval_seconds=t.expected_write_interval_seconds,
            throttle_seconds=max(
                (p.throttle_seconds for p in producers if p.throttled(t.stall_seconds)),
                default=None,
            ),
        )

    def _stack_findings(self) -> tuple[StackFinding, ...]:
        sockets = self.evidence.sockets
        return judge_stacks(
            self.evidence.stacks,
            heartbeat_seconds=self.thresholds.heartbeat_seconds,
            stall_seconds=self.thresholds.stall_seconds,
            silent_seconds=sockets.silent_seconds if sockets and sockets.available else None,
            cluster_healthy=self.cluster_healthy,
        )

    def with_sockets(self, evidence: dict[str, Any]) -> dict[str, Any]:
        """`evidence` with the socket view's summary, when it was read."""
        if self.evidence.sockets is not None:
            evidence["sockets"] = self.evidence.sockets.summary(MAX_CONNECTIONS_SHOWN)
        return evidence

    @property
    def spark_label(self) -> str:
        """How reasons name Spark's view of this executor."""
        spark = self.evidence.spark
        return spark.label if spark is not None else "spark view"
