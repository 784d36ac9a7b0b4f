"""A Kubernetes API emulator (kmock) in a background thread, and the operator run against it.

Not a test module. `EmulatedCluster` serves kmock's KubernetesEmulator over HTTP on
127.0.0.1 from its own event loop, with the resources the operator touches declared
(pods, namespaces, events, CRDs, mutating webhook configurations and the
ProducerHealthPolicy resource read from `crds/`) and a `/version` answer of our choice.
`running_operator` starts the real operator as a separate process, exactly as a
Deployment would (`kopf run -m hangwatch_operator.webhook`, settings from
`HANGWATCH_OPERATOR_*`, the cluster from `KUBECONFIG`), and stops it with SIGTERM.
Waiting is bounded and on observable facts (an object appears, a log line appears),
never on elapsed time.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, Self

import kmock

from hangwatch.child_processes import stop_process
from hangwatch_testing.structural import crd
from hangwatch_testing.waiting import wait_for

WAIT_SECONDS = 30.0
"""Upper bound for any wait on the operator; a healthy run needs about a second."""


class EmulatedCluster:
    """kmock's Kubernetes emulator on a background event loop; use as a context manager."""

    def __init__(self, *, minor_version: int = 30) -> None:
        self.minor_version = minor_version
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._stop: asyncio.Event | None = None
        self._thread = threading.Thread(target=self._run, name="kmock", daemon=True)
        self._emulator: kmock.KubernetesEmulator | None = None
        self.url = ""

    def __enter__(self) -> Self:
        self._thread.start()
        if not self._ready.wait(WAIT_SECONDS):
            raise RuntimeError("the Kubernetes emulator did not start")
        return self

    def __exit__(self, *_: object) -> None:
        if self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(WAIT_SECONDS)
        self._loop.close()

    def _run(self) -> None:
        self._loop.run_until_complete(self._serve())

    async def _serve(self) -> None:
        self._stop = asyncio.Event()
        async with kmock.KubernetesEmulator() as emulator, kmock.Server(emulator) as server:
            self._declare(emulator)
            self._emulator, self.url = emulator, str(server.url).rstrip("/")
            self._ready.set()
            await self._stop.wait()

    def _declare(self, emulator: kmock.KubernetesEmulator) -> None:
        verbs = {"list", "watch", "get", "create", "patch", "update", "delete"}
        for key, kind, namespaced in [
            ("v1/pods", "Pod", True),
            ("v1/namespaces", "Namespace", False),
            ("v1/events", "Event", True),
            (
                "apiextensions.k8s.io/v1/customresourcedefinitions",
                "CustomResourceDefinition",
                False,
            ),
            (
                "admissionregistration.k8s.io/v1/mutatingwebhookconfigurations",
                "MutatingWebhookConfiguration",
                False,
            ),
        ]:
            emulator.resources[key] = kmock.ResourceInfo(
                kind=kind, namespaced=namespaced, verbs=verbs
            )
        spec, names = crd()["spec"], crd()["spec"]["names"]
        version = spec["versions"][0]
        emulator.resources[f"{spec['group']}/{version['name']}/{names['plural']}"] = (
            kmock.ResourceInfo(
                kind=names["kind"],
                singular=names["singular"],
                namespaced=spec["scope"] == "Namespaced",
                verbs=verbs,
                shortnames=names["shortNames"],
                categories=names["categories"],
                subresources=set(version["subresources"]),
            )
        )
        emulator.objects[
            "apiextensions.k8s.io/v1/customresourcedefinitions", None, crd()["metadata"]["name"]
        ] = crd()
        emulator["get", re.compile(r"^/version/?$")] << {
            "major": "1",
            "minor": str(self.minor_version),
            "gitVersion": f"v1.{self.minor_version}.2",
            "gitCommit": "39683505b630ff2121012f3c5b16215a1449d5ed",
            "gitTreeState": "clean",
            "buildDate": "2024-06-11T20:21:00Z",
            "goVersion": "go1.22.4",
            "compiler": "gc",
            "platform": "linux/amd64",
        }

    def _call(self, fn: Callable[[kmock.KubernetesEmulator], Any]) -> Any:
        """Run `fn(emulator)` on the emulator's own loop (it is not thread-safe)."""

        async def call() -> Any:
            assert self._emulator is not None
            return fn(self._emulator)

        return asyncio.run_coroutine_threadsafe(call(), self._loop).result(WAIT_SECONDS)

    def put(self, resource: str, namespace: str | None, name: str, body: dict[str, Any]) -> None:
        def put(emulator: kmock.KubernetesEmulator) -> None:
            emulator.objects[resource, namespace, name] = body

        self._call(put)

    def get(self, resource: str, namespace: str | None, name: str) -> dict[str, Any] | None:
        def get(emulator: kmock.KubernetesEmulator) -> dict[str, Any] | None:
            key = (kmock.resource(resource), namespace, name)
            if key not in emulator.objects or emulator.objects[key].deleted:
                return None
            copied: dict[str, Any] = json.loads(json.dumps(emulator.objects[key].raw))
            return copied

        result: dict[str, Any] | None = self._call(get)
        return result

    def write_kubeconfig(self, path: Path) -> Path:
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "emulator", "cluster": {"server": self.url}}],
            "users": [{"name": "operator", "user": {"token": "emulator-token"}}],
            "contexts": [
                {"name": "emulator", "context": {"cluster": "emulator", "user": "operator"}}
            ],
            "current-context": "emulator",
        }
        path.write_text(json.dumps(config))
        return path


