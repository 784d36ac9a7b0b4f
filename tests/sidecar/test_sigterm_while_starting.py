"""A sidecar stopped while it is still starting exits 0, as one stopped later does.

Covers, with the real `hangwatch` entry point in a child process: SIGTERM delivered
while the `sidecar` command's module is being loaded (the child sends it to itself at
that very point, so the timing is not left to chance) ends the process with exit code 0
and no traceback; a kubelet deleting a pod seconds after it started sends exactly that.
Before the fix the default action ended it with 143 (seen on the node tier: a pod
deleted during the sidecar's start-up, its init container terminated with 143).
The command that is not stopped cleanly on purpose (`probe`) still dies of the signal.
"""

from __future__ import annotations

import signal
import subprocess
import sys

import pytest

CHILD = """
import os, signal, sys
from hangwatch import cli
load = cli._load
def signalled_load(name):
    os.kill(os.getpid(), signal.SIGTERM)  # as the kubelet's, mid start-up
    return load(name)
cli._load = signalled_load
sys.exit(cli.main([sys.argv[1], "--help"]))
"""


def _run(command: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", CHILD, command],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_sigterm_while_the_sidecar_loads_exits_zero() -> None:
    done = _run("sidecar")
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    assert "usage" not in done.stdout  # stopped before it parsed anything


@pytest.mark.parametrize("command", ["probe"])
def test_other_commands_keep_the_default_action(command: str) -> None:
    done = _run(command)
    assert done.returncode == -signal.SIGTERM, (done.returncode, done.stderr)
