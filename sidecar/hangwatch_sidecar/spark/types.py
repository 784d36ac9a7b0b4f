"""Plain data of the Spark view: running tasks, classified producer threads, stage peers.

Produced by `spark.answers` and `spark.threads` (one read of the driver: a
`SparkSnapshot`) and by `spark.tracking` (snapshots over time: a `SparkView`), read by
`spark.judge` and the verdict engine. Times are the sidecar's monotonic clock, in
seconds. No I/O here.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum


class ThreadRole(StrEnum):
    """Which kind of JVM thread a producer thread is."""

    NETWORK = "network"
    """The producer's single I/O thread (`kafka-producer-network-thread | <client.id>`)."""
    TASK = "task"
    """A Spark task thread (`Executor task launch worker for task ...`)."""
    OTHER = "other"
    """Any other thread that calls the producer (a user's own thread, an old client's)."""


class Activity(StrEnum):
    """What a producer thread was doing when the thread dump was taken."""

    IN_CALLBACK = "in_callback"
    """The I/O thread is inside user code it called (a delivery callback, an
    interceptor): while it is there nothing is sent or received (S4)."""
    AWAITING_METADATA = "awaiting_metadata"
    """A send waits for topic metadata (`KafkaProducer.waitOnMetadata`,
    `Metadata.awaitUpdate`, the old client's metadata refresh) (S1, S3)."""
    AWAITING_BUFFER = "awaiting_buffer"
    """A send waits for buffer memory (`BufferPool.allocate`): the buffer is full (S4)."""
    FLUSHING = "flushing"
    """`KafkaProducer.flush` waits for every queued record to be answered (S2)."""
    AWAITING_RESULT = "awaiting_result"
    """A thread waits for one send's result (`FutureRecordMetadata.get`) (S2)."""
    SENDING = "sending"
    """The I/O thread in its own loop (polling, sending): the normal state."""


WAITING_STATES = frozenset({"WAITING", "TIMED_WAITING", "BLOCKED"})
"""JVM thread states of a thread that is not running (parked, sleeping, on a monitor)."""


@dataclass(frozen=True)
class TaskThread:
    """A Spark task running on this executor, named by its thread."""

    task_id: int
    """Spark's task id (TID), unique in the application."""
    thread_name: str
    stage_id: int | None = None
    stage_attempt: int | None = None
    index: int | None = None
    """The task's partition index in its stage."""
    attempt: int | None = None
    """0 for the first attempt; more when earlier attempts failed or were killed.
    (Spark before 3.1 names threads by TID only: these four are None.)"""

    @property
    def stage(self) -> tuple[int, int] | None:
        if self.stage_id is None or self.stage_attempt is None:
            return None
        return (self.stage_id, self.stage_attempt)

    @property
    def label(self) -> str:
        if self.stage is None:
            return f"task TID {self.task_id}"
        return (
            f"task {self.index}.{self.attempt} of stage {self.stage_id}.{self.stage_attempt} "
            f"(TID {self.task_id})"
        )


@dataclass(frozen=True)
class ProducerThread:
    """One JVM thread of the executor that is a Kafka producer's or calls one."""

    thread_id: int
    name: str
    role: ThreadRole
    activity: Activity
    state: str
    """The JVM thread state (RUNNABLE, WAITING, TIMED_WAITING, BLOCKED...)."""
    frame: str
    """The Kafka client frame that tells the activity (`Class.method`)."""
    user_frame: str | None = None
    """For `IN_CALLBACK`: the user code the I/O thread called (`Callback.onCompletion`)."""
    waits_on: str | None = None
    """What the thread waits for (the JVM's lock name), when it waits."""
    detail: str = ""
    """What the stack says beyond the activity (e.g. a callback waiting for a send's
    result on its own I/O thread)."""
    task_id: int | None = None
    """The Spark task whose thread this is (TASK role)."""
    inner: Activity | None = None
    """For `IN_CALLBACK`: the client's own wait the callback called (a send's result, buffer
    memory, metadata, a flush), which only this I/O thread could end: it waits for itself."""
    cpu_ms: float | None = None
    """The thread's CPU time when the dump tells it (a HotSpot text dump's `cpu=`; Spark's
    REST answer does not): a thread whose CPU time moved between two dumps ran in between,
    so it left the place it is seen in and came back (see `spark.tracking`)."""

    @property
    def key(self) -> tuple[int, str, Activity, str | None]:
        """What must stay the same from one dump to the next for the state to persist."""
        return (self.thread_id, self.name, self.activity, self.user_frame)

    @property
    def waiting(self) -> bool:
        return self.state in WAITING_STATES

    @property
    def waits_for_itself(self) -> bool:
        """The I/O thread waits, inside its callback, for what only it can do: stuck by
        construction, even when a timeout lets it out and the next callback brings it back."""
        return self.activity is Activity.IN_CALLBACK and self.inner is not None


@dataclass(frozen=True)
class StagePeers:
    """A stage attempt as the driver reports it: counts, and its finished tasks' durations."""

    stage_id: int
    attempt: int
    tasks: int
    active: int
    complete: int
    failed: int
    """Failed task attempts of the stage (every executor)."""
    killed: int
    median_seconds: float | None = None
    """Median duration of the stage's successful tasks; None before any finished."""


