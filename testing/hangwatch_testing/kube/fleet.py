"""Executor pods "running" on the real API server, each with a sidecar on loopback.

There is no kubelet, so the test (or benchmark) plays its parts: the scheduler's
(bind the pod to a Node through the `binding` subresource) and the kubelet's (report
`Running` and a pod IP through `pods/status`). Each pod's IP is its own loopback
address (127.a.b.N), where a real sidecar HTTP server (`FakeSidecar`: the sidecar's
own `StatusServer` with a verdict the test sets) listens on the port the webhook
injected, so the operator polls `http://<pod IP>:<port>/status` exactly as in a cluster.
`TaintingController` is another controller adding taints to a node as fast as it can
(read-modify-write with resourceVersion, retried on conflicts), to race the operator.
"""

from __future__ import annotations

import errno
import json
import random
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from kubernetes import client

from hangwatch.contracts import Verdict
from hangwatch_testing.kube.cluster import LocalCluster
from hangwatch_testing.kube.release import admin_api
from hangwatch_testing.kube.spark import ensure_namespace, submit_application
from hangwatch_testing.ports import listeners
from hangwatch_testing.remediation_cluster import BROKERS, FAST, FakeSidecar
from hangwatch_testing.structural import policy_document


def ensure_node(cluster: LocalCluster, name: str) -> None:
    with admin_api(cluster) as api:
        try:
            client.CoreV1Api(api).create_node(
                client.V1Node(metadata=client.V1ObjectMeta(name=name, labels={"test": "kube"}))
            )
        except client.ApiException as exc:
            if exc.status != 409:
                raise


def policy_body(namespace: str, **spec: Any) -> dict[str, Any]:
    """A ProducerHealthPolicy polling every 2 s (the CRD's smallest probe interval)."""
    return policy_document(namespace, "writers", list(BROKERS), **(FAST | spec))


def wait_for_policy_status(
    cluster: LocalCluster, namespace: str, name: str, seconds: float = 30.0
) -> None:
    """Until the operator has written the policy's status: kopf runs a resource's index
    handlers before its other handlers, so the webhook's index then knows the policy."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        done = cluster.kubectl("get", "phpolicy", name, "-n", namespace, "-o", "json", check=False)
        if done.returncode == 0 and json.loads(done.stdout).get("status"):
            return
        time.sleep(0.2)
    raise AssertionError(f"the operator never wrote the status of policy {namespace}/{name}")


@dataclass
class RunningPod:
    name: str
    uid: str
    node: str
    ip: str
    sidecar: FakeSidecar


@dataclass
class Fleet:
    """One namespace: a policy, a Spark application's executors, their sidecars."""

    cluster: LocalCluster
    namespace: str
    pods: list[RunningPod] = field(default_factory=list)

    def close(self) -> None:
        for pod in self.pods:
            pod.sidecar.close()

    def pod(self, index: int) -> RunningPod:
        return self.pods[index]

    def stored(self, name: str) -> dict[str, Any] | None:
        done = self.cluster.kubectl(
            "get", "pod", name, "-n", self.namespace, "-o", "json", check=False
        )
        return json.loads(done.stdout) if done.returncode == 0 else None


def launch(
    cluster: LocalCluster,
    namespace: str,
    nodes: list[str],
    sidecar_port: int,
    policy_spec: dict[str, Any] | None = None,
    *,
    policy: str = "writers",
    apply_policy: bool = True,
) -> Fleet:
    """Policy first (the webhook injects only pods a policy covers; `apply_policy=False`
    when `policy` is already there), then one executor per entry of `nodes`, bound
    there, Running, healthy sidecar at its own pod IP."""
    ensure_namespace(cluster, namespace)
    if apply_policy:
        body = policy_body(namespace, **(policy_spec or {}))
        cluster.kubectl("apply", "-f", "-", stdin=json.dumps(body))
    wait_for_policy_status(cluster, namespace, policy)
    _, executors = submit_application(cluster, namespace, len(nodes), suffix=f"-{namespace}")
    fleet = Fleet(cluster, namespace)
    try:
        for executor, node in zip(executors, nodes, strict=True):
            assert executor["metadata"]["labels"].get("hangwatch.dev/policy") == policy, executor
            fleet.pods.append(run_pod(cluster, executor, node, sidecar_port))
    except BaseException:
        fleet.close()  # the sidecars started so far: nobody else holds this fleet yet
        raise
    return fleet