@dataclass
class OperatorRun:
    process: subprocess.Popen[bytes]
    log_path: Path
    wait_seconds: float = WAIT_SECONDS
    """How long `wait_for` waits (tests/kube waits longer on a real API server)."""

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def wait_for(self, what: str, predicate: Callable[[], Any]) -> Any:
        """Poll `predicate` until truthy; fail with the operator's log if it never is."""
        return wait_for(
            predicate,
            self.wait_seconds,
            f"the operator to get to: {what}",
            interval=0.02,
            give_up=lambda: self.process.poll() is not None,
            context=lambda: f"--- operator log ---\n{self.log()}",
        )

    def wait_for_log(self, text: str) -> None:
        self.wait_for(f"log line {text!r}", lambda: text in self.log())


class Kubeconfigured(Protocol):
    """A cluster an operator process can be pointed at (the emulator, a real API server)."""

    def write_kubeconfig(self, path: Path) -> Path: ...


@contextmanager
def operator_process(
    cluster: Kubeconfigured,
    workdir: Path,
    settings: dict[str, Any],
    command: list[str],
    stop_seconds: float = WAIT_SECONDS,
) -> Iterator[OperatorRun]:
    """`command` (an operator) as a process against `cluster`: `settings` as
    HANGWATCH_OPERATOR_* variables (the caller's own left out), its output in
    `workdir/operator.log`; stopped (SIGTERM, then SIGKILL after `stop_seconds`)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("HANGWATCH_OPERATOR_")}
    env["KUBECONFIG"] = str(cluster.write_kubeconfig(workdir / "kubeconfig"))
    env |= {f"HANGWATCH_OPERATOR_{k.upper()}": str(v) for k, v in settings.items()}
    log_path = workdir / "operator.log"
    with log_path.open("wb") as log:
        process = subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT)
        try:
            yield OperatorRun(process, log_path)
        finally:
            stop_process(process, stop_seconds)


@contextmanager
def running_operator(
    cluster: EmulatedCluster,
    workdir: Path,
    settings: dict[str, Any],
    *modules: str,
    verbose: bool = True,
) -> Iterator[OperatorRun]:
    """The operator as a process against `cluster`, `settings` as HANGWATCH_OPERATOR_* vars
    (`modules`: more kopf handler modules to load; `verbose`: log at DEBUG, not INFO)."""
    command = [sys.executable, "-m", "kopf", "run", "--standalone", "--all-namespaces"]
    command += ["--verbose"] if verbose else []
    command += ["-m", "hangwatch_operator.webhook"]
    command += [arg for module in modules for arg in ("-m", module)]
    with operator_process(cluster, workdir, settings, command) as run:
        yield run
