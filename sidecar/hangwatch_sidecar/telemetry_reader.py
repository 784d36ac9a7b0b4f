"""Reads the producers' telemetry directory safely and tells live producers from dead ones.

The directory is shared with untrusted-in-practice writers (user code), so reading
never raises and never blocks: a missing directory, garbage, truncated, oversized,
foreign or out-of-contract documents (wrong types, NaN, negative counters, over-long
strings: `hangwatch_producer.wire.telemetry.decode` checks every field), FIFOs, devices and
symbolic links each become a `problem` with a `Problem` kind and a short reason
(-> verdict `unknown` for that producer), never an exception. Files are opened
non-blocking and only read when they are regular files (`hangwatch_producer.telemetry_files`).

Liveness comes from the wrapper's lock file (`<name>.lock`, held with flock for the
producer's lifetime): if the sidecar can take the lock, the producer process is gone;
if it cannot, the producer lives. flock works across containers sharing an emptyDir
(same kernel, same inode) without a shared PID namespace. Without a lock file,
liveness is unknown (the loop ignores such a file once it is older than ten heartbeat
thresholds). The sidecar never writes: the files of a producer that died without
closing are removed by the next producer that opens in the directory (and go with the
pod's volume in any case).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from hangwatch_producer.telemetry_files import NotARegularFile, lock_state, read_regular
from hangwatch_producer.wire import telemetry as wire
from hangwatch_producer.wire.schema import Problem, WireFormatError

__all__ = ["Problem", "TelemetryRead", "lock_state", "parse", "scan"]


@dataclass(frozen=True)
class TelemetryRead:
    """One telemetry file as read now: a document, or the reason it cannot be used."""

    key: str
    doc: wire.TelemetryDocument | None
    problem: str | None
    alive: bool | None
    mtime: float
    kind: Problem | None = None
    """The problem's kind (a bounded metric label), None when the document is usable."""


class DirectoryProblem(str):
    """A problem not tied to one producer's file: its reason, with its `kind`."""

    kind: Problem

    def __new__(cls, kind: Problem, reason: str) -> DirectoryProblem:
        problem = super().__new__(cls, reason)
        problem.kind = kind
        return problem


def parse(raw: bytes) -> tuple[wire.TelemetryDocument | None, str | None]:
    """A telemetry document from bytes, or (None, reason) when it cannot be used."""
    try:
        return wire.decode(raw), None
    except WireFormatError as exc:
        return None, exc.reason


def scan(
    directory: Path, max_bytes: int, max_files: int
) -> tuple[list[TelemetryRead], list[DirectoryProblem]]:
    """Newest `max_files` telemetry files of `directory`, and problems not tied to one file."""
    try:
        entries = [e for e in os.scandir(directory) if wire.key_of(e.name) is not None]
    except FileNotFoundError:
        reason = f"telemetry directory {directory} does not exist"
        return [], [DirectoryProblem(Problem.NO_DIRECTORY, reason)]
    except OSError as exc:
        reason = f"telemetry directory {directory} unreadable: {exc.strerror}"
        return [], [DirectoryProblem(Problem.UNREADABLE, reason)]
    dated = []
    for entry in entries:
        try:
            dated.append((entry.stat(follow_symlinks=False).st_mtime, entry))
        except OSError:
            continue
    dated.sort(key=lambda pair: pair[0], reverse=True)
    problems = []
    if len(dated) > max_files:
        problems.append(
            DirectoryProblem(
                Problem.TOO_MANY_PRODUCERS,
                f"{len(dated) - max_files} telemetry files beyond the limit of {max_files}",
            )
        )
    return [_read(Path(e.path), mtime, max_bytes) for mtime, e in dated[:max_files]], problems


def _read(path: Path, mtime: float, max_bytes: int) -> TelemetryRead:
    key = wire.key_of(path.name) or path.name
    alive = lock_state(path.with_name(wire.lock_name(key)))

    def unusable(kind: Problem, reason: str) -> TelemetryRead:
        return TelemetryRead(key, None, reason, alive, mtime, kind)

    try:
        raw = read_regular(path, max_bytes)
    except NotARegularFile as exc:
        return unusable(Problem.NOT_REGULAR_FILE, f"telemetry is {exc.strerror}: not read")
    except OSError as exc:
        return unusable(Problem.UNREADABLE, f"telemetry unreadable: {exc.strerror}")
    if len(raw) > max_bytes:
        return unusable(Problem.TOO_LARGE, f"telemetry larger than {max_bytes} bytes")
    try:
        return TelemetryRead(key, wire.decode(raw), None, alive, mtime)
    except WireFormatError as exc:
        return unusable(exc.problem, exc.reason)
