"""Reads the producers' telemetry directory safely and tells live producers from dead ones.

The directory is shared with untrusted-in-practice writers (user code), so reading
never raises: a missing directory, garbage, truncated, oversized or foreign files
each become a `problem` with a short reason (-> verdict `unknown` for that file),
never a crash. Only the sidecar reads; it never writes into a file a producer uses.

Liveness comes from the wrapper's lock file (`<name>.lock`, held with flock for the
producer's lifetime): if the sidecar can take the lock, the producer process is gone
and its files are garbage-collected; if it cannot, the producer lives. flock works
across containers sharing an emptyDir (same kernel, same inode) without a shared PID
namespace. Without a lock file, liveness is unknown and a file untouched for
`forget_after_seconds` is ignored.
"""

from __future__ import annotations

import errno
import fcntl
import json
import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

PREFIX, SUFFIX, LOCK_SUFFIX = "producer-", ".json", ".lock"
SUPPORTED_SCHEMAS = frozenset({1})
KIND = "hangwatch.producer.telemetry"


@dataclass(frozen=True)
class TelemetryRead:
    """One telemetry file as read now: a document, or the reason it cannot be used."""

    key: str
    doc: dict[str, Any] | None
    problem: str | None
    alive: bool | None
    mtime: float


def lock_state(lock_path: Path) -> bool | None:
    """True if a live process holds the lock, False if nobody does, None without a lock file."""
    try:
        fd = os.open(lock_path, os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN):
            return True
        return None
    else:
        fcntl.flock(fd, fcntl.LOCK_UN)
        return False
    finally:
        os.close(fd)


def parse(raw: bytes) -> tuple[dict[str, Any] | None, str | None]:
    """A telemetry document from bytes, or (None, reason) when it cannot be used."""
    try:
        doc = json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        return None, "telemetry is not valid JSON (truncated or garbage)"
    if not isinstance(doc, dict):
        return None, "telemetry is not a JSON object"
    if doc.get("kind", KIND) != KIND:
        return None, f"telemetry kind {str(doc.get('kind'))[:40]!r} is not {KIND}"
    if doc.get("schema") not in SUPPORTED_SCHEMAS:
        return None, f"unsupported telemetry schema {str(doc.get('schema'))[:20]!r}"
    if not isinstance(doc.get("seq"), int) or not isinstance(doc.get("counters"), dict):
        return None, "telemetry lacks seq or counters"
    return doc, None


def scan(directory: Path, max_bytes: int, max_files: int) -> tuple[list[TelemetryRead], list[str]]:
    """Newest `max_files` telemetry files of `directory`, and problems not tied to one file."""
    try:
        entries = [
            e
            for e in os.scandir(directory)
            if e.name.startswith(PREFIX) and e.name.endswith(SUFFIX) and e.is_file()
        ]
    except FileNotFoundError:
        return [], [f"telemetry directory {directory} does not exist"]
    except OSError as exc:
        return [], [f"telemetry directory {directory} unreadable: {exc.strerror}"]
    dated = []
    for entry in entries:
        try:
            dated.append((entry.stat().st_mtime, entry))
        except OSError:
            continue
    dated.sort(key=lambda pair: pair[0], reverse=True)
    problems = []
    if len(dated) > max_files:
        problems.append(f"{len(dated) - max_files} telemetry files beyond the limit of {max_files}")
    return [_read(Path(e.path), mtime, max_bytes) for mtime, e in dated[:max_files]], problems


def _read(path: Path, mtime: float, max_bytes: int) -> TelemetryRead:
    key = path.name[: -len(SUFFIX)]
    alive = lock_state(path.with_suffix(LOCK_SUFFIX))
    try:
        with path.open("rb") as fh:
            raw = fh.read(max_bytes + 1)
    except OSError as exc:
        return TelemetryRead(key, None, f"telemetry unreadable: {exc.strerror}", alive, mtime)
    if len(raw) > max_bytes:
        return TelemetryRead(key, None, f"telemetry larger than {max_bytes} bytes", alive, mtime)
    doc, problem = parse(raw)
    return TelemetryRead(key, doc, problem, alive, mtime)


def collect_garbage(directory: Path, key: str) -> None:
    """Remove a dead producer's telemetry and lock files (only after its lock was free)."""
    for suffix in (SUFFIX, LOCK_SUFFIX):
        try:
            (directory / f"{key}{suffix}").unlink()
        except FileNotFoundError:
            pass
        except OSError as exc:
            log.warning(
                "cannot remove dead producer's file",
                extra={"file": f"{key}{suffix}", "error": exc.strerror},
            )
    log.info("garbage-collected telemetry of an exited producer", extra={"producer": key})
