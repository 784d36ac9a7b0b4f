"""What Spark's view of this executor means for the pod's verdict: findings (pure).

Fed by the rules (`round.Round`) with the round's `SparkView`, the stall and heartbeat
thresholds and whether the cluster is healthy from this pod (every member broker
answers, metadata came, no partition is leaderless). Each finding names the thread or
task it rests on; `verdict` None marks corroborating evidence that never decides alone.

- the producer's I/O thread inside user code for the heartbeat threshold (a delivery
  callback or interceptor that blocks it, S4) -> `producer_hung`;
- a thread waiting for topic metadata for the stall threshold -> `metadata_stale`
  (S1, S3: the producer's view of the cluster is wrong while the cluster answers), once
  the driver says this executor has finished a task (`had_a_view`); before that the
  producer may never have had a view to be wrong (its first metadata fetch, slow under
  load or held by a refused login), a new executor's producer would start from the
  same place, and the wait only corroborates;
- a thread waiting for one send's result for the stall threshold -> `producer_hung` (S2);
- a thread in `flush` or waiting for buffer memory for the stall threshold ->
  `producer_hung` only when its task is also a straggler (a busy producer flushes and
  waits for buffer too) and the producer's I/O thread is not in its own loop (then a
  quota's throttle explains the wait as well as a fault: `io_thread_in_its_loop`);
  otherwise corroborating;
- a failed task attempt of this executor whose exception `hangwatch.kafka_errors`
  classifies as a refusal the next client meets again (RecordTooLargeException,
  TopicAuthorizationException, SaslAuthenticationException...), failed within
  `REFUSAL_WINDOW_SECONDS` -> `writes_rejected` (Spark's Kafka sink and plain JVM or
  Python producers alike: the task's own exception is the evidence), whatever the
  cluster's health;
- a straggler task, other failed task attempts -> corroborating only.

With some broker failing none of these is judged a producer fault (the probes'
`broker_degraded` decides); they are kept as corroborating evidence.
"""

from __future__ import annotations

from dataclasses import dataclass

from hangwatch import kafka_errors
from hangwatch.contracts import Verdict
from hangwatch_sidecar.spark.types import (
    Activity,
    FailedAttempt,
    RunningTask,
    SparkView,
    ThreadObservation,
    ThreadRole,
)

REFUSAL_WINDOW_SECONDS = 120.0
"""A failed attempt refused by the cluster counts this long after it failed: Spark retries
a task within seconds and then fails the job, so the verdict must outlive the attempts
long enough for a scrape and an operator round to see it."""


@dataclass(frozen=True)
class SparkFinding:
    """One conclusion from the Spark view; `verdict` None: corroborating evidence only."""

    verdict: Verdict | None
    reason: str
    threads: tuple[str, ...] = ()
    tasks: tuple[int, ...] = ()


_WAITS = {
    Activity.AWAITING_METADATA: "for topic metadata",
    Activity.AWAITING_RESULT: "for a send's result",
    Activity.FLUSHING: "in flush for every queued record",
    Activity.AWAITING_BUFFER: "for buffer memory (the producer's buffer is full)",
}
_UNHEALTHY = ", while some brokers fail: not judged a producer fault"


THROTTLE_EXPLAINS = (
    "the producer's I/O thread is in its own loop, and a broker's quota throttling this "
    "producer holds it exactly so (the Java client keeps its throttle times inside the JVM, "
    "where no view of the sidecar reads them): no restart without evidence of a fault"
)
"""Why a JVM task's wait in `flush` or for buffer memory is not a hang on its own."""


def io_thread_in_its_loop(view: SparkView) -> bool:
    """A JVM producer's I/O thread is in its own loop (polling, sending). A task thread
    then waiting in `flush` or for buffer memory while nothing is sent is what a quota's
    throttle looks like (the client mutes the broker's connection for the throttle time
    Kafka gives it, unbounded for a byte-rate quota) as much as a client fault: alert
    only. A dead I/O thread (none left) or one held in user code (S4) stays a hang."""
    return any(
        t.thread.role is ThreadRole.NETWORK and t.thread.activity is Activity.SENDING
        for t in view.threads
    )


def had_a_view(view: SparkView) -> bool:
    """The driver says this executor has finished a task: its producer (Spark keeps one
    per executor and configuration) has most likely had the cluster's metadata, so a
    wait for metadata now can be a view gone wrong. Unknown (a local JVM dump, the
    driver not yet read) counts as no: a late alert is better than a false restart."""
    return view.completed_tasks is not None and view.completed_tasks > 0


FIRST_VIEW = (
    " while every broker answers, but this executor has finished no task yet: its "
    "producer may never have had the cluster's view (a first metadata fetch, slow under "
    "load or held by a refused login), and a new executor's producer would start from the "
    "same place; not judged stale"
)
"""Why a metadata wait before the executor's first finished task is not `metadata_stale`."""


