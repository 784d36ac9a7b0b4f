"""Reads the Python stacks of the executor's Python processes with py-spy (I/O).

Which processes: with a narrowed socket view (`--socket-process`), the Python processes
of that process tree (a PySpark executor's daemon and workers descend from its JVM);
otherwise every Python process of the PID namespace the sidecar sees, less its own tree.
In a pod that needs `shareProcessNamespace: true` (always set by the operator) and
`CAP_SYS_PTRACE` (granted only when the policy's opt-in `processView` is on and the
namespace's Pod Security level is privileged: see docs/threat-model.md). A process is
Python when its command line's program is named python*. At most `MAX_PROCESSES` are
sampled, each with `py-spy dump --native --json` (it pauses the process for the few
milliseconds of the read), concurrently, each bounded by a timeout. Any failure makes
the sample unavailable with a one-line reason, so the verdict engine judges without it
(silence then stays `producer_silent`).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from concurrent.futures import Executor
from pathlib import Path

from hangwatch_sidecar.pystacks.types import StackDumpError, StackView, classify, parse_dump
from hangwatch_sidecar.sockets.owners import (
    PROC,
    ProcessRoot,
    ProcessTreeError,
    command_lines,
    process_tree,
)

MAX_PROCESSES = 8
PY_SPY = "py-spy"


def _program(cmdline: bytes) -> str:
    return os.path.basename(cmdline.split(b"\0", 1)[0].decode(errors="replace"))


def python_processes(root: ProcessRoot | None, proc: Path = PROC) -> list[int]:
    """PIDs of the Python processes to sample (lowest first), the sidecar's own tree left out."""
    me = os.getpid()
    if root is not None:
        candidates = process_tree(root, proc)
    else:
        candidates = frozenset(int(e.name) for e in os.scandir(proc) if e.name.isdigit())
        with contextlib.suppress(ProcessTreeError):
            candidates -= process_tree(ProcessRoot(pid=me), proc)
    found = []
    for pid, cmdline in command_lines(sorted(candidates), proc):
        if _program(cmdline).startswith("python"):
            found.append(pid)
    return found


class StackReader:
    """Samples the stacks of the executor's Python processes."""

    def __init__(
        self,
        root: ProcessRoot | None,
        pool: Executor,
        timeout_seconds: float,
        clock: Callable[[], float],
        py_spy: str | None = None,
    ) -> None:
        self.root, self.pool, self.timeout, self.clock = root, pool, timeout_seconds, clock
        self.py_spy = py_spy or shutil.which(PY_SPY) or _beside_python()

    def _dump(self, pid: int) -> bytes:
        assert self.py_spy is not None  # sample() returns first without it
        done = subprocess.run(
            [self.py_spy, "dump", "--pid", str(pid), "--native", "--json"],
            capture_output=True,
            timeout=self.timeout,
            check=False,
        )
        if done.returncode != 0:
            why = (done.stderr or done.stdout).decode(errors="replace").strip().splitlines()
            raise StackDumpError(f"py-spy could not read pid {pid}: {why[0] if why else '?'}")
        return done.stdout

    def sample(self) -> StackView:
        at = self.clock()
        if not self.py_spy:
            return StackView(at, error="py-spy is not installed (pip install py-spy)")
        try:
            pids = python_processes(self.root)[:MAX_PROCESSES]
        except ProcessTreeError as exc:
            return StackView(at, error=str(exc))
        if not pids:
            return StackView(at, error="no Python process of the executor is visible")
        futures = {pid: self.pool.submit(self._dump, pid) for pid in pids}
        threads = []
        errors = []
        for pid, future in futures.items():
            try:
                threads += [classify(pid, t) for t in parse_dump(future.result())]
            except subprocess.TimeoutExpired:
                errors.append(f"py-spy timed out on pid {pid}")
            except (StackDumpError, OSError) as exc:
                errors.append(str(exc)[:300])
        if errors and not threads:
            return StackView(at, processes=len(pids), error=errors[0] + _hint(errors[0]))
        return StackView(at, tuple(threads), len(pids) - len(errors))


def _beside_python() -> str | None:
    """py-spy installed by pip next to this interpreter (a virtualenv not on PATH)."""
    candidate = Path(sys.executable).with_name(PY_SPY)
    return str(candidate) if candidate.exists() else None


def _hint(error: str) -> str:
    if "ermission" in error or "Operation not permitted" in error:
        return " (needs CAP_SYS_PTRACE and a shared process namespace)"
    return ""
