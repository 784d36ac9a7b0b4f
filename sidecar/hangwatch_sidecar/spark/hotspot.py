"""A HotSpot thread dump's text -> the thread entries `spark.threads` classifies (pure).

Fed by `spark.attach` with the text a HotSpot JVM answers to the attach mechanism's
`threaddump` command (what `jstack <pid>` prints):

    "kafka-producer-network-thread | producer-1" #12 daemon prio=5 os_prio=0 cpu=51.20ms ...
       java.lang.Thread.State: WAITING (parking)
    \tat jdk.internal.misc.Unsafe.park(java.base@17.0.15/Native Method)
    \t- parking to wait for  <0x00000000fec1b2a8> (a java.util.concurrent.CountDownLatch$Sync)
    \tat java.util.concurrent.locks.LockSupport.park(java.base@17.0.15/LockSupport.java:211)

Each Java thread (a header with `#<id>`) becomes the entry Spark's REST API serves for
it (`{threadId, threadName, threadState, lockName, stackTrace: {elems}}`, top frame
first), so the one classifier judges both sources: `threadId` is the Java thread id,
`cpuMillis` its CPU time (the header's `cpu=`, JDK 11 and later),
`threadState` the `java.lang.Thread.State` word, `lockName` what the thread's first
`waiting on` / `parking to wait for` / `waiting to lock` line names (`Class <address>`),
the frames the `at` lines. The JVM's own threads (no `#<id>`: GC, compiler, VM) carry no
Java stack and are left out. `spark_executor` says whether the JVM is a Spark executor
(a frame of Spark's executor backend on some stack).

The text comes from another process of the pod: the parser never raises, reads at most
`MAX_LINES` lines and keeps at most `threads.MAX_THREADS` threads and
`threads.MAX_FRAMES` frames each, so a hostile answer costs bounded work.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from hangwatch_sidecar.spark.threads import (
    MAX_FRAMES,
    MAX_TEXT,
    MAX_THREADS,
    ThreadDump,
    classify_dump,
)

MAX_LINES = 200_000
"""Lines read from one dump at most (a JVM with 4,096 threads of 40 frames fits)."""
EXECUTOR_CLASSES = (
    "org.apache.spark.executor.",
    "org.apache.spark.scheduler.cluster.k8s.KubernetesExecutorBackend",
)
"""Frames that make the JVM a Spark executor (its backend's main thread waits in one)."""

_HEADER = re.compile(r'^"(?P<name>.*)" #(?P<id>\d{1,18})\b')
_CPU = re.compile(r" cpu=(?P<ms>\d{1,15}(?:\.\d{1,6})?)ms ")
_STATE = re.compile(r"^\s+java\.lang\.Thread\.State: (?P<state>[A-Z_]{1,40})")
_FRAME = re.compile(r"^\s+at (?P<frame>\S.*)$")
_LOCK = re.compile(
    r"^\s+- (?:waiting on|parking to wait for|waiting to lock)\s+<(?P<addr>0x[0-9a-fA-F]{1,16})>"
    r" \(a (?P<cls>[^)\s]{1,300})\)"
)


@dataclass(frozen=True)
class LocalDump:
    """What one thread dump of a local JVM says."""

    dump: ThreadDump
    spark_executor: bool
    """A Spark executor's JVM: its tasks' threads say whether a task runs."""
    threads_total: int
    """Java threads read from the text (at most MAX_THREADS)."""


def entries(text: str) -> list[dict[str, Any]]:
    """The Java threads of a HotSpot thread dump as Spark's REST API describes them."""
    found: list[dict[str, Any]] = []
    current: dict[str, Any] | None = None
    for number, line in enumerate(text.splitlines()):
        if number >= MAX_LINES:
            break
        if line.startswith('"'):
            current = None
            header = _HEADER.match(line[: MAX_TEXT * 2])
            if header and len(found) < MAX_THREADS:
                current = {
                    "threadId": int(header["id"]),
                    "threadName": header["name"][:MAX_TEXT],
                    "threadState": "UNKNOWN",
                    "stackTrace": {"elems": []},
                }
                if (cpu := _CPU.search(line, header.end(), MAX_TEXT * 2)) is not None:
                    current["cpuMillis"] = float(cpu["ms"])
                found.append(current)
            continue
        if current is None:
            continue
        elems: list[str] = current["stackTrace"]["elems"]
        if (frame := _FRAME.match(line)) is not None:
            if len(elems) < MAX_FRAMES:
                elems.append(frame["frame"][:MAX_TEXT])
        elif (state := _STATE.match(line)) is not None:
            current["threadState"] = state["state"]
        elif "lockName" not in current and (lock := _LOCK.match(line)) is not None:
            current["lockName"] = f"{lock['cls']} <{lock['addr']}>"
    return found


def _executor(found: list[dict[str, Any]]) -> bool:
    return any(
        any(
            e.split("(", 1)[0].rsplit("/", 1)[-1].startswith(EXECUTOR_CLASSES)
            for e in entry["stackTrace"]["elems"]
        )
        for entry in found
    )


def parse_local_dump(text: str) -> LocalDump:
    """The running tasks and producer threads of a HotSpot thread dump (never raises)."""
    found = entries(text)
    return LocalDump(classify_dump(found), _executor(found), len(found))
