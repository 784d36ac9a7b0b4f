"""Thread dumps of the pod's own HotSpot JVMs through the attach mechanism (the I/O edge).

No driver, no capability: HotSpot's dynamic attach is a file and a signal. The sidecar,
running as the JVM's own user and group in a pod with `shareProcessNamespace: true`,
for each JVM of the executor's process tree (`--socket-process`; otherwise every process
it sees):

1. proves the target is a HotSpot JVM that will answer before it ever signals it: same
   effective uid and gid as the sidecar (the JVM accepts only its own user's
   connections, and its trigger file must be that user's), `libjvm.so` mapped and no
   OpenJ9 library (`/proc/<pid>/maps`), SIGQUIT caught (`SigCgt` of `/proc/<pid>/status`:
   a JVM started with `-Xrs` or `-XX:+ReduceSignalUsage`, or one still starting, would
   be killed by it; JDK 24's own attach makes the same check), and neither
   `-XX:+DisableAttachMechanism` nor `-Xrs` in its command line or in the
   `JAVA_TOOL_OPTIONS` / `_JAVA_OPTIONS` / `JDK_JAVA_OPTIONS` of its environment (with
   attach disabled a SIGQUIT only prints a dump on the JVM's stdout);
2. when the JVM's attach socket `/proc/<pid>/root/tmp/.java_pid<nspid>` is not there yet
   (`<nspid>`: the JVM's pid in its own PID namespace, the last `NSpid` entry), creates
   the trigger `.attach_pid<nspid>` in the JVM's working directory (or its `/tmp`),
   sends SIGQUIT through a pidfd opened before the checks (so a recycled pid is never
   signalled), waits for the socket at most until the deadline and removes the trigger
   on every path; a JVM whose socket did not come is remembered and never signalled
   again (its pid and start time);
3. connects, sends `threaddump` in the attach protocol's version 1
   (`1\\0threaddump\\0\\0\\0\\0`), reads the result code and the text to EOF, at most
   `MAX_DUMP_BYTES`, within the deadline.

`LocalReader.read` returns a `SparkSnapshot` (source `jvm`) from the dumps of at most
`MAX_JVMS` JVMs, never raising: every failure is one line and a bounded `error_kind`.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import stat
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path

from hangwatch_sidecar.sockets.owners import PROC, ProcessRoot, ProcessTreeError, process_tree
from hangwatch_sidecar.spark.hotspot import parse_local_dump
from hangwatch_sidecar.spark.types import ProducerThread, SparkSnapshot, TaskThread

SOURCE = "jvm"
"""`SparkSnapshot.source` of a dump taken here (the driver's: `driver`)."""
MAX_JVMS = 4
"""JVMs dumped per read at most (an executor pod has one)."""
MAX_DUMP_BYTES = 8 << 20
"""Largest answer read (8 MiB): a JVM's dump is 20-200 KiB; more is refused."""
MAX_MAPS_BYTES = 32 << 20
"""Largest /proc/<pid>/maps read when looking for libjvm.so."""
REQUEST = b"1\0threaddump\0\0\0\0"
"""Protocol version 1, the command, its three (empty) arguments, each NUL-terminated."""
POLL_SECONDS = 0.05
SIGQUIT_MASK = 1 << (signal.SIGQUIT - 1)
OPTION_VARIABLES = (b"JAVA_TOOL_OPTIONS=", b"_JAVA_OPTIONS=", b"JDK_JAVA_OPTIONS=")
ERROR_KINDS = ("no_jvm", "not_attachable", "attach_refused", "timeout", "bad_answer")
"""Bounded `error_kind` values of a failed read."""


class AttachError(Exception):
    """A JVM that cannot (or must not) be attached to; `kind` is one of ERROR_KINDS."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


@dataclass(frozen=True)
class Jvm:
    """A HotSpot JVM proven attachable (see the module doc)."""

    pid: int
    nspid: int
    """Its pid in its own PID namespace: the number in its attach file names."""
    started: str
    """Its start time (/proc/<pid>/stat field 22): a pid and this name one process."""

    @property
    def key(self) -> tuple[int, str]:
        return (self.pid, self.started)


def _status(pid: int, proc: Path) -> dict[str, str]:
    text = (proc / str(pid) / "status").read_text(errors="replace")
    return {k: v.strip() for k, _, v in (line.partition(":") for line in text.splitlines())}


def _started(pid: int, proc: Path) -> str:
    fields = (proc / str(pid) / "stat").read_text(errors="replace").rsplit(")", 1)[-1].split()
    return fields[19] if len(fields) > 19 else ""


def _ids(value: str) -> list[int]:
    return [int(v) for v in value.split() if v.isdigit()]


def _maps_hotspot(pid: int, proc: Path) -> bool:
    """libjvm.so mapped and no OpenJ9 VM library: a HotSpot JVM."""
    hotspot = False
    read = 0
    with (proc / str(pid) / "maps").open("rb") as maps:
        for line in maps:
            read += len(line)
            if read > MAX_MAPS_BYTES:
                break
            if b"libj9vm" in line or b"libopenj9" in line:
                return False
            hotspot = hotspot or line.rstrip().endswith(b"/libjvm.so")
    return hotspot


def _options(pid: int, proc: Path) -> list[bytes]:
    """The JVM's options: its command line's words and its option variables' words (an
    unreadable environment counts as none: the command line still decides)."""
    words = (proc / str(pid) / "cmdline").read_bytes().split(b"\0")
    with contextlib.suppress(OSError):
        for variable in (proc / str(pid) / "environ").read_bytes().split(b"\0"):
            if variable.startswith(OPTION_VARIABLES):
                words += variable.partition(b"=")[2].split()
    return words


def _refusal(options: list[bytes]) -> str | None:
    """Why these options make a SIGQUIT unsafe or useless, else None (last setting wins)."""
    disabled = False
    for word in options:
        if word in (b"-Xrs", b"-XX:+ReduceSignalUsage"):
            return f"it runs with {word.decode()}: a SIGQUIT would stop it"
        if word == b"-XX:+DisableAttachMechanism":
            disabled = True
        elif word == b"-XX:-DisableAttachMechanism":
            disabled = False
    return "it runs with -XX:+DisableAttachMechanism" if disabled else None


def attachable(pid: int, proc: Path = PROC) -> Jvm:
    """`pid` as a Jvm once proven attachable; AttachError (one line) otherwise."""
    try:
        status = _status(pid, proc)
        started = _started(pid, proc)
    except OSError:
        raise AttachError("no_jvm", f"pid {pid} is gone") from None
    uids, gids = _ids(status.get("Uid", "")), _ids(status.get("Gid", ""))
    if len(uids) < 2 or len(gids) < 2 or (uids[1], gids[1]) != (os.geteuid(), os.getegid()):
        raise AttachError(
            "not_attachable",
            f"pid {pid} runs as uid {uids[1:2] or '?'} gid {gids[1:2] or '?'}, the sidecar as "
            f"uid {os.geteuid()} gid {os.getegid()}: a JVM answers only its own user and group",
        )
    try:
        hotspot = _maps_hotspot(pid, proc)
        refusal = _refusal(_options(pid, proc))
    except OSError as exc:
        raise AttachError(
            "not_attachable", f"cannot read pid {pid}'s maps ({exc.strerror or exc})"
        ) from None
    if not hotspot:
        raise AttachError("no_jvm", f"pid {pid} is not a HotSpot JVM (no libjvm.so mapped)")
    caught = int(status.get("SigCgt", "0") or "0", 16) & SIGQUIT_MASK
    if not caught:
        raise AttachError(
            "not_attachable",
            f"JVM pid {pid} does not catch SIGQUIT (-Xrs, or still starting): not signalled",
        )
    if refusal:
        raise AttachError("not_attachable", f"JVM pid {pid} is not attachable: {refusal}")
    nspids = _ids(status.get("NSpid", "")) or [pid]
    return Jvm(pid, nspids[-1], started)


def jvm_pids(root: ProcessRoot | None, proc: Path = PROC) -> list[int]:
    """Processes that map libjvm.so: in `root`'s tree, or every process the sidecar sees
    (its own left out); those of other users are kept (`attachable` names them)."""
    if root is not None:
        pids = sorted(process_tree(root, proc))
    else:
        pids = sorted(int(e.name) for e in os.scandir(proc) if e.name.isdigit())
    found = []
    for pid in pids:
        if pid == os.getpid():
            continue
        try:
            cmdline = (proc / str(pid) / "cmdline").read_bytes()
        except OSError:
            continue
        program = os.path.basename(cmdline.split(b"\0", 1)[0])
        mine = False
        with contextlib.suppress(OSError, AttachError):
            mine = _maps_hotspot(pid, proc)
        if mine or program == b"java":
            found.append(pid)
    return found


def _socket_at(path: Path) -> bool:
    try:
        return stat.S_ISSOCK(os.stat(path).st_mode)
    except OSError:
        return False


@contextlib.contextmanager
def _trigger(jvm: Jvm, proc: Path) -> Iterator[Path]:
    """The attach trigger file, created in the JVM's working directory (else its /tmp) as
    the sidecar's user; removed on the way out when this created it."""
    name = f".attach_pid{jvm.nspid}"
    tried = []
    for where in (proc / str(jvm.pid) / "cwd", proc / str(jvm.pid) / "root" / "tmp"):
        path = where / name
        try:
            fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY | os.O_NOFOLLOW, 0o600)
        except FileExistsError:
            yield path  # another attaching tool's: left for it to remove
            return
        except OSError as exc:
            tried.append(f"{where.name}: {exc.strerror or exc}")
            continue
        os.close(fd)
        try:
            yield path
        finally:
            with contextlib.suppress(OSError):
                os.unlink(path)
        return
    raise AttachError(
        "not_attachable",
        f"cannot create the attach trigger of JVM pid {jvm.pid} ({'; '.join(tried)})",
    )


