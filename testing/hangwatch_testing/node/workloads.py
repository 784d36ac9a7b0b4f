"""Spark-shaped pods, policies and the operator on the node tier's cluster.

Executor pods are the ones `hangwatch_testing.spark_pods` describes
(what Spark's KubernetesExecutorBuilder produces), owned by a real driver pod, with the
changes a run on this node needs: requests a 2-core node can satisfy (as
`spark.kubernetes.executor.request.cores` would give), the executor's ConfigMap, and,
since no Spark image is built here, the executor container runs a process from the
hangwatch image (`python3 -c ...`, its command line carrying the class name Spark's
image starts executors with) in place of Spark's executor backend. The policy
points the sidecar at `bootstrap` (an address pods can reach).
"""

from __future__ import annotations

import copy
import json
import socket
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from hangwatch_testing import waiting
from hangwatch_testing.emulated_cluster import OperatorRun
from hangwatch_testing.kube.release import HelmRelease, running_operator
from hangwatch_testing.kube.spark import as_submitted
from hangwatch_testing.node.cluster import NodeCluster
from hangwatch_testing.silent_broker import SilentBroker
from hangwatch_testing.spark_pods import driver_pod, executor_pod

NAMESPACE = "spark-jobs"
EXECUTOR_MAIN_CLASS = "org.apache.spark.scheduler.cluster.k8s.KubernetesExecutorBackend"
"""What Spark's own Kubernetes image runs in an executor container (entrypoint.sh)."""
POLICY = "node-executors"


def ensure_namespace(node: NodeCluster, name: str = NAMESPACE) -> None:
    """The namespace with its `default` ServiceAccount and the root CA ConfigMap that the
    projected token volume of every pod needs (both made by the controller manager)."""
    if not node.exists(f"/api/v1/namespaces/{name}"):
        node.create("/api/v1/namespaces", {"metadata": {"name": name}})
    waiting.wait_for(
        lambda: (
            node.exists(f"/api/v1/namespaces/{name}/serviceaccounts/default")
            and node.exists(f"/api/v1/namespaces/{name}/configmaps/kube-root-ca.crt")
        ),
        60,
        f"namespace {name}: its default ServiceAccount and kube-root-ca.crt",
        interval=0.2,
    )


def policy(
    name: str, bootstrap: str, *, mode: str = "auto", app: str = "", namespace: str = NAMESPACE
) -> dict[str, Any]:
    """A ProducerHealthPolicy for the executors of `namespace` (team payments)."""
    selector: dict[str, Any] = {"matchLabels": {"team": "payments"}}
    if app:
        selector["matchLabels"]["spark-app-name"] = app
    return {
        "apiVersion": "hangwatch.dev/v1alpha1",
        "kind": "ProducerHealthPolicy",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "selector": selector,
            "roles": ["executor"],
            "kafka": {"bootstrapServers": [bootstrap], "topics": ["events"]},
            "probes": {
                "probeIntervalSeconds": 5,
                "connectTimeoutSeconds": 1,
                "requestTimeoutSeconds": 2,
            },
            "detection": {"stallSeconds": 10},
            "actions": {"producerHung": ["restart", "alert"]},
            "sidecar": {"injectionMode": mode},
        },
    }


def submit_driver(node: NodeCluster, suffix: str, namespace: str = NAMESPACE) -> dict[str, Any]:
    """The driver pod (stored, not run: its image is Spark's, which is not built here),
    and the executors' ConfigMap, as Spark's driver-side submission creates them."""
    driver = as_submitted(driver_pod())
    driver["metadata"]["name"] += suffix
    # stored, never run (its image is Spark's): a scheduling gate keeps it unscheduled
    driver["spec"]["schedulingGates"] = [{"name": "hangwatch.dev/not-run-here"}]
    stored: dict[str, Any] = node.create(f"/api/v1/namespaces/{namespace}/pods", driver)
    return stored


def executor_for(
    node: NodeCluster,
    driver: dict[str, Any],
    exec_id: int,
    image: str,
    script: str,
    *,
    suffix: str = "",
    labels: dict[str, str] | None = None,
    namespace: str = NAMESPACE,
) -> dict[str, Any]:
    """Executor `exec_id` of `driver` running `script` (python3 -c) in `image`."""
    body = as_submitted(executor_pod(exec_id, labels=labels))
    body["metadata"]["name"] += suffix
    owner = body["metadata"]["ownerReferences"][0]
    owner["name"], owner["uid"] = driver["metadata"]["name"], driver["metadata"]["uid"]
    spec = body["spec"]
    spec["terminationGracePeriodSeconds"] = 5
    container = spec["containers"][0]
    container["image"], container["imagePullPolicy"] = image, "Never"
    # the command line ends with the class Spark's Kubernetes image starts executors
    # with (what the legacy sidecar waits for): python3 -c SCRIPT <that class name>
    container["command"] = ["python3", "-c", script, EXECUTOR_MAIN_CLASS]
    container.pop("args", None)
    container["resources"] = {
        "requests": {"cpu": "100m", "memory": "128Mi"},
        "limits": {"memory": "256Mi"},
    }
    conf = next(v for v in spec["volumes"] if v["name"] == "spark-conf-volume-exec")
    map_name = conf["configMap"]["name"]
    if not node.exists(f"/api/v1/namespaces/{namespace}/configmaps/{map_name}"):
        node.create(
            f"/api/v1/namespaces/{namespace}/configmaps",
            {"metadata": {"name": map_name}, "data": {"spark-env.sh": "# executor env\n"}},
        )
    return copy.deepcopy(body)


