"""Real sidecar status servers, watched Spark pods and the whole operator on kmock.

Not a test module. `RemediationCluster` extends the webhook tests' emulator with
nodes and with listing (Events, pods). `FakeSidecar` is the sidecar's real HTTP server
(`hangwatch_sidecar.server.StatusServer`) serving a `SidecarState` the test sets
(verdict, brokers reachable or not), rebuilt fresh on every request so it never goes
stale; a `TimedSidecar` also notes when it answered. `watched_executor` is an executor
pod as the webhook leaves it (the real injection patch applied, its `hangwatch` port
pointing at the fake sidecar), scheduled on a node, Running, with a pod IP.
`running_hangwatch_operator` runs `python -m hangwatch operator --standalone
--all-namespaces` as its own process;
`remediating_operator` does so on loopback and waits until remediation started;
`poll_rounds` reads how many rounds a policy completed from the operator's metrics.
"""

from __future__ import annotations

import json
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jsonpatch
import kmock
from prometheus_client.parser import text_string_to_metric_families

from hangwatch.contracts import Reachability, Verdict
from hangwatch_operator.injection import build_sidecar_patch
from hangwatch_operator.policies import parse_policy
from hangwatch_operator.settings import InjectionMode, OperatorSettings
from hangwatch_sidecar.assessment import Assessment, PodAssessment
from hangwatch_sidecar.evidence import BrokerObservation, ClusterObservation
from hangwatch_sidecar.server import StatusServer
from hangwatch_sidecar.state import SidecarState
from hangwatch_testing.emulated_cluster import (
    EmulatedCluster,
    Kubeconfigured,
    OperatorRun,
    operator_process,
)
from hangwatch_testing.ports import free_port
from hangwatch_testing.spark_pods import driver_pod, executor_pod
from hangwatch_testing.structural import (
    apply_defaults,
    policy_document,
    validation_errors,
    version_schema,
)

POLICIES = "hangwatch.dev/v1alpha1/producerhealthpolicies"
PODS = "v1/pods"
NODES = "v1/nodes"
FAST = {
    "probes": {"probeIntervalSeconds": 2, "connectTimeoutSeconds": 1, "requestTimeoutSeconds": 1}
}
"""Policy spec override: poll every 2 s so tests and the benchmark see actions quickly."""
EVENTS = "v1/events"
BROKERS = ("kafka-0.kafka:9092", "kafka-1.kafka:9092", "kafka-2.kafka:9092")
VERBS = {"list", "watch", "get", "create", "patch", "update", "delete"}


class RemediationCluster(EmulatedCluster):
    """The emulator with nodes, and listing of stored objects."""

    def _declare(self, emulator: kmock.KubernetesEmulator) -> None:
        super()._declare(emulator)
        emulator.resources[NODES] = kmock.ResourceInfo(kind="Node", namespaced=False, verbs=VERBS)

    def items(self, resource: str, namespace: str | None = None) -> list[dict[str, Any]]:
        def collect(emulator: kmock.KubernetesEmulator) -> list[dict[str, Any]]:
            wanted = kmock.resource(resource)
            return [
                json.loads(json.dumps(obj.raw))
                for (kind, ns, _), obj in emulator.objects.items()
                if kind == wanted and (namespace is None or ns == namespace) and not obj.deleted
            ]

        found: list[dict[str, Any]] = self._call(collect)
        return found

    def create(self, resource: str, namespace: str | None, body: dict[str, Any]) -> None:
        """POST `body` through the HTTP API, so that watchers (the operator) see it."""
        group_version, plural = resource.rsplit("/", 1)
        prefix = "/api/v1" if group_version == "v1" else f"/apis/{group_version}"
        scope = f"/namespaces/{namespace}" if namespace else ""
        request = urllib.request.Request(
            f"{self.url}{prefix}{scope}/{plural}",
            data=json.dumps(body).encode(),
            headers={"Content-Type": "application/json"},
            method="POST",
        )
        with urllib.request.urlopen(request, timeout=10) as reply:
            assert reply.status in {200, 201}, reply.status

    def requests(self) -> list[tuple[str, str, dict[str, str]]]:
        """Every request the emulator served so far: (method, path, query parameters)."""

        def collect(emulator: kmock.KubernetesEmulator) -> list[tuple[str, str, dict[str, str]]]:
            return [(r.method.value, r.url.path, dict(r.params)) for r in emulator._requests]

        served: list[tuple[str, str, dict[str, str]]] = self._call(collect)
        return served

    def events(self, namespace: str, reason: str | None = None) -> list[dict[str, Any]]:
        return [e for e in self.items(EVENTS, namespace) if reason is None or e["reason"] == reason]

    def add_node(self, name: str) -> None:
        body = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}, "spec": {}}
        self.create(NODES, None, body)

    def add_policy(self, namespace: str, name: str, **spec: Any) -> dict[str, Any]:
        stored = stored_policy(namespace, name, **spec)
        self.create(POLICIES, namespace, stored)
        return stored

    def policy_status(self, namespace: str, name: str) -> dict[str, Any]:
        body = self.get(POLICIES, namespace, name) or {}
        status: dict[str, Any] = body.get("status") or {}
        return status


def stored_policy(namespace: str, name: str, **spec: Any) -> dict[str, Any]:
    """A policy as the API server stores it (CRD defaults applied, uid and generation),
    after checking that the API server would accept it (schema and CEL rules)."""
    body = policy_document(namespace, name, list(BROKERS), **spec)
    errors = validation_errors(body)
    assert not errors, errors
    stored = apply_defaults(version_schema(), body)
    stored["metadata"] |= {
        "uid": f"uid-{namespace}-{name}",
        "generation": 1,
        "resourceVersion": "1",
    }
    return dict(stored)


