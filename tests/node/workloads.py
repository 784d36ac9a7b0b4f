"""Spark-shaped pods, policies and the operator on the node tier's cluster.

Not a test module. Executor pods are the ones `hangwatch_testing.spark_pods` describes
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
import socket
import time
from collections.abc import Callable
from typing import Any

import pytest

from hangwatch_testing.emulated_cluster import OperatorRun
from hangwatch_testing.spark_pods import driver_pod, executor_pod
from tests.kube.release import HelmRelease
from tests.kube.spark import as_submitted
from tests.node.cluster import NodeCluster

NAMESPACE = "spark-jobs"
EXECUTOR_MAIN_CLASS = "org.apache.spark.scheduler.cluster.k8s.KubernetesExecutorBackend"
"""What Spark's own Kubernetes image runs in an executor container (entrypoint.sh)."""
POLICY = "node-executors"


def ensure_namespace(node: NodeCluster, name: str = NAMESPACE) -> None:
    """The namespace with its `default` ServiceAccount and the root CA ConfigMap that the
    projected token volume of every pod needs (both made by the controller manager)."""
    if not node.exists(f"/api/v1/namespaces/{name}"):
        node.create("/api/v1/namespaces", {"metadata": {"name": name}})
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if node.exists(f"/api/v1/namespaces/{name}/serviceaccounts/default") and node.exists(
            f"/api/v1/namespaces/{name}/configmaps/kube-root-ca.crt"
        ):
            return
        time.sleep(0.2)
    raise AssertionError(f"namespace {name}: no default ServiceAccount or kube-root-ca.crt")


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
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(0.25)
    pytest.fail(f"timed out waiting for {what}", pytrace=False)


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