_POD_IPS = (
    f"127.{a}.{b}.{c}"
    for a in range(random.randint(10, 60), 100)
    for b in range(256)
    for c in range(2, 255)
)
"""Pod IPs, each handed out once per test process (random ones collided: 240 pods in
6.4 million addresses meet 1 time in 200), from a random start so that two processes
rarely share a range."""


def _listening_sidecar(port: int, attempts: int = 5) -> tuple[str, FakeSidecar]:
    """A started `FakeSidecar` on `port` at a fresh pod IP. An address someone else holds
    is passed over; a port held on every address fails naming its listeners."""
    for _ in range(attempts):
        ip = next(_POD_IPS)
        try:
            return ip, FakeSidecar(host=ip, listen_port=port).start()
        except OSError as exc:
            if exc.errno != errno.EADDRINUSE:
                raise
    raise AssertionError(
        f"port {port} in use at {attempts} fresh pod IPs; its listeners: {listeners(port)}"
    )


def run_pod(
    cluster: LocalCluster, stored: dict[str, Any], node: str, sidecar_port: int
) -> RunningPod:
    """The stored pod bound to `node` and reported Running at a fresh loopback pod IP,
    where a healthy `FakeSidecar` listens on `sidecar_port` (close it: `Fleet.close`)."""
    meta = stored["metadata"]
    namespace, name = meta["namespace"], meta["name"]
    ip, sidecar = _listening_sidecar(sidecar_port)
    with admin_api(cluster) as api:
        core = client.CoreV1Api(api)
        binding = client.V1Binding(
            metadata=client.V1ObjectMeta(name=name),
            target=client.V1ObjectReference(api_version="v1", kind="Node", name=node),
        )
        core.create_namespaced_pod_binding(name, namespace, binding, _preload_content=False)
        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        status = {
            "phase": "Running",
            "podIP": ip,
            "podIPs": [{"ip": ip}],
            "hostIP": "127.0.0.1",
            "startTime": now,
            "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": now}],
        }
        core.patch_namespaced_pod_status(name, namespace, {"status": status})
    return RunningPod(name, meta["uid"], node, ip, sidecar)


def set_verdicts(pods: list[RunningPod], verdict: Verdict, *, reachable: bool = True) -> None:
    for pod in pods:
        pod.sidecar.set(verdict, reachable=reachable, reasons=(f"{pod.name}: {verdict}",))


@dataclass
class TaintingController:
    """Adds taints `other.example/t<N>` to `node` back to back until stopped."""

    cluster: LocalCluster
    node: str
    added: list[str] = field(default_factory=list)
    conflicts: int = 0
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> TaintingController:
        self._thread = threading.Thread(target=self._run, daemon=True, name="tainter")
        self._thread.start()
        return self

    def _run(self) -> None:
        with admin_api(self.cluster) as api:
            core = client.CoreV1Api(api)
            while not self._stop.is_set() and len(self.added) < 400:
                node = core.read_node(self.node)
                key = f"other.example/t{len(self.added)}"
                spec = node.spec
                assert spec is not None, f"node {self.node} has no spec"
                spec.taints = [
                    *(spec.taints or []),
                    client.V1Taint(key=key, effect="PreferNoSchedule"),
                ]
                try:
                    core.replace_node(self.node, node)  # carries resourceVersion: conditional
                except client.ApiException as exc:
                    if exc.status != 409:
                        raise
                    self.conflicts += 1
                    continue
                self.added.append(key)
                time.sleep(random.uniform(0.0, 0.02))  # busy, not a 100 % duty cycle

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(30)
