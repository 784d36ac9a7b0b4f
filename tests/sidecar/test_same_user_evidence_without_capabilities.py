"""Why the injected sidecar runs as the executor's user: same-user evidence needs no capability.

The webhook runs the sidecar as the executor container's declared user and group
(docs/threat-model.md). Checked here with real processes, as root dropping to two
unprivileged users with every capability gone (`setresuid` clears them), the way the
sidecar runs with `drop: [ALL]` and `allowPrivilegeEscalation: false`:

- a process of the executor's user that is not its ancestor (the sidecar's relation
  to the executor in a shared process namespace) reads the executor's sockets through
  `/proc/<pid>/fd` (the socket view narrowed to one process tree,
  `sockets.owners.tree_socket_inodes`) and its environment;
- a process of another user, equally without capabilities, is refused both: the
  grant comes from the user, not from anything the webhook adds.

(The socket view itself, sock_diag of the pod's own network namespace, needs no
capability and no same user: tests/sidecar/test_socket_reader.py reads another user's
connection as `nobody` with no capability.)
"""

from __future__ import annotations

import os
import signal
import socket
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from hangwatch_sidecar.sockets.owners import (
    ProcessTreeError,
    parse_process_root,
    tree_socket_inodes,
)
from tests.sidecar.unprivileged import as_user, capabilities, drop_to

EXECUTOR_UID = 65534
"""nobody: stands for Spark's 185 (any unprivileged user will do)."""
OTHER_UID = 65533

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0, reason="needs root to become two unprivileged users"
)


def _as_user(uid: int, pid: int) -> dict[str, object]:
    """In a fork dropped to `uid` with no capability: what it can read of process `pid`."""

    def read() -> dict[str, object]:
        result: dict[str, object] = {}
        try:
            root = parse_process_root(str(pid))
            assert root is not None
            result["inodes"] = sorted(tree_socket_inodes(root))
        except ProcessTreeError as exc:
            result["inodes_error"] = str(exc)
        try:
            environ = Path(f"/proc/{pid}/environ").read_bytes()
            result["secret"] = b"EXECUTOR_SECRET=s3cr3t" in environ.split(b"\0")
        except OSError as exc:
            result["environ_error"] = type(exc).__name__
        result["capabilities"] = capabilities()
        return result

    return as_user(uid, read)


def test_the_executors_user_reads_its_sockets_and_environment_without_capabilities() -> None:
    held, other_end = socket.socketpair()
    with held, other_end, executor_with(held) as (pid, inode):
        same = _as_user(EXECUTOR_UID, pid)
        assert same["capabilities"] == 0, same
        assert inode in same["inodes"], same  # type: ignore[operator]
        assert same["secret"] is True, same
        other = _as_user(OTHER_UID, pid)
        assert other["capabilities"] == 0, other
        assert "inodes" not in other and "inodes_error" in other, other
        assert other.get("environ_error") == "PermissionError", other


@contextmanager
def executor_with(held: socket.socket) -> Iterator[tuple[int, int]]:
    """A process of EXECUTOR_UID (not an ancestor of the readers) holding `held` as its
    fd 3, with a secret in its environment: (pid, the socket's inode)."""
    inode = os.fstat(held.fileno()).st_ino
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns into pytest
        try:
            os.close(read_end)
            os.dup2(held.fileno(), 3)
            drop_to(EXECUTOR_UID)
            os.write(write_end, b"ready\n")
            os.close(write_end)
            os.execve("/bin/sleep", ["/bin/sleep", "600"], {"EXECUTOR_SECRET": "s3cr3t"})
        finally:
            os._exit(1)
    os.close(write_end)
    try:
        with os.fdopen(read_end, "rb") as pipe:
            assert pipe.readline() == b"ready\n"
        cmdline = Path(f"/proc/{pid}/cmdline")
        while not cmdline.read_bytes().startswith(b"/bin/sleep"):  # exec'd: its own environ
            time.sleep(0.01)
        yield pid, inode
    finally:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
