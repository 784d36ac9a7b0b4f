"""A part of a test run as an unprivileged user with every capability gone.

In a fork of the test's own process (its modules already imported, so no interpreter
has to find them in directories only root may read) that drops to the user and group
(`setresuid` clears every capability): what the sidecar has with `drop: [ALL]` and
`allowPrivilegeEscalation: false`. Needs root.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path


def drop_to(uid: int) -> None:
    """This process becomes user and group `uid`, no supplementary group, no capability."""
    os.setgroups([])
    os.setresgid(uid, uid, uid)
    os.setresuid(uid, uid, uid)  # clears every capability


def capabilities() -> int:
    """This process's effective capability set (CapEff of /proc/self/status)."""
    status = Path("/proc/self/status").read_text().splitlines()
    (cap_eff,) = [line.split()[1] for line in status if line.startswith("CapEff:")]
    return int(cap_eff, 16)


def as_user(uid: int, read: Callable[[], dict[str, object]]) -> dict[str, object]:
    """What `read` returns (a JSON object) in a fork of this process dropped to `uid`."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns into pytest
        try:
            os.close(read_end)
            drop_to(uid)
            os.write(write_end, json.dumps(read()).encode())
        finally:
            os._exit(0)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as pipe:
        answer = pipe.read()
    os.waitpid(pid, 0)
    result: dict[str, object] = json.loads(answer)
    return result