@dataclass(frozen=True)
class FailedAttempt:
    """A failed task attempt of this executor as the driver reports it (`taskList`)."""

    task_id: int
    stage_id: int
    stage_attempt: int
    index: int
    attempt: int
    error: str
    """Spark's `errorMessage` (the exception and its stack), cut to `MAX_ERROR_CHARS`."""
    ended_ts: float | None = None
    """When it failed (Unix time: `launchTime` + `duration`), None when Spark does not say."""
    seen_at: float = 0.0
    """When the sidecar first saw it (monotonic)."""

    @property
    def label(self) -> str:
        return (
            f"task {self.index}.{self.attempt} of stage {self.stage_id}.{self.stage_attempt} "
            f"(TID {self.task_id})"
        )


MAX_ERROR_CHARS = 16_384
"""Characters of a failed attempt's `errorMessage` kept (the exception comes first)."""


@dataclass(frozen=True)
class ExecutorCounts:
    """This executor's task counts from the driver's executor list (used without a thread
    dump)."""

    active_tasks: int
    failed_tasks: int
    completed_tasks: int


@dataclass(frozen=True)
class SparkSnapshot:
    """One read of the driver about this executor (what `spark.client` fetched)."""

    at: float
    tasks: tuple[TaskThread, ...] = ()
    threads: tuple[ProducerThread, ...] = ()
    stages: Mapping[tuple[int, int], StagePeers] = field(default_factory=dict)
    counts: ExecutorCounts | None = None
    """Set when the thread dump was unavailable and the executor list was read instead."""
    thread_dump: bool = True
    """False when the tasks come from the executor list (no thread states, no durations)."""
    error: str | None = None
    """Why this read failed (the driver unreachable, an answer refused...): one line."""
    error_kind: str | None = None
    """A bounded label for metrics: see `spark.client.ERROR_KINDS`."""
    read_seconds: float = 0.0
    requests: int = 0
    response_bytes: int = 0
    application_id: str = ""
    source: str = "driver"
    """Where the thread dump came from: `driver` (the driver's REST API) or `jvm` (the
    pod's own JVM through the attach mechanism, `spark.attach`)."""
    spark_executor: bool = True
    """The dumped JVM is a Spark executor (a local dump may be any Java producer's)."""

    @property
    def ok(self) -> bool:
        return self.error is None


@dataclass(frozen=True)
class ReadStats:
    """What reading the driver has cost and how it went (for /status and metrics)."""

    reads: int = 0
    errors: tuple[tuple[str, int], ...] = ()
    """(kind, count) of failed reads, by `spark.client.ERROR_KINDS`."""
    last_read_seconds: float = 0.0
    last_requests: int = 0
    last_response_bytes: int = 0
    driver_up: bool = False


@dataclass(frozen=True)
class RunningTask:
    """A task of this executor with how long it has run and how that compares with its stage."""

    task: TaskThread
    running_seconds: float
    """Since the sidecar first saw it running (a lower bound: Spark reports no start time
    in the thread dump)."""
    peers: StagePeers | None = None
    straggler: bool = False
    """Running past the stall threshold and far past its stage's finished tasks."""


@dataclass(frozen=True)
class ThreadObservation:
    """A producer thread and how long it has been in its current activity."""

    thread: ProducerThread
    held_seconds: float
    """Since the first dump that showed this thread in this activity (consecutive dumps)."""


@dataclass(frozen=True)
class SparkView:
    """Spark's view of this executor as the verdict engine reads it."""

    at: float
    """When the read it rests on was taken (monotonic)."""
    available: bool
    error: str | None = None
    """Why the view is unavailable (or why the latest read failed while an older one is
    still in use)."""
    tasks: tuple[RunningTask, ...] = ()
    threads: tuple[ThreadObservation, ...] = ()
    thread_dump: bool = True
    counts: ExecutorCounts | None = None
    application_id: str = ""
    executor_id: str = ""
    source: str = "driver"
    """`driver` (the driver's REST API) or `jvm` (a thread dump of the pod's own JVM)."""
    spark_executor: bool = True
    """False for a local JVM that is not a Spark executor: no task to speak of."""

    failed_attempts: tuple[FailedAttempt, ...] = ()
    """This executor's failed task attempts the sidecar saw (newest first), read when
    the driver's count of them grows."""
    completed_tasks: int | None = None
    """How many tasks this executor has finished, as the driver last said (None: not
    known, as for a local JVM dump)."""

    @property
    def label(self) -> str:
        """How reasons name this view."""
        return "spark view" if self.source == "driver" else "local JVM thread dump"

    @property
    def task_running(self) -> bool | None:
        """True when a task of this executor runs, False when none, None when unknown (or
        the JVM is not a Spark executor)."""
        if not self.available or not self.spark_executor:
            return None
        if self.counts is not None and not self.tasks:
            return self.counts.active_tasks > 0
        return bool(self.tasks)

    @property
    def task_running_seconds(self) -> float | None:
        """How long the longest-running task of this executor has run (None: none/unknown)."""
        if not self.available or not self.tasks:
            return None
        return max(t.running_seconds for t in self.tasks)

    @property
    def stragglers(self) -> tuple[RunningTask, ...]:
        return tuple(t for t in self.tasks if t.straggler)

    @property
    def straggler(self) -> RunningTask | None:
        """The longest-running straggler, if any."""
        found = self.stragglers
        return max(found, key=lambda t: t.running_seconds) if found else None

    @property
    def producer_visible(self) -> bool:
        """The executor's JVM has Kafka producer threads (a JVM producer to judge)."""
        return self.available and bool(self.threads)