def _who(obs: ThreadObservation, tasks: dict[int, RunningTask]) -> str:
    task = tasks.get(obs.thread.task_id) if obs.thread.task_id is not None else None
    label = f"{task.task.label} " if task else ""
    return f"{label}thread '{obs.thread.name}'"


def _compare(task: RunningTask) -> str:
    peers = task.peers
    if peers is None or peers.median_seconds is None:
        return f"has run {task.running_seconds:.0f} s"
    ratio = task.running_seconds / peers.median_seconds if peers.median_seconds > 0 else 0.0
    times = f"{ratio:.0f}x " if ratio else ""
    return (
        f"has run {task.running_seconds:.0f} s, {times}the median {peers.median_seconds:.1f} s "
        f"of its stage's {peers.complete} finished tasks"
    )


def _callback(obs: ThreadObservation, heartbeat: float, healthy: bool) -> SparkFinding:
    t = obs.thread
    reason = (
        f"producer I/O thread '{t.name}' has been inside user code {t.user_frame} (called "
        f"from {t.frame}) for {obs.held_seconds:.0f} s (threshold {heartbeat:.0f} s), "
        f"{t.state}: {t.detail}; nothing is sent or received while it is there"
    )
    if not healthy:
        return SparkFinding(None, reason + _UNHEALTHY, (t.name,))
    return SparkFinding(Verdict.PRODUCER_HUNG, reason, (t.name,))


@dataclass(frozen=True)
class _Round:
    """What every wait of one view is judged against (`judge_spark`'s inputs, and what
    it reads once from the view)."""

    tasks: dict[int, RunningTask]
    """The running tasks by TID."""
    stall_seconds: float
    cluster_healthy: bool
    absent_topics: tuple[str, ...]
    io_alive: bool
    """`io_thread_in_its_loop`: a throttle explains a straggling flush."""
    viewed: bool
    """`had_a_view`: the driver says this executor has finished a task (rule 5c)."""


def _wait(obs: ThreadObservation, context: _Round) -> SparkFinding:
    t, tasks = obs.thread, context.tasks
    task = tasks.get(t.task_id) if t.task_id is not None else None
    reason = (
        f"{_who(obs, tasks)} has waited {_WAITS[t.activity]} for {obs.held_seconds:.0f} s "
        f"(threshold {context.stall_seconds:.0f} s) in {t.frame}"
    )
    ids = (t.task_id,) if t.task_id is not None else ()
    if not context.cluster_healthy:
        return SparkFinding(None, reason + _UNHEALTHY, (t.name,), ids)
    absent_topics = context.absent_topics
    if t.activity is Activity.AWAITING_METADATA and absent_topics:
        reason += (
            f" while the cluster's metadata does not have topic {', '.join(absent_topics)} "
            "(the pod's, as its policy names them: UNKNOWN_TOPIC_OR_PART): the next producer "
            "waits the same, a restart cannot help"
            + kafka_errors.hint_clause(kafka_errors.by_name("_UNKNOWN_TOPIC"))
        )
        return SparkFinding(Verdict.WRITES_REJECTED, reason, (t.name,), ids)
    if t.activity is Activity.AWAITING_METADATA and not context.viewed:
        return SparkFinding(None, reason + FIRST_VIEW, (t.name,), ids)
    if t.activity is Activity.AWAITING_METADATA:
        reason += (
            " while every broker answers and every partition has a leader: the producer's "
            "view of the cluster is wrong"
        )
        return SparkFinding(Verdict.METADATA_STALE, reason, (t.name,), ids)
    if t.activity is Activity.AWAITING_RESULT:
        reason += " while every broker answers: its request is never answered"
        return SparkFinding(Verdict.PRODUCER_HUNG, reason, (t.name,), ids)
    if task is not None and task.straggler:
        reason += f", and its task {_compare(task)}, while every broker answers"
        if context.io_alive:
            return SparkFinding(None, f"{reason}; {THROTTLE_EXPLAINS}", (t.name,), ids)
        return SparkFinding(Verdict.PRODUCER_HUNG, reason, (t.name,), ids)
    return SparkFinding(None, reason, (t.name,), ids)


def _corroborating(tasks: tuple[RunningTask, ...]) -> list[SparkFinding]:
    found = []
    for task in tasks:
        if task.straggler:
            found.append(
                SparkFinding(
                    None,
                    f"{task.task.label} {_compare(task)} (a straggler)",
                    (),
                    (task.task.task_id,),
                )
            )
        failed = task.peers.failed if task.peers else 0
        if failed or (task.task.attempt or 0) > 0:
            attempt = (
                "" if task.task.attempt is None else f"; this is attempt {task.task.attempt + 1}"
            )
            found.append(
                SparkFinding(
                    None,
                    f"{task.task.label}: its stage has {failed} failed task attempts{attempt}",
                    (),
                    (task.task.task_id,),
                )
            )
    return found


