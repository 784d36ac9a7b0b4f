"""The telemetry directory on disk: safe reads, the liveness lock, a dead producer's files.

Shared by both sides of the telemetry contract (`hangwatch_producer.wire.telemetry` names the
files). The sidecar only reads: `read_regular` and `lock_state`; its mount of the
volume is read-only in a pod. The producer wrapper writes its own files, holds its lock
and, when it opens, removes the files of producers that died without closing
(`remove_dead_producers`): the only writer of the directory is also its only cleaner.

Nothing here blocks on a file someone planted: every open is non-blocking and does not
follow symbolic links, and only regular files are used, so a FIFO named
`producer-x.lock` or `producer-x.json` cannot wedge either side.
"""

from __future__ import annotations

import errno
import fcntl
import logging
import os
import stat
from collections.abc import Callable
from pathlib import Path

from hangwatch_producer.wire import telemetry as wire

log = logging.getLogger(__name__)

OPEN_FLAGS = os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC
"""Never wait for a FIFO's writer, never follow a link out of the directory."""


class NotARegularFile(OSError):
    """A FIFO, device, socket, directory or symbolic link where a file was expected."""


def open_regular(path: Path) -> int:
    """A read-only descriptor of the regular file at `path`; `NotARegularFile` otherwise."""
    try:
        fd = os.open(path, OPEN_FLAGS)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise NotARegularFile(errno.ELOOP, "a symbolic link") from None
        raise
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise NotARegularFile(errno.EINVAL, "not a regular file")
    return fd


def read_regular(path: Path, max_bytes: int) -> bytes:
    """At most `max_bytes + 1` bytes of the regular file at `path` (so a caller sees "larger")."""
    fd = open_regular(path)
    try:
        chunks: list[bytes] = []
        left = max_bytes + 1
        while left > 0 and (chunk := os.read(fd, min(left, 1 << 16))):
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def lock_state(lock_path: Path) -> bool | None:
    """True if a live process holds the lock, False if nobody does, None when unknown
    (no lock file, not a regular file, unreadable).

    The wrapper holds its lock with flock; the Java client's reporter (a JVM has no
    flock) with a POSIX record lock (fcntl). The two kinds do not see each other, so
    both are tried: the file is free only when neither is held."""
    try:
        fd = open_regular(lock_path)
    except OSError:
        return None
    try:
        held = _held(lambda: fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB))
        if held is False:
            fcntl.flock(fd, fcntl.LOCK_UN)
            held = _held(lambda: fcntl.lockf(fd, fcntl.LOCK_SH | fcntl.LOCK_NB))
            if held is False:
                fcntl.lockf(fd, fcntl.LOCK_UN)
        return held
    finally:
        os.close(fd)


def _held(take: Callable[[], object]) -> bool | None:
    """Whether `take` (a non-blocking lock call) finds the lock held (None: it failed
    otherwise). When it returns False the caller holds the lock and gives it back."""
    try:
        take()
    except OSError as exc:
        if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
            return True
        return None
    return False


def remove_dead_producers(directory: Path, limit: int = 64) -> list[str]:
    """Remove the files of at most `limit` producers whose lock nobody holds; their keys.

    Only documents with a lock file are touched (a free lock proves the writer exited;
    without one, liveness is unknown and the file is left alone).
    """
    removed: list[str] = []
    try:
        names = [entry.name for entry in os.scandir(directory)]
    except OSError:
        return removed
    for name in names:
        key = wire.key_of(name)
        if key is None or len(removed) >= limit:
            continue
        lock = directory / wire.lock_name(key)
        if lock_state(lock) is not False:
            continue
        remove_files(directory / name, directory / wire.temp_name(name), lock)
        removed.append(key)
    return removed


def remove_files(*paths: Path) -> None:
    """Delete `paths` in order; a missing one is fine, any other failure is logged (debug)."""
    for path in paths:
        try:
            path.unlink()
        except FileNotFoundError:
            pass
        except OSError as exc:
            log.debug("cannot remove telemetry file", extra={"file": str(path), "error": str(exc)})