@dataclass
class FakeSidecar:
    """A real sidecar HTTP server whose verdict and broker reachability the test sets."""

    verdict: Verdict = Verdict.HEALTHY
    reachable: bool = True
    reasons: tuple[str, ...] = ()
    since: float = field(default_factory=lambda: time.time() - 120)
    server: StatusServer | None = None
    host: str = "127.0.0.1"
    """Listen address; tests/kube gives each pod its own loopback address (its pod IP)."""
    listen_port: int = 0

    def state(self) -> SidecarState:
        now = time.time()
        reach = Reachability.OK if self.reachable else Reachability.TIMEOUT
        brokers = tuple(
            BrokerObservation(address, reach, node_id=i, latency_ms=1.0 if self.reachable else None)
            for i, address in enumerate(BROKERS)
        )
        reasons = self.reasons or (f"test says {self.verdict}",)
        return SidecarState(
            started_ts=now - 300,
            verdict=self.verdict,
            since_ts=self.since,
            assessment=PodAssessment(Assessment(self.verdict, reasons, {}), {}),
            cluster=ClusterObservation(at=time.monotonic(), brokers=brokers, metadata_ok=True),
            cluster_ts=now,
            metadata_ts=now,
            rounds=30,
            evaluated_ts=now,
            round_seconds=0.01,
        )

    def start(self) -> FakeSidecar:
        """Serve, with a listen backlog of 256 instead of 128: benchmarks point many pods at
        one server, and a full backlog drops SYNs (1 s retransmits), which a real sidecar
        polled once per round never sees."""
        self.server = StatusServer(
            self.state,
            port=self.listen_port,
            stale_after_seconds=60,
            host=self.host,
            backlog=256,
        )
        self.server.start()
        return self

    @property
    def port(self) -> int:
        assert self.server is not None
        return self.server.port

    def close(self) -> None:
        if self.server is not None:
            self.server.close()

    def set(
        self, verdict: Verdict, *, reachable: bool = True, reasons: tuple[str, ...] = ()
    ) -> None:
        self.verdict, self.reachable, self.reasons = verdict, reachable, reasons
        self.since = time.time()


@dataclass
class TimedSidecar(FakeSidecar):
    """A FakeSidecar that notes, on `clock`, when each /status request reached it (each
    answer reads its state)."""

    clock: Callable[[], float] = time.monotonic
    answered: list[float] = field(default_factory=list)

    def state(self) -> SidecarState:
        self.answered.append(self.clock())
        return super().state()


def scrape(port: int) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """The operator's /metrics as {(sample name, sorted labels): value}."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as reply:
        text = reply.read().decode()
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def watched_executor(
    policy: dict[str, Any],
    exec_id: int,
    port: int,
    *,
    node: str = "node-a",
    role: str = "executor",
    app_id: str | None = None,
) -> dict[str, Any]:
    """A Spark pod as the webhook injected it, running on `node`, sidecar on `port`."""
    namespace = policy["metadata"]["namespace"]
    pod = driver_pod() if role == "driver" else executor_pod(exec_id, namespace=namespace)
    pod["metadata"]["namespace"] = namespace
    if role == "driver":
        pod["metadata"]["name"] += f"-{exec_id}"
    if app_id is not None:
        pod["metadata"]["labels"]["spark-app-selector"] = app_id
    ops = build_sidecar_patch(
        pod, parse_policy(policy), OperatorSettings(sidecar_port=port), InjectionMode.NATIVE
    )
    injected: dict[str, Any] = jsonpatch.apply_patch(pod, ops)
    injected["metadata"]["uid"] = f"uid-{namespace}-{injected['metadata']['name']}"
    injected["spec"]["nodeName"] = node
    injected["status"] = {"phase": "Running", "podIP": "127.0.0.1"}
    return injected


@contextmanager
def running_hangwatch_operator(
    cluster: Kubeconfigured, workdir: Path, settings: dict[str, Any], *args: str
) -> Iterator[OperatorRun]:
    """`python -m hangwatch operator --standalone --all-namespaces` against `cluster`."""
    command = [sys.executable, "-m", "hangwatch", "operator", "--standalone", "--all-namespaces"]
    with operator_process(cluster, workdir, settings, [*command, *args], 30) as run:
        yield run


def poll_rounds(metrics_port: int, policy_key: str) -> float:
    """Rounds the operator completed for `policy_key` (`namespace/name`), from /metrics."""
    key = ("hangwatch_operator_poll_rounds_total", (("policy", policy_key),))
    return scrape(metrics_port).get(key, 0.0)


STATUS_TIMEOUT_SECONDS = 1.5
"""How long the lab's operator waits for a sidecar's /status: short, so rounds with a
silent sidecar stay short, and long enough that an in-process sidecar on a machine
loaded by the rest of the suite answers in time (0.5 s was missed, seen in CI)."""


@contextmanager
def remediating_operator(
    cluster: Kubeconfigured, workdir: Path, **settings: Any
) -> Iterator[tuple[OperatorRun, int]]:
    """The operator on loopback (webhook and /metrics on 127.0.0.1, free ports, sidecars
    given `STATUS_TIMEOUT_SECONDS`), once its remediation started; yields it and its
    /metrics port."""
    metrics_port = free_port()
    loopback = {
        "webhook_listen_address": "127.0.0.1",
        "webhook_port": free_port(),
        "metrics_listen_address": "127.0.0.1",
        "metrics_port": metrics_port,
        "status_timeout_seconds": STATUS_TIMEOUT_SECONDS,
        **settings,
    }
    with running_hangwatch_operator(cluster, workdir, loopback) as operator:
        operator.wait_for_log("Activity 'start_remediation' succeeded")
        yield operator, metrics_port
