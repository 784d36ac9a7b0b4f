"""Which sockets one process tree holds: the socket view narrowed to one executor's processes.

Used by `sockets.reader` when `--socket-process` is set. Its value names the root of a
process tree: a PID, or text of the root's command line (every process whose command
line contains it is a root, the sidecar itself excepted). The tree is the roots and
their descendants, found from the parent PIDs in `/proc/<pid>/stat`; its sockets are
the `socket:[inode]` links in `/proc/<pid>/fd`, matched to the inode sock_diag reports
per connection. A Spark executor's Python workers are children of the pyspark daemon,
itself a child of the executor JVM, so the JVM's PID covers a PySpark task's producer.

Why: executors that share one network namespace (`hangwatch demo`'s local-cluster
executors on one host, or several containers of a pod) would otherwise each see every
executor's connections as their own. Reading another process's fd links needs the
same user (or `CAP_SYS_PTRACE`) and, in a pod, `shareProcessNamespace`; a root that is
gone or unreadable is an error, so the verdict engine ignores the view that round
rather than judging an empty one.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

PROC = Path("/proc")
PID_MAX = 4_194_304
"""The kernel's largest PID (`PID_MAX_LIMIT` on 64-bit)."""
MAX_PATTERN_CHARS = 4096
"""Longest command-line text accepted (a command line is at most a page in /proc)."""
_PID = re.compile(r"^\s*[+-]?\d+\s*$")


class ProcessTreeError(Exception):
    """The tree's root is gone or unreadable (one line)."""


@dataclass(frozen=True)
class ProcessRoot:
    """The root of the process tree whose sockets the view keeps: a PID or command-line text."""

    pid: int | None = None
    pattern: str = ""

    def __str__(self) -> str:
        return f"pid {self.pid}" if self.pid is not None else f"command line {self.pattern!r}"


def parse_process_root(text: str) -> ProcessRoot | None:
    """`--socket-process`'s value: None when empty, a PID when it is a number, else text of
    the root's command line; ValueError (one line) for anything else."""
    if text == "":
        return None
    if _PID.match(text):
        pid = int(text)
        if not 1 <= pid <= PID_MAX:
            raise ValueError(f"a PID must be 1..{PID_MAX}, got {text.strip()}")
        return ProcessRoot(pid=pid)
    if not text.strip():
        raise ValueError("blank text would match every process: give a PID or a command line")
    if "\0" in text:
        raise ValueError("a command line text cannot hold a NUL character")
    if len(text) > MAX_PATTERN_CHARS:
        raise ValueError(f"at most {MAX_PATTERN_CHARS} characters, got {len(text)}")
    return ProcessRoot(pattern=text)


def _parent(stat: str) -> int | None:
    """The parent PID from the text of /proc/<pid>/stat (after the command, which may hold
    spaces and parentheses), None if malformed."""
    try:
        return int(stat.rsplit(")", 1)[1].split()[1])
    except (IndexError, ValueError):
        return None


def _processes(proc: Path) -> dict[int, int]:
    """Every process's parent PID."""
    parents = {}
    for entry in os.scandir(proc):
        if not entry.name.isdigit():
            continue
        try:
            parent = _parent(Path(entry.path, "stat").read_text(errors="replace"))
        except OSError:
            continue  # exited meanwhile
        if parent is not None:
            parents[int(entry.name)] = parent
    return parents


def command_lines(pids: Iterable[int], proc: Path = PROC) -> Iterator[tuple[int, bytes]]:
    """Each process's raw command line (NUL-separated), the sidecar's own and processes
    that exited meanwhile left out."""
    me = os.getpid()
    for pid in pids:
        if pid == me:
            continue
        try:
            yield pid, (proc / str(pid) / "cmdline").read_bytes()
        except OSError:
            continue


def _roots(root: ProcessRoot, parents: dict[int, int], proc: Path) -> set[int]:
    if root.pid is not None:
        return {root.pid} if root.pid in parents else set()
    needle = root.pattern.encode()
    found = set()
    for pid, cmdline in command_lines(parents, proc):
        if needle in cmdline.replace(b"\0", b" "):
            found.add(pid)
    return found


def process_tree(root: ProcessRoot, proc: Path = PROC) -> frozenset[int]:
    """The roots' PIDs and all their descendants'; ProcessTreeError when no root exists."""
    parents = _processes(proc)
    tree = _roots(root, parents, proc)
    if not tree:
        raise ProcessTreeError(f"socket view narrowed to {root}: no such process")
    children: dict[int, list[int]] = {}
    for pid, parent in parents.items():
        children.setdefault(parent, []).append(pid)
    todo = list(tree)
    while todo:
        for child in children.get(todo.pop(), ()):
            if child not in tree:
                tree.add(child)
                todo.append(child)
    return frozenset(tree)


def socket_inodes(fd_dir: Path) -> frozenset[int]:
    """Inodes of the sockets held in one fd directory (`/proc/<pid>/fd`); OSError if the
    directory cannot be listed (gone, or another user's without ptrace rights)."""
    inodes = set()
    for entry in os.scandir(fd_dir):
        try:
            target = os.readlink(entry.path)
        except OSError:
            continue  # closed meanwhile
        if target.startswith("socket:[") and target.endswith("]"):
            inodes.add(int(target[8:-1]))
    return frozenset(inodes)


def tree_socket_inodes(root: ProcessRoot, proc: Path = PROC) -> frozenset[int]:
    """Inodes of every socket the tree's processes hold. ProcessTreeError when no root
    exists or a root's descriptors cannot be read (a descendant that exits meanwhile is
    skipped)."""
    pids = process_tree(root, proc)
    inodes: set[int] = set()
    for pid in pids:
        try:
            inodes |= socket_inodes(proc / str(pid) / "fd")
        except OSError as exc:
            if pid != root.pid and not isinstance(exc, PermissionError):
                continue  # a descendant that exited meanwhile
            why = exc.strerror or type(exc).__name__
            raise ProcessTreeError(
                f"socket view narrowed to {root}: cannot read the descriptors of pid {pid} ({why})"
            ) from None
    return frozenset(inodes)