def create_pod(
    node: NodeCluster, body: dict[str, Any], namespace: str = NAMESPACE
) -> dict[str, Any]:
    stored: dict[str, Any] = node.create(f"/api/v1/namespaces/{namespace}/pods", body)
    return stored


def read_pod(node: NodeCluster, name: str, namespace: str = NAMESPACE) -> dict[str, Any]:
    found: dict[str, Any] = node.get(f"/api/v1/namespaces/{namespace}/pods/{name}")
    return found


def wait_for(what: str, check: Callable[[], Any], timeout: float = 120.0) -> Any:
    """Poll `check` until it returns something true (returned); fail naming `what`."""
    return waiting.wait_for(check, timeout, what, interval=0.25)


def wait_pod_phase(
    node: NodeCluster, name: str, phase: str, namespace: str = NAMESPACE, timeout: float = 300
) -> dict[str, Any]:
    """Pod `name` once its phase is `phase`; a timeout names the pod's last status."""
    last: dict[str, Any] = {}

    def reached() -> dict[str, Any] | None:
        last.update(read_pod(node, name, namespace))
        return last if last["status"].get("phase") == phase else None

    return waiting.wait_for(
        reached,
        timeout,
        f"pod {name} {phase}",
        interval=0.5,
        context=lambda: f"status {json.dumps(last.get('status'))[:2000]}",
    )


def executor_script(sidecar_port: int, broker: str, seconds: float) -> str:
    """The executor's process: reach the sidecar on the pod's loopback (retrying while
    it starts), open a connection to the broker and send a request, hold it for
    `seconds`, then report through the termination message and exit 0. SIGTERM ends it
    with 143, as it ends Spark's executor JVM (PID 1 would otherwise ignore it)."""
    host, port = broker.rsplit(":", 1)
    return f"""
import os, signal, socket, time, urllib.request
signal.signal(signal.SIGTERM, lambda *_: os._exit(143))  # as a JVM under tini ends
tries = 0
while True:
    tries += 1
    try:
        urllib.request.urlopen("http://127.0.0.1:{sidecar_port}/healthz", timeout=2).read()
        break
    except OSError:
        time.sleep(0.2)
conn = socket.create_connection(("{host}", {port}))
conn.sendall(b"\\x00\\x00\\x00\\x10" + b"\\x00" * 16)
time.sleep({seconds})
open("/dev/termination-log", "w").write("sidecar answered after %d tries" % tries)
"""


def sidecar_status(pod_ip: str, port: int) -> Any:
    """The sidecar's /status on the pod IP (parsed), or None while it does not answer."""
    try:
        with urllib.request.urlopen(f"http://{pod_ip}:{port}/status", timeout=3) as answer:
            return json.loads(answer.read())
    except OSError:
        return None


def wait_for_connection_in_status(
    pod_ip: str,
    port: int,
    broker: SilentBroker,
    *,
    verdict: str | None = None,
    timeout: float = 120,
) -> dict[str, Any]:
    """The sidecar's /status on the pod IP, once its socket view lists the executor's
    connection to the broker (the peer the broker's listener saw from this pod) and,
    when `verdict` is given, it judges that verdict."""
    last: list[Any] = [None]

    def listed() -> dict[str, Any] | None:
        status = last[0] = sidecar_status(pod_ip, port)
        if not isinstance(status, dict):
            return None
        if verdict is not None and status.get("verdict") != verdict:
            return None
        sockets = status.get("sockets") or {}
        seen = {c["connection"] for c in sockets.get("connections", ())}
        ours = {f"{peer}->{broker.address}" for peer in broker.peers if peer.startswith(pod_ip)}
        return status if seen & ours else None

    what = "the executor's connection in the sidecar's /status"
    if verdict is not None:
        what += f" with verdict {verdict}"
    found: dict[str, Any] = wait_for(what, listed, timeout)
    return found


@contextmanager
def operator_with_policies(
    node: NodeCluster,
    release: HelmRelease,
    workdir: Path,
    namespace: str,
    *policies: dict[str, Any],
) -> Iterator[OperatorRun]:
    """The chart's operator as a process (`running_operator`), once it serves its
    webhook and has read each of `policies` (created here in `namespace`)."""
    base = f"/apis/hangwatch.dev/v1alpha1/namespaces/{namespace}/producerhealthpolicies"
    for body in policies:
        node.create(base, body)
    with running_operator(node, workdir) as (run, _):
        names = [body["metadata"]["name"] for body in policies]
        wait_operator_ready(run, node, release, namespace, *names)
        yield run


def wait_operator_ready(
    run: OperatorRun, node: NodeCluster, release: HelmRelease, namespace: str, *policies: str
) -> None:
    """The operator's webhook port answers and each policy has a status (it was read)."""
    base = f"/apis/hangwatch.dev/v1alpha1/namespaces/{namespace}/producerhealthpolicies"

    def ready() -> bool:
        try:
            with socket.create_connection(("127.0.0.1", release.webhook_port), timeout=0.5):
                pass
        except OSError:
            return False
        return all(node.get(f"{base}/{name}").get("status") for name in policies)

    run.wait_for("the webhook and the policies' status", ready)