def refused_attempts(view: SparkView) -> list[SparkFinding]:
    """`writes_rejected` findings: this executor's failed attempts whose exception is a
    refusal the next client meets again, while the refusal is current: the newest failed
    attempt of the executor (whatever its error) ended within `REFUSAL_WINDOW_SECONDS`,
    or a later attempt of the same task runs. (The Java client splits a batch the broker
    refuses as too large and retries it until `delivery.timeout.ms`: of the recorded
    run's four attempts one failed with RecordTooLargeException, three with a
    TimeoutException naming the expired batch.)"""
    return [
        SparkFinding(Verdict.WRITES_REJECTED, _refused(attempt, said), (), (attempt.task_id,))
        for attempt, said in current_refusals(view)
        if said.info.restart is kafka_errors.Restart.MEETS_AGAIN
    ]


def partition_refusals(view: SparkView | None) -> list[str]:
    """This executor's current failed attempts (`current_refusals`) whose exception says
    the cluster refuses writes to a partition for its own reason
    (`kafka_errors.PARTITION_REFUSALS`: NotEnoughReplicasException...), as reasons of
    the verdict `partitions_unwritable` (none while the view is unavailable)."""
    if view is None or not view.available:
        return []
    return [
        f"{attempt.label} failed with {said.exception} ({said.info.name}): the cluster "
        "refuses writes to a partition for its own reason, which the next executor meets too"
        for attempt, said in current_refusals(view)
        if kafka_errors.refuses_partition(said.info)
    ]


def current_refusals(
    view: SparkView,
) -> list[tuple[FailedAttempt, kafka_errors.ClassifiedMessage]]:
    """This executor's failed attempts whose exception `kafka_errors` names, while the
    refusal is current: the newest failed attempt of the executor (whatever its error)
    ended within `REFUSAL_WINDOW_SECONDS`, or a later attempt of the same task runs."""
    newest = max((a.seen_at for a in view.failed_attempts), default=None)
    recent = newest is not None and view.at - newest <= REFUSAL_WINDOW_SECONDS
    running = {(t.task.stage_id, t.task.index) for t in view.tasks}
    found = []
    for attempt in view.failed_attempts:
        if not recent and (attempt.stage_id, attempt.index) not in running:
            continue
        said = kafka_errors.classify_message(attempt.error)
        if said is not None:
            found.append((attempt, said))
    return found


def _refused(attempt: FailedAttempt, said: kafka_errors.ClassifiedMessage) -> str:
    detail = f": {said.detail}" if said.detail else ""
    return (
        f"{attempt.label} failed with {said.exception} ({said.info.name}){detail}; the next "
        f"executor meets the same refusal, a restart cannot help (hint: {said.info.hint})"
    )


def judge_spark(
    view: SparkView | None,
    *,
    stall_seconds: float,
    heartbeat_seconds: float,
    cluster_healthy: bool,
    absent_topics: tuple[str, ...] = (),
) -> tuple[SparkFinding, ...]:
    """Findings from the Spark view, verdicts first (none when it is unavailable).
    `absent_topics`: the pod's topics (the policy's) the cluster's metadata does not
    have - a wait for metadata is then theirs, not a wrong view of the cluster."""
    if view is None or not view.available:
        return ()
    context = _Round(
        tasks={t.task.task_id: t for t in view.tasks},
        stall_seconds=stall_seconds,
        cluster_healthy=cluster_healthy,
        absent_topics=absent_topics,
        io_alive=io_thread_in_its_loop(view),
        viewed=had_a_view(view),
    )
    found: list[SparkFinding] = refused_attempts(view)
    for obs in view.threads:
        activity = obs.thread.activity
        if activity is Activity.IN_CALLBACK and obs.held_seconds >= heartbeat_seconds:
            found.append(_callback(obs, heartbeat_seconds, cluster_healthy))
        elif activity in _WAITS and obs.held_seconds >= stall_seconds:
            found.append(_wait(obs, context))
    found += _corroborating(view.tasks)
    order = {Verdict.WRITES_REJECTED: -1, Verdict.PRODUCER_HUNG: 0, Verdict.METADATA_STALE: 1}
    return tuple(sorted(found, key=lambda f: order.get(f.verdict, 9) if f.verdict else 9))


def unavailable_reason(view: SparkView | None) -> str | None:
    """Why Spark's view is missing this round (None when it is there or not configured)."""
    if view is None or view.available:
        return None
    return f"Spark view unavailable: {view.error}"
