"""One real `hangwatch sidecar` process per Spark executor, as the webhook would inject.

`SidecarFleet.sync(executors)` starts a sidecar for every executor that has none —
watching that executor's telemetry directory, its socket view narrowed to the
executor's process tree (`--socket-process` the JVM's PID: its Python workers are
descendants, and the executors share this host's network namespace), Spark's view
of that executor (`--executor-id`), probing the scenario's cluster, serving
`/status` and `/metrics` on a free port, and exiting by itself once the executor's
JVM is gone (`--exit-when-gone`, the legacy-injection lifecycle) — and forgets the
sidecars of executors that are gone, as Kubernetes forgets a deleted pod. `pods()`
describes the live ones as the operator sees pods (`WatchedPod`), so the operator's
own status polling can reach them. Each sidecar's JSON log is kept in the scenario's
work directory (`sidecar-exec-<id>.log`).
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from hangwatch.child_processes import stop_process
from hangwatch_demo.spark_cluster import Executor
from hangwatch_operator.watched import WatchedPod
from hangwatch_sidecar.settings import SidecarSettings

STOP_GRACE_SECONDS = 5.0


def sidecar_argv(settings: SidecarSettings) -> list[str]:
    """The `hangwatch sidecar` command line carrying `settings` (Kafka properties aside)."""
    argv = [sys.executable, "-m", "hangwatch", "sidecar"]
    for f in dataclasses.fields(settings):
        if f.name != "kafka":
            argv += [f"--{f.name.replace('_', '-')}", str(getattr(settings, f.name))]
    return argv


def announced_port(log_path: Path) -> int | None:
    """The port a sidecar announced in its "sidecar started" log line, once it has."""
    try:
        lines = log_path.read_text(errors="replace").splitlines()
    except OSError:
        return None
    for line in lines:
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if isinstance(record, dict) and record.get("msg") == "sidecar started":
            port = record.get("port")
            return port if isinstance(port, int) else None
    return None


@dataclass
class Sidecar:
    executor: Executor
    proc: subprocess.Popen[bytes]
    log_path: Path
    port: int | None = None


class SidecarFleet:
    """The sidecars of one scenario (see the module docstring)."""

    def __init__(self, settings: SidecarSettings, work: Path, application_id: str) -> None:
        self.settings = settings
        self.work = work
        self.application_id = application_id
        self.sidecars: dict[str, Sidecar] = {}

    def sync(self, executors: list[Executor]) -> None:
        """Start sidecars for new executors; drop (and stop) those of gone executors."""
        live = {e.id: e for e in executors}
        for executor_id in [i for i in self.sidecars if i not in live]:
            stop_process(self.sidecars.pop(executor_id).proc, STOP_GRACE_SECONDS)
        for executor in executors:
            if executor.id not in self.sidecars:
                self.sidecars[executor.id] = self._start(executor)
        for sidecar in self.sidecars.values():
            if sidecar.port is None:
                sidecar.port = announced_port(sidecar.log_path)

    def _start(self, executor: Executor) -> Sidecar:
        settings = dataclasses.replace(
            self.settings,
            port=0,
            telemetry_dir=str(executor.telemetry_dir),
            exit_when_gone=executor.process_pattern,
            socket_process=str(executor.pid),
            executor_id=executor.id,
        )
        log_path = self.work / f"sidecar-exec-{executor.id}.log"
        pod = executor_pod(executor, None, self.application_id)
        # What the webhook sets in a pod: every log line and /status name the executor.
        env = dict(
            os.environ,
            HANGWATCH_POD_NAME=pod.name,
            HANGWATCH_POD_NAMESPACE=pod.namespace,
            HANGWATCH_NODE_NAME=pod.node or "local",
            HANGWATCH_EXECUTOR_ID=executor.id,
        )
        with log_path.open("ab") as log_file:
            proc = subprocess.Popen(
                sidecar_argv(settings),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=log_file,
                env=env,
            )
        return Sidecar(executor, proc, log_path)

    def pods(self) -> list[WatchedPod]:
        """The executors whose sidecar serves /status, as the operator's pods."""
        return [
            executor_pod(s.executor, s.port, self.application_id)
            for s in self.sidecars.values()
            if s.port is not None
        ]

    def ready(self) -> bool:
        return bool(self.sidecars) and all(s.port is not None for s in self.sidecars.values())

    def close(self) -> None:
        for sidecar in self.sidecars.values():
            if sidecar.proc.poll() is None:
                sidecar.proc.terminate()
        for sidecar in self.sidecars.values():
            stop_process(sidecar.proc, STOP_GRACE_SECONDS)
        self.sidecars.clear()


def executor_pod(executor: Executor, port: int | None, application_id: str) -> WatchedPod:
    """The pod an executor stands for, its sidecar on `127.0.0.1:port`."""
    return WatchedPod(
        namespace="demo",
        name=f"exec-{executor.id}",
        uid=f"{application_id}-{executor.id}",
        policy="demo",
        role="executor",
        node="local",
        ip="127.0.0.1",
        port=port or 0,
        application_id=application_id,
        executor_id=executor.id,
    )


def wait_ready(fleet: SidecarFleet, executors: list[Executor], timeout_seconds: float) -> bool:
    """Sync until every executor's sidecar announced its port (True) or the timeout."""
    deadline = time.monotonic() + timeout_seconds
    while time.monotonic() < deadline:
        fleet.sync(executors)
        if fleet.ready():
            return True
        time.sleep(0.1)
    return False