def _signal(pidfd: int | None, pid: int) -> None:
    if pidfd is not None:
        signal.pidfd_send_signal(pidfd, signal.SIGQUIT)
    else:
        os.kill(pid, signal.SIGQUIT)


def _open_pidfd(pid: int) -> int | None:
    try:
        return os.pidfd_open(pid)
    except (AttributeError, OSError):
        return None


def _exchange(path: Path, deadline: float, clock: Callable[[], float]) -> bytes:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(max(0.01, deadline - clock()))
        sock.connect(str(path))
        sock.sendall(REQUEST)
        chunks: list[bytes] = []
        size = 0
        while True:
            sock.settimeout(max(0.01, deadline - clock()))
            chunk = sock.recv(65536)
            if not chunk:
                return b"".join(chunks)
            size += len(chunk)
            if size > MAX_DUMP_BYTES:
                raise AttachError(
                    "bad_answer", f"answer larger than {MAX_DUMP_BYTES} bytes refused"
                )
            chunks.append(chunk)


def thread_dump(
    jvm: Jvm,
    deadline: float,
    proc: Path = PROC,
    clock: Callable[[], float] = time.monotonic,
    pidfd: int | None = None,
) -> str:
    """The JVM's thread dump text; AttachError (kind `attach_refused` when SIGQUIT did not
    start its attach listener: the caller never signals it again; `not_attachable` when
    its socket refuses; `timeout`, `bad_answer`)."""
    path = proc / str(jvm.pid) / "root" / "tmp" / f".java_pid{jvm.nspid}"
    if not _socket_at(path):
        with _trigger(jvm, proc):
            _signal(pidfd, jvm.pid)
            while not _socket_at(path):
                if clock() >= deadline:
                    raise AttachError(
                        "attach_refused",
                        f"JVM pid {jvm.pid} opened no attach socket after SIGQUIT: not "
                        "signalled again",
                    )
                time.sleep(POLL_SECONDS)
    try:
        raw = _exchange(path, deadline, clock)
    except TimeoutError:
        raise AttachError(
            "timeout", f"JVM pid {jvm.pid} gave no complete thread dump in time"
        ) from None
    except OSError as exc:  # not remembered: a stale socket of an earlier JVM may go
        raise AttachError(
            "not_attachable", f"JVM pid {jvm.pid}'s attach socket: {exc.strerror or exc}"
        ) from None
    code, _, body = raw.partition(b"\n")
    if code.strip() != b"0":
        first = body.decode("utf-8", "replace").split("\n", 1)[0][:120]
        shown = "".join(c if c.isprintable() else "?" for c in code[:20].decode("utf-8", "replace"))
        raise AttachError("bad_answer", f"JVM pid {jvm.pid} answered {shown!r}: {first}")
    return body.decode("utf-8", "replace")


