"""An executor's thread dump -> its running tasks and its Kafka producer threads (pure).

Fed with the JSON the driver serves at `/api/v1/applications/<app>/executors/<id>/threads`
(a list of `{threadId, threadName, threadState, lockName, stackTrace: {elems: [frame,
...]}}`, top frame first; a frame reads `app//org.example.Class.method(File.java:12)`,
possibly followed by `\\t-  locked ...` lines). Spark 3.5 sends no `lockName` (4.0 added
it); the lock a thread waits on is then read from `blockedByLock`, which both lines send
as `Lock(<class>@<identity hash>)`. Two things come out:

- the tasks running on the executor, from Spark's task thread names
  (`Executor task launch worker for task 3.1 in stage 7.0 (TID 42)`, or `... for task 42`
  before Spark 3.1) with `Executor$TaskRunner.run` on the stack;
- every thread that is a Kafka producer's or waits in one, classified from the Java
  client's public class and thread names alone (the client itself is not needed):
  the I/O thread `kafka-producer-network-thread | <client.id>` (its loop is
  `producer.internals.Sender.run`) inside user code it called - a delivery callback or
  an interceptor (S4) - or in its own loop; a thread waiting in
  `KafkaProducer.waitOnMetadata` / `Metadata.awaitUpdate` (S1, S3; the old Scala
  client's `BrokerPartitionInfo.updateInfo`), `BufferPool.allocate` (a full buffer, S4),
  `KafkaProducer.flush` / `RecordAccumulator.awaitFlushCompletion`, or
  `FutureRecordMetadata.get` (S2).

Malformed entries are skipped and counted; at most `MAX_THREADS` threads and
`MAX_FRAMES` frames per thread are read, so a hostile answer costs bounded work.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from hangwatch_sidecar.spark.types import (
    Activity,
    ProducerThread,
    TaskThread,
    ThreadRole,
)

MAX_THREADS = 4096
"""Threads read from one dump at most (an executor has tens to a few hundred)."""
MAX_FRAMES = 512
"""Frames read per thread at most (the JVM's default dump depth is unbounded)."""
MAX_TEXT = 300
"""Characters kept of a thread name, lock name or frame."""

NETWORK_THREAD_PREFIX = "kafka-producer-network-thread"
"""The Java client's I/O thread: `kafka-producer-network-thread | <client.id>`."""
SENDER = "org.apache.kafka.clients.producer.internals.Sender"
TASK_RUNNER = "org.apache.spark.executor.Executor$TaskRunner"

_TASK_NAME = re.compile(
    r"^Executor task launch worker for task (?:(?P<index>\d+)\.(?P<attempt>\d+) in stage "
    r"(?P<stage>\d+)\.(?P<stage_attempt>\d+) \(TID (?P<tid>\d+)\)|(?P<old_tid>\d+))$"
)
_HIDDEN_CLASS = re.compile(r"/0x[0-9a-fA-F]+(?=\.)")

WAIT_POINTS: tuple[tuple[str, str, Activity], ...] = (
    ("org.apache.kafka.clients.producer.internals.RecordAccumulator", "awaitFlushCompletion",
     Activity.FLUSHING),
    ("org.apache.kafka.clients.producer.KafkaProducer", "flush", Activity.FLUSHING),
    ("org.apache.kafka.clients.producer.internals.FutureRecordMetadata", "get",
     Activity.AWAITING_RESULT),
    ("org.apache.kafka.clients.producer.internals.BufferPool", "allocate",
     Activity.AWAITING_BUFFER),
    ("org.apache.kafka.clients.producer.internals.ProducerMetadata", "awaitUpdate",
     Activity.AWAITING_METADATA),
    ("org.apache.kafka.clients.Metadata", "awaitUpdate", Activity.AWAITING_METADATA),
    ("org.apache.kafka.clients.producer.KafkaProducer", "waitOnMetadata",
     Activity.AWAITING_METADATA),
    ("kafka.producer.BrokerPartitionInfo", "updateInfo", Activity.AWAITING_METADATA),
    ("kafka.client.ClientUtils$", "fetchTopicMetadata", Activity.AWAITING_METADATA),
)  # fmt: skip
"""(class, method, activity): the producer's public places where a caller waits. The
topmost frame of a stack that matches one tells the activity (a flush waits in
`ProduceRequestResult.await` below `awaitFlushCompletion`: flushing)."""

_CALLBACK_DETAILS = (
    (Activity.AWAITING_RESULT, "waits for a send's result on the I/O thread itself, which "
     "alone could complete it: it waits for itself (until a timeout, if the call has one)"),
    (Activity.AWAITING_BUFFER, "sends from the callback and waits for buffer memory that "
     "only the I/O thread frees"),
    (Activity.AWAITING_METADATA, "sends from the callback and waits for metadata that only "
     "the I/O thread fetches"),
    (Activity.FLUSHING, "flushes from the callback: the records it waits for can only be "
     "sent by the I/O thread itself"),
)  # fmt: skip

LIBRARY_PREFIXES = ("java.", "javax.", "jdk.", "sun.", "com.sun.", "scala.", "kotlin.")
KAFKA_PREFIXES = ("org.apache.kafka.", "kafka.")


@dataclass(frozen=True)
class Frame:
    """One stack frame: the declaring class (binary name) and the method."""

    cls: str
    method: str

    @property
    def name(self) -> str:
        return f"{self.cls}.{self.method}"

    @property
    def kafka(self) -> bool:
        return self.cls.startswith(KAFKA_PREFIXES)

    @property
    def user(self) -> bool:
        """Neither the JDK/language runtime nor the Kafka client: code someone wrote."""
        return not self.kafka and not self.cls.startswith(LIBRARY_PREFIXES)


@dataclass(frozen=True)
class ThreadDump:
    """What one thread dump says: tasks running, producer threads, entries skipped."""

    tasks: tuple[TaskThread, ...]
    threads: tuple[ProducerThread, ...]
    skipped: int = 0
    """Entries that were not a thread as Spark describes one (or beyond MAX_THREADS)."""


class ThreadDumpError(ValueError):
    """The answer is not a thread dump at all (not a list)."""


def parse_frame(text: str) -> Frame | None:
    """`app//org.example.Cls$Inner.method(File.java:12)\\n\\t-  locked ...` -> Frame, or None
    when the text is not a frame (a module/loader prefix and hidden-class suffixes are
    dropped; a leading `at ` of jstack output is accepted)."""
    line = text[:MAX_TEXT].split("\n", 1)[0].strip()
    line = line.removeprefix("at ").strip()
    head, paren, _ = line.partition("(")
    if not paren:
        return None
    qualified = _HIDDEN_CLASS.sub("", head).rsplit("/", 1)[-1]
    cls, dot, method = qualified.rpartition(".")
    if not dot or not cls or not method or " " in qualified:
        return None
    return Frame(cls, method)


def task_of(name: str) -> TaskThread | None:
    """The task a Spark task thread's name names; None for other threads."""
    match = _TASK_NAME.match(name)
    if not match:
        return None
    if match["old_tid"] is not None:
        return TaskThread(task_id=int(match["old_tid"]), thread_name=name)
    return TaskThread(
        task_id=int(match["tid"]),
        thread_name=name,
        stage_id=int(match["stage"]),
        stage_attempt=int(match["stage_attempt"]),
        index=int(match["index"]),
        attempt=int(match["attempt"]),
    )


def _wait_point(frames: Sequence[Frame]) -> tuple[Activity, Frame] | None:
    for frame in frames:
        for cls, method, activity in WAIT_POINTS:
            if frame.cls == cls and frame.method == method:
                return activity, frame
    return None


def _text(value: Any) -> str | None:
    return value[:MAX_TEXT] if isinstance(value, str) and value else None


def _cpu(value: Any) -> float | None:
    """A thread's CPU time in ms (`cpuMillis`, only in local dumps), None when absent or
    not a finite non-negative number."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if 0 <= value < 1e15 else None


def _lock(entry: dict[str, Any]) -> str | None:
    """The lock the thread waits on: 4.x's `lockName`, else 3.5's `blockedByLock`."""
    named = _text(entry.get("lockName"))
    if named is not None:
        return named
    blocked = _text(entry.get("blockedByLock"))
    if blocked is not None and blocked.startswith("Lock(") and blocked.endswith(")"):
        return _text(blocked[5:-1])
    return blocked


def _network(
    thread_id: int, name: str, state: str, frames: list[Frame], waits_on: str | None
) -> ProducerThread:
    """The I/O thread: in user code it called (a callback), or in its own loop."""
    users = [i for i, f in enumerate(frames) if f.user]
    if not users:
        loop = next((f for f in frames if f.cls == SENDER), None)
        frame = loop.name if loop else (frames[0].name if frames else "")
        return ProducerThread(thread_id, name, ThreadRole.NETWORK, Activity.SENDING, state, frame)
    # The entry into user code is the deepest user frame called by a Kafka frame.
    called = [i for i in users if i + 1 < len(frames) and frames[i + 1].kafka]
    entry = max(called or users)
    caller = frames[entry + 1] if entry + 1 < len(frames) else frames[entry]
    inside = _wait_point(frames[:entry])
    detail = next((text for act, text in _CALLBACK_DETAILS if inside and inside[0] is act), "")
    if not detail:
        detail = f"{state.lower()} on {waits_on}" if waits_on else f"{state.lower()} in user code"
    return ProducerThread(
        thread_id,
        name,
        ThreadRole.NETWORK,
        Activity.IN_CALLBACK,
        state,
        caller.name,
        user_frame=frames[entry].name,
        waits_on=waits_on,
        detail=detail,
        inner=inside[0] if inside else None,
    )


def _classify(entry: Any) -> tuple[TaskThread | None, ProducerThread | None] | None:
    """One dump entry -> (running task, producer thread); None when it is not a thread."""
    if not isinstance(entry, dict):
        return None
    thread_id, name, state = (
        entry.get("threadId"),
        entry.get("threadName"),
        entry.get("threadState"),
    )
    trace = entry.get("stackTrace")
    elems = trace.get("elems") if isinstance(trace, dict) else None
    if (
        not isinstance(thread_id, int)
        or isinstance(thread_id, bool)
        or not isinstance(name, str)
        or not isinstance(state, str)
        or not isinstance(elems, list)
    ):
        return None
    name, state = name[:MAX_TEXT], state[:40]
    frames = [f for e in elems[:MAX_FRAMES] if isinstance(e, str) and (f := parse_frame(e))]
    waits_on = _lock(entry)
    task = task_of(name)
    if task is not None and not any(f.cls == TASK_RUNNER for f in frames):
        task = None  # an idle pool thread that kept its last task's name
    if name.startswith(NETWORK_THREAD_PREFIX) or any(
        f.cls == SENDER and f.method in ("run", "runOnce") for f in frames
    ):
        return task, replace(
            _network(thread_id, name, state, frames, waits_on), cpu_ms=_cpu(entry.get("cpuMillis"))
        )
    found = _wait_point(frames)
    if found is None:
        return task, None
    activity, frame = found
    role = ThreadRole.TASK if task is not None else ThreadRole.OTHER
    producer = ProducerThread(
        thread_id,
        name,
        role,
        activity,
        state,
        frame.name,
        waits_on=waits_on,
        task_id=None if task is None else task.task_id,
        cpu_ms=_cpu(entry.get("cpuMillis")),
    )
    return task, producer


def classify_dump(doc: Any) -> ThreadDump:
    """The running tasks and producer threads of a thread dump answer; ThreadDumpError if it
    is not a list."""
    if not isinstance(doc, list):
        raise ThreadDumpError("thread dump is not a JSON list")
    tasks: dict[int, TaskThread] = {}
    threads: list[ProducerThread] = []
    skipped = max(0, len(doc) - MAX_THREADS)
    for entry in doc[:MAX_THREADS]:
        found = _classify(entry)
        if found is None:
            skipped += 1
            continue
        task, producer = found
        if task is not None:
            tasks.setdefault(task.task_id, task)
        if producer is not None:
            threads.append(producer)
    return ThreadDump(
        tuple(sorted(tasks.values(), key=lambda t: t.task_id)),
        tuple(sorted(threads, key=lambda t: (t.name, t.thread_id))),
        skipped,
    )
