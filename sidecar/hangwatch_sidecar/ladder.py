"""The evidence ladder: what turns silence into a restart, or clears it (pure).

Silence - every connection of the pod to brokers idle past the stall threshold while
Spark runs one of this executor's tasks - is what a stuck producer looks like from the
kernel, and also what a healthy task that computes, reads slow input or waits between
writes looks like. It alone is `producer_silent` (alert only by default). Every producer
kind climbs the same rungs; the first that has something to say decides:

1. the socket view (any client): a request unanswered on a live connection is stuck
   (decided before the ladder); it cannot see why a client sends nothing;
2. an in-process view. Python stacks (py-spy): a thread inside a delivery callback the
   client called for the heartbeat threshold, or inside `flush` in two samples while
   silent, is stuck; no thread of the executor's Python processes in a client's
   callback or `flush` clears (a poll loop idling in `poll` is normal). The JVM's
   thread dump (Spark's driver): the I/O thread in a user callback
   (judged by `spark.judge`), a task thread waiting in `flush` or for buffer memory for
   the stall threshold while silent, is stuck when the producer's I/O thread is gone;
   while that thread is in its own loop the wait is what a broker's quota throttle looks
   like too (`spark.judge.io_thread_in_its_loop`): `producer_silent`, alert only; a JVM
   producer whose threads are all in their own loop clears;
3. the telemetry (the wrapper's, or the Java client's reporter): the wrapper's messages
   pending with no delivery, or its heartbeat stopped while the process lives, is stuck
   (decided before the ladder; the Java reporter's counters never are); nothing pending
   with a fresh heartbeat clears (the Java reporter's only once it counts the client's
   sends as its interceptor), and so does a broker's quota throttling a producer within
   its throttle time plus the stall threshold;
4. nothing said either: silence alone -> `producer_silent`.

docs/evidence-ladder.md has the table: what each source proves and what it cannot see.
`weigh_silence` applies rungs 2-4 to one silence finding; rungs 1 and 3's positive
evidence already gave `producer_hung` on their own.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from hangwatch.contracts import Verdict
from hangwatch_sidecar.evidence import ProducerObservation
from hangwatch_sidecar.pystacks.judge import StackFinding
from hangwatch_sidecar.spark.judge import THROTTLE_EXPLAINS, io_thread_in_its_loop
from hangwatch_sidecar.spark.types import Activity, SparkView

STUCK_JVM_WAITS = frozenset({Activity.FLUSHING, Activity.AWAITING_BUFFER})
"""JVM waits that are corroborating on their own (a busy producer flushes and waits for
buffer) but stuck when every connection of the pod is silent meanwhile."""


@dataclass(frozen=True)
class SilenceWeighed:
    """What the ladder made of silence: a verdict (None: cleared) and why."""

    verdict: Verdict | None
    reasons: tuple[str, ...] = ()
    threads: tuple[str, ...] = ()


def _telemetry_idle(producers: Sequence[ProducerObservation], heartbeat: float) -> str | None:
    usable = [p for p in producers if p.problem is None and p.alive is not False]
    if not usable or not all(p.counts_pending for p in usable):
        return None
    if all(p.pending == 0 and p.heartbeat_age_seconds <= heartbeat for p in usable):
        return (
            f"telemetry: {len(usable)} wrapped producer(s) with nothing pending and a live poll "
            "loop: the task is busy elsewhere, its producer has nothing to send"
        )
    return None


def _telemetry_throttled(producers: Sequence[ProducerObservation], stall: float) -> str | None:
    """A broker's quota throttling one of the pod's producers explains the silence: the
    Java client mutes a throttled broker's connection for the throttle time it is given
    (librdkafka waits for the delayed answer instead), so a throttled producer sends
    nothing; a restart meets the same quota."""
    throttled = [p for p in producers if p.problem is None and p.throttled(stall)]
    if not throttled:
        return None
    names = ", ".join(
        f"{p.key} ({p.throttle_seconds:.1f} s, {p.throttle_age_seconds or 0.0:.0f} s ago)"
        for p in throttled[:5]
    )
    return (
        f"telemetry: a broker's quota throttles producer(s) {names}: the producer waits "
        "out its throttle time, slow, not stuck"
    )


def _jvm(
    spark: SparkView | None, stall: float
) -> tuple[list[str], list[str], str | None, list[str]]:
    """(stuck reasons, their threads, a clearing reason, reasons of a wait that a quota's
    throttle explains as well as a fault) from the JVM's producer threads."""
    if spark is None or not spark.producer_visible:
        return [], [], None, []
    # (The I/O thread inside a user callback is judged by `spark.judge` on its own.)
    held = [
        t for t in spark.threads if t.thread.activity in STUCK_JVM_WAITS and t.held_seconds >= stall
    ]
    reasons = [
        f"{spark.label}: thread '{t.thread.name}' {t.thread.activity} for "
        f"{t.held_seconds:.0f} s in {t.thread.frame} while every connection of the pod is "
        "silent"
        for t in held
    ]
    if held and io_thread_in_its_loop(spark):
        return [], [], None, [*reasons, THROTTLE_EXPLAINS]
    if held:
        return reasons, [t.thread.name for t in held], None, []
    if all(t.thread.activity is Activity.SENDING for t in spark.threads):
        return (
            [],
            [],
            (
                f"{spark.label}: the JVM producer's threads are in their own loop and no task "
                "thread waits inside it: the task is busy elsewhere"
            ),
            [],
        )
    return [], [], None, []


def weigh_silence(
    silence: str,
    *,
    producers: Sequence[ProducerObservation],
    stacks: Sequence[StackFinding],
    spark: SparkView | None,
    stall_seconds: float,
    heartbeat_seconds: float,
) -> SilenceWeighed:
    """Rungs 2-4 for one silence finding (`silence`: its reason)."""
    hung = [f for f in stacks if f.verdict is Verdict.PRODUCER_HUNG]
    if hung:
        return SilenceWeighed(
            Verdict.PRODUCER_HUNG,
            (*(f.reason for f in hung), f"socket view: {silence}"),
            tuple(t for f in hung for t in f.threads),
        )
    jvm_stuck, jvm_threads, jvm_clear, jvm_waits = _jvm(spark, stall_seconds)
    if jvm_stuck:
        return SilenceWeighed(
            Verdict.PRODUCER_HUNG, (*jvm_stuck, f"socket view: {silence}"), tuple(jvm_threads)
        )
    clearing = [f.reason for f in stacks if f.clears_silence]
    if idle := _telemetry_idle(producers, heartbeat_seconds):
        clearing.append(idle)
    if quota := _telemetry_throttled(producers, stall_seconds):
        clearing.append(quota)
    if jvm_clear:
        clearing.append(jvm_clear)
    if clearing:
        return SilenceWeighed(None, tuple(clearing))
    if jvm_waits:
        return SilenceWeighed(Verdict.PRODUCER_SILENT, (f"socket view: {silence}", *jvm_waits))
    return SilenceWeighed(
        Verdict.PRODUCER_SILENT,
        (
            f"socket view: {silence}",
            "no evidence that the producer is stuck (no unanswered request, no thread "
            "inside the client) nor that the task is busy elsewhere: alert only",
        ),
    )
