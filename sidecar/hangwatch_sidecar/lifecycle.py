"""Legacy-mode lifecycle: exit when the executor process is gone.

On clusters without native sidecars (Kubernetes < 1.29) the webhook injects the
sidecar as a regular container with `shareProcessNamespace: true` and
`--exit-when-gone ExecutorBackend`; the pod can only complete once the
sidecar exits too. `ExecutorWatch` scans /proc for a command line containing the
pattern and reports "gone" only after it has been seen at least once, so a sidecar
that starts before the executor does not exit early.
"""

from __future__ import annotations

import os
from pathlib import Path


def process_matching(pattern: str, proc: Path = Path("/proc")) -> bool:
    """True when some process's command line contains `pattern` (other than this one)."""
    needle = pattern.encode()
    me = os.getpid()
    for entry in proc.iterdir():
        if not entry.name.isdigit() or int(entry.name) == me:
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if needle in cmdline.replace(b"\0", b" "):
            return True
    return False


class ExecutorWatch:
    """Remembers whether the executor was ever seen; `gone()` once it was and is no more."""

    def __init__(self, pattern: str, proc: Path = Path("/proc")) -> None:
        self.pattern, self.proc, self.seen = pattern, proc, False

    def gone(self) -> bool:
        if process_matching(self.pattern, self.proc):
            self.seen = True
            return False
        return self.seen
