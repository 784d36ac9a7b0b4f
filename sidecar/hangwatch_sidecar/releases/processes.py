"""The client releases of the processes holding the pod's connections to brokers (I/O).

Called by the sidecar's loop with the socket inodes of the pod's connections to brokers
(the socket view's). At most every `interval_seconds` it finds which processes hold
those sockets (`/proc/<pid>/fd`, as `sockets.owners` does) and reads, once per process
(a process is its PID and start time), what tells its Kafka client's release
(`releases.read`): a Go executable's build information (`/proc/<pid>/exe`), a Java
command line's classpath (`/proc/<pid>/cmdline`, `environ`, a `dir/*` entry listed
through `/proc/<pid>/root`), a Node script's `node_modules/kafkajs/package.json` (looked
for from the script's folder up, through `/proc/<pid>/root`), a Python process's
confluent-kafka wheel (`/proc/<pid>/maps`, then its site-packages listing).

No capability: reading another process's fd links, executable, root and maps needs the
same user (the sidecar runs as the executor's, docs/threat-model.md) and, in a pod, a
shared process namespace. What cannot be read is left out (nothing is sighted), never an
error; the sidecar's own process is never read. Every read is bounded: an executable
larger than `MAX_EXECUTABLE_BYTES` is not scanned.
"""

from __future__ import annotations

import mmap
import os
from collections.abc import Callable, Collection
from pathlib import Path, PurePosixPath

from hangwatch_sidecar.releases.read import (
    MAX_TEXT,
    Sighting,
    classpath_of,
    go_modules,
    java_classpath,
    package_json,
    python_dist_info,
)
from hangwatch_sidecar.sockets.owners import PROC, socket_inodes

MAX_EXECUTABLE_BYTES = 512 << 20
"""A larger executable is not scanned for Go build information."""
MAX_PROCESSES = 256
"""Processes read per survey at most."""
MAX_LISTED = 4096
"""Entries of one directory listed at most (a classpath's `dir/*`, a site-packages)."""
MAX_PARENTS = 32
"""Folders walked up from a Node script looking for node_modules/kafkajs."""
ELF_MAGIC = b"\x7fELF"


def _start_time(proc: Path, pid: int) -> str | None:
    """The process's start time (`/proc/<pid>/stat` field 22): with its PID, its identity."""
    try:
        stat = (proc / str(pid) / "stat").read_text(errors="replace")
        return stat.rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None


def _read(path: Path, limit: int = MAX_TEXT) -> bytes | None:
    try:
        with path.open("rb") as file:
            return file.read(limit)
    except OSError:
        return None


def _listing(path: Path) -> list[str]:
    try:
        with os.scandir(path) as entries:
            return [e.name for _, e in zip(range(MAX_LISTED), entries, strict=False)]
    except OSError:
        return []


def _inside(root: Path, path: str) -> Path:
    """`path` (absolute, as the process sees it) under the process's root."""
    return root.joinpath(*PurePosixPath(path).parts[1:])


def go_sightings(proc: Path, pid: int) -> list[Sighting]:
    exe = proc / str(pid) / "exe"
    try:
        with exe.open("rb") as file:
            size = os.fstat(file.fileno()).st_size
            if size > MAX_EXECUTABLE_BYTES or file.read(4) != ELF_MAGIC:
                return []
            with mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ) as data:
                return go_modules(data, f"process {pid} (Go build information)")
    except (OSError, ValueError):
        return []


def java_sightings(proc: Path, pid: int, argv: list[str]) -> list[Sighting]:
    environ = (_read(proc / str(pid) / "environ") or b"").decode("utf-8", "replace")
    entries = classpath_of(argv, environ.split("\0"))
    root = proc / str(pid) / "root"
    names = list(entries)
    for entry in entries:
        if entry.endswith("/*") and entry.startswith("/"):
            names += _listing(_inside(root, entry[:-2]))
    return java_classpath(names, f"process {pid} (Java classpath)")


def node_sightings(proc: Path, pid: int, argv: list[str]) -> list[Sighting]:
    script = next((a for a in argv[1:] if not a.startswith("-")), None)
    if script is None:
        return []
    try:
        cwd = os.readlink(proc / str(pid) / "cwd")
    except OSError:
        return []
    where = PurePosixPath(cwd, script).parent
    root = proc / str(pid) / "root"
    for folder in [where, *where.parents][:MAX_PARENTS]:
        found = _read(_inside(root, str(folder / "node_modules" / "kafkajs" / "package.json")))
        if found is not None:
            return package_json(found, f"process {pid} (kafkajs package.json)")
    return []


def python_sightings(proc: Path, pid: int) -> list[Sighting]:
    maps = (_read(proc / str(pid) / "maps", 1 << 20) or b"").decode("utf-8", "replace")
    for line in maps.splitlines():
        path = line.split(maxsplit=5)[5] if len(line.split(maxsplit=5)) == 6 else ""
        marker = path.find("/confluent_kafka")
        if marker > 0 and path.startswith("/"):
            listing = _listing(_inside(proc / str(pid) / "root", path[:marker]))
            return python_dist_info(listing, f"process {pid} (confluent-kafka wheel)")
    return []


def process_sightings(proc: Path, pid: int) -> list[Sighting]:
    """The Kafka client releases one process shows (none when it cannot be read)."""
    raw = _read(proc / str(pid) / "cmdline") or b""
    argv = [a.decode("utf-8", "replace") for a in raw.split(b"\0") if a]
    program = PurePosixPath(argv[0]).name if argv else ""
    if program.startswith("java"):
        return java_sightings(proc, pid, argv)
    if program in ("node", "nodejs"):
        return node_sightings(proc, pid, argv)
    if program.startswith("python"):
        return python_sightings(proc, pid)
    return go_sightings(proc, pid)


class ProcessReleases:
    """The releases of the processes holding the pod's connections to brokers, surveyed
    at most every `interval_seconds`, each process read once."""

    def __init__(
        self,
        interval_seconds: float,
        clock: Callable[[], float],
        proc: Path = PROC,
    ) -> None:
        self.interval_seconds = interval_seconds
        self.clock = clock
        self.proc = proc
        self._read: dict[tuple[int, str], tuple[Sighting, ...]] = {}
        self._surveyed_at: float | None = None
        self._latest: tuple[Sighting, ...] = ()

    def sightings(self, inodes: Collection[int]) -> tuple[Sighting, ...]:
        """The releases seen in the processes holding `inodes` (the latest survey's)."""
        now = self.clock()
        due = self._surveyed_at is None or now - self._surveyed_at >= self.interval_seconds
        if not inodes or not due:
            return self._latest
        self._surveyed_at = now
        wanted = set(inodes)
        me = os.getpid()
        found: dict[tuple[int, str], tuple[Sighting, ...]] = {}
        try:
            pids = [int(e.name) for e in os.scandir(self.proc) if e.name.isdigit()]
        except OSError:
            return self._latest
        for pid in pids[:MAX_PROCESSES]:
            if pid == me:
                continue
            try:
                held = socket_inodes(self.proc / str(pid) / "fd")
            except OSError:
                continue  # another user's, or gone
            if not held & wanted:
                continue
            start = _start_time(self.proc, pid)
            if start is None:
                continue
            key = (pid, start)
            found[key] = self._read.get(key) or tuple(process_sightings(self.proc, pid))
        self._read = found
        self._latest = tuple(s for seen in found.values() for s in seen)
        return self._latest