class LocalReader:
    """Thread dumps of the JVMs of one process tree, as Spark snapshots (source `jvm`)."""

    def __init__(
        self,
        root: ProcessRoot | None,
        timeout_seconds: float,
        clock: Callable[[], float] = time.monotonic,
        proc: Path = PROC,
    ) -> None:
        self.root, self.timeout_seconds, self.clock, self.proc = root, timeout_seconds, clock, proc
        self.application_id = ""
        self.refused: dict[tuple[int, str], str] = {}
        """JVMs whose attach listener did not start on SIGQUIT: never signalled again."""
        self.pids: tuple[int, ...] = ()
        """The JVMs dumped by the latest read."""

    def _dump(self, pid: int, deadline: float) -> tuple[str, Jvm]:
        pidfd = _open_pidfd(pid)  # before the checks: the signal can only reach this process
        try:
            jvm = attachable(pid, self.proc)
            if jvm.key in self.refused:
                raise AttachError("attach_refused", self.refused[jvm.key])
            try:
                return thread_dump(jvm, deadline, self.proc, self.clock, pidfd), jvm
            except AttachError as exc:
                if exc.kind == "attach_refused":
                    self.refused[jvm.key] = str(exc)
                raise
        finally:
            if pidfd is not None:
                os.close(pidfd)

    def read(self) -> SparkSnapshot:
        """The tasks and producer threads of every attachable JVM, as of now; an error
        snapshot when none could be dumped (the first JVM's reason)."""
        at = self.clock()
        try:
            pids = jvm_pids(self.root, self.proc)[:MAX_JVMS]
        except (ProcessTreeError, OSError) as exc:
            return self._failed(at, "no_jvm", str(exc))
        if not pids:
            where = f"in the tree of {self.root}" if self.root else "among the pod's processes"
            return self._failed(at, "no_jvm", f"no JVM {where}")
        tasks: list[TaskThread] = []
        threads: list[ProducerThread] = []
        errors: list[AttachError] = []
        dumped, executor = [], False
        for pid in pids:
            try:
                text, jvm = self._dump(pid, at + self.timeout_seconds)
            except AttachError as exc:
                errors.append(exc)
                continue
            local = parse_local_dump(text)
            dumped.append(jvm.pid)
            executor = executor or local.spark_executor
            tasks += local.dump.tasks
            # thread ids are per JVM: the pid keeps them apart in the tracker's keys
            threads += [
                replace(t, thread_id=jvm.pid << 32 | t.thread_id) for t in local.dump.threads
            ]
        self.pids = tuple(dumped)
        if not dumped:
            first = errors[0]
            return self._failed(at, first.kind, f"thread dump of the local JVM: {first}")
        return SparkSnapshot(
            at=at,
            tasks=tuple(tasks),
            threads=tuple(threads),
            read_seconds=self.clock() - at,
            source=SOURCE,
            spark_executor=executor,
        )

    def _failed(self, at: float, kind: str, message: str) -> SparkSnapshot:
        self.pids = ()
        return SparkSnapshot(
            at=at,
            error=message,
            error_kind=kind,
            read_seconds=self.clock() - at,
            source=SOURCE,
            spark_executor=False,
        )
