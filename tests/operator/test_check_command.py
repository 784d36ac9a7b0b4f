"""`hangwatch check` as a process, where no cluster is needed to tell the outcome.

Covers: a kubeconfig that cannot be used is one line and exit 3; an API server that
does not answer (a port nothing listens on) is one line naming it and exit 2, before
any check is printed. What the checks say about real installs is tests/node's
(test_install_check.py); their judgement is test_install_checks.py's.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import yaml

from hangwatch.contracts import ExitCode
from hangwatch_testing.ports import free_port
from hangwatch_testing.processes import run_hangwatch


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "KUBECONFIG"}
    return run_hangwatch("check", *args, timeout=120, env=env)


def test_an_unusable_kubeconfig_is_one_line_and_exit_3(tmp_path: Path) -> None:
    broken = tmp_path / "kubeconfig"
    broken.write_text("clusters: [this is not a kubeconfig\n")
    for path in (str(broken), str(tmp_path / "absent")):
        done = _run("--kubeconfig", path)
        assert done.returncode == ExitCode.USAGE, done.stderr
        assert done.stdout == ""
        assert len(done.stderr.strip().splitlines()) == 1, done.stderr
        assert done.stderr.startswith("hangwatch check: error: no usable Kubernetes credentials")


def test_an_api_server_that_does_not_answer_is_exit_2(tmp_path: Path) -> None:
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {"name": "c", "cluster": {"server": f"https://127.0.0.1:{free_port('127.0.0.1')}"}}
        ],
        "users": [{"name": "u", "user": {"token": "t"}}],
        "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
        "current-context": "x",
    }
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump(config))
    done = _run("--kubeconfig", str(path), "--timeout-seconds", "2", "-o", "json")
    assert done.returncode == ExitCode.UNAVAILABLE, done.stderr
    assert done.stdout == ""
    [line] = done.stderr.strip().splitlines()
    assert "the API server does not answer" in line and "Traceback" not in line
