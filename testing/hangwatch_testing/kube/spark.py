"""Spark pods created on the real API server the way spark-submit's driver creates them.

The bodies come from `hangwatch_testing.spark_pods` (what Spark 3.5's
KubernetesExecutorBuilder produces), minus what the API server adds itself (the
service-account token volume), so creation goes through the whole admission chain:
defaulting, the ServiceAccount plugin (which mounts a projected token of the
namespace's `default` ServiceAccount), then the mutating webhooks. Like Spark, the
driver pod exists first and every executor carries an ownerReference to its real uid.
"""

from __future__ import annotations

import copy
import json
import time
from dataclasses import dataclass
from typing import Any

from kubernetes import client

from hangwatch_operator.injection import SIDECAR_CONTAINER
from hangwatch_testing.kube.cluster import LocalCluster
from hangwatch_testing.kube.release import admin_api
from hangwatch_testing.spark_pods import driver_pod, executor_pod

TOKEN_VOLUME_PREFIX = "kube-api-access-"


def as_submitted(pod: dict[str, Any]) -> dict[str, Any]:
    """The pod body without the token volume and mount the API server adds."""
    body = copy.deepcopy(pod)
    spec = body["spec"]
    spec["volumes"] = [v for v in spec["volumes"] if not v["name"].startswith(TOKEN_VOLUME_PREFIX)]
    for container in spec["containers"]:
        container["volumeMounts"] = [
            m
            for m in container.get("volumeMounts", ())
            if not m["name"].startswith(TOKEN_VOLUME_PREFIX)
        ]
    body["metadata"].pop("namespace", None)
    return body


def ensure_namespace(cluster: LocalCluster, name: str) -> None:
    """The namespace with its `default` ServiceAccount (the controller manager adds it; the
    ServiceAccount admission plugin needs it before pods can be created)."""
    with admin_api(cluster) as api:
        core = client.CoreV1Api(api)
        try:
            core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=name)))
        except client.ApiException as exc:
            if exc.status != 409:
                raise
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            accounts = core.list_namespaced_service_account(name).items
            if any(a.metadata and a.metadata.name == "default" for a in accounts):
                return
            time.sleep(0.1)
    raise AssertionError(f"namespace {name} got no default ServiceAccount")


def create_pod(
    cluster: LocalCluster, namespace: str, body: dict[str, Any], api: client.ApiClient | None = None
) -> tuple[dict[str, Any], float]:
    """POST the pod as the admin; the stored pod and how long the API server took (s).
    Pass `api` to reuse one client (and its TLS connection) across many pods."""
    if api is None:
        with admin_api(cluster) as own:
            return create_pod(cluster, namespace, body, own)
    started = time.perf_counter()
    pod: Any = body  # the client takes a plain dict as well as a V1Pod
    answer: Any = client.CoreV1Api(api).create_namespaced_pod(
        namespace, pod, _preload_content=False
    )
    elapsed = time.perf_counter() - started
    stored: dict[str, Any] = json.loads(answer.data)
    return stored, elapsed


def submit_application(
    cluster: LocalCluster, namespace: str, executors: int, *, suffix: str = ""
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """A driver pod, then `executors` executor pods owned by it; the stored bodies."""
    driver = as_submitted(driver_pod())
    driver["metadata"]["name"] += suffix
    stored_driver, _ = create_pod(cluster, namespace, driver)
    stored = []
    for exec_id in range(1, executors + 1):
        body = executor_pod_for(stored_driver, exec_id, suffix=suffix)
        stored.append(create_pod(cluster, namespace, body)[0])
    return stored_driver, stored


def executor_pod_for(
    driver: dict[str, Any], exec_id: int, *, suffix: str = "", **changes: Any
) -> dict[str, Any]:
    """Executor `exec_id` of `driver`, owned by it (its real uid)."""
    body = as_submitted(executor_pod(exec_id, **changes))
    body["metadata"]["name"] += suffix
    owner = body["metadata"]["ownerReferences"][0]
    owner["name"] = driver["metadata"]["name"]
    owner["uid"] = driver["metadata"]["uid"]
    return body


def container_names(pod: dict[str, Any]) -> list[str]:
    """Every container's name, regular ones first, then init containers (where a native
    sidecar is)."""
    spec = pod["spec"]
    return [c["name"] for c in [*spec.get("containers", ()), *spec.get("initContainers", ())]]


@dataclass(frozen=True)
class Created:
    """What `dry_run_create` got back."""

    admitted: bool
    pod: dict[str, Any]
    stderr: str


def dry_run_create(cluster: LocalCluster, namespace: str, body: dict[str, Any]) -> Created:
    """`kubectl create --dry-run=server` of the pod: admitted or not, the pod as the
    admission chain left it, kubectl's stderr (warnings, the refusal)."""
    done = cluster.kubectl(
        "create",
        "--dry-run=server",
        "-n",
        namespace,
        "-o",
        "json",
        "-f",
        "-",
        stdin=json.dumps(body),
        check=False,
    )
    pod = json.loads(done.stdout) if done.returncode == 0 else {}
    return Created(done.returncode == 0, pod, done.stderr)


def sidecar_of(pod: dict[str, Any]) -> dict[str, Any] | None:
    """The hangwatch sidecar of the pod, a regular or an init container; None if absent."""
    spec = pod.get("spec", {})
    found = [
        c
        for c in [*spec.get("initContainers", ()), *spec.get("containers", ())]
        if c["name"] == SIDECAR_CONTAINER
    ]
    return found[0] if found else None
