"""The sidecar in real pods: injected by the real admission chain, run by the kubelet.

The chart is installed with real Helm as the README says (server-side apply, the
release's own kubeVersion floor); the operator runs as the installed Deployment
describes (hangwatch_testing.kube.release), reached by the API server through the chart's
Service and caBundle. Executor pods are created as Spark's driver creates them (owned
by the real driver pod); their executor container runs a Python process in the
hangwatch image (no Spark image is built here). Covered:

- `auto` on this release injects the **native** sidecar: an init container with
  `restartPolicy: Always`, the executor the only regular container;
- the kubelet starts the sidecar before the executor (the sidecar is running when the
  executor container is created; the executor reaches it on the pod's loopback) and,
  once the executor has finished, stops it after: the pod ends Succeeded, the sidecar
  terminated after the executor, with exit code 0;
- the sidecar serves `/status` on the pod IP, naming that pod, and its socket view
  lists that pod's own connection to the broker address (the connection the executor
  opened, as the peer address the listener on the node saw);
- the operator's delete (its own call, uid precondition, its ServiceAccount's token)
  is refused for another uid; with the pod's uid the kubelet stops the executor
  (SIGTERM: exit 143, as without hangwatch), then the sidecar, which exits 0;
- a policy asking for `legacy` gets the legacy sidecar (a regular container,
  shareProcessNamespace); it exits by itself, with 0, when the executor's process is
  gone, and the pod ends Succeeded.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from hangwatch_operator.injection import MODE_ANNOTATION, SIDECAR_CONTAINER
from hangwatch_operator.kube_api import KubeApi, KubeApiError
from hangwatch_testing.emulated_cluster import OperatorRun
from hangwatch_testing.kube.release import HelmRelease, operator_kubeconfig
from hangwatch_testing.node.cluster import NodeCluster
from hangwatch_testing.node.workloads import (
    NAMESPACE,
    create_pod,
    ensure_namespace,
    executor_for,
    executor_script,
    operator_with_policies,
    policy,
    read_pod,
    submit_driver,
    wait_for_connection_in_status,
    wait_pod_phase,
)
from hangwatch_testing.silent_broker import SilentBroker

pytestmark = [pytest.mark.xdist_group("node"), pytest.mark.timeout(1200)]

LEGACY_APP = "legacy-app"


@pytest.fixture(scope="module")
def operator(
    node: NodeCluster,
    release: HelmRelease,
    broker: SilentBroker,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[OperatorRun]:
    ensure_namespace(node)
    native = policy("node-native", broker.address)
    legacy = policy("node-legacy", broker.address, mode="legacy", app=LEGACY_APP)
    workdir = tmp_path_factory.mktemp("operator")
    with operator_with_policies(node, release, workdir, NAMESPACE, native, legacy) as run:
        yield run


def _terminated(status: dict[str, Any]) -> dict[str, Any]:
    state: dict[str, Any] = status["state"]["terminated"]
    return state


def _time(stamp: str) -> datetime:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00"))


def test_native_sidecar_starts_before_the_executor_and_stops_after(
    node: NodeCluster,
    release: HelmRelease,
    hangwatch_image: str,
    operator: OperatorRun,
    broker: SilentBroker,
) -> None:
    driver = submit_driver(node, "-native")
    script = executor_script(release.sidecar_port, broker.address, seconds=20)
    body = executor_for(node, driver, 1, hangwatch_image, script, suffix="-native")
    stored = create_pod(node, body)
    name = stored["metadata"]["name"]
    spec = stored["spec"]
    assert stored["metadata"]["annotations"][MODE_ANNOTATION] == "native"
    assert [c["name"] for c in spec["initContainers"]] == [SIDECAR_CONTAINER]
    assert spec["initContainers"][0]["restartPolicy"] == "Always"
    assert [c["name"] for c in spec["containers"]] == ["spark-kubernetes-executor"]

    running = wait_pod_phase(node, name, "Running")
    pod_ip = running["status"]["podIP"]
    status = wait_for_connection_in_status(pod_ip, release.sidecar_port, broker)
    assert name in status["identity"].values(), status["identity"]

    done = wait_pod_phase(node, name, "Succeeded")
    sidecar = _terminated(done["status"]["initContainerStatuses"][0])
    executor = _terminated(done["status"]["containerStatuses"][0])
    assert executor["exitCode"] == 0, executor
    assert executor["message"].startswith("sidecar answered after"), executor
    assert sidecar["exitCode"] == 0, sidecar
    assert _time(sidecar["startedAt"]) <= _time(executor["startedAt"])
    assert _time(sidecar["finishedAt"]) >= _time(executor["finishedAt"])


def test_legacy_sidecar_when_the_policy_asks_exits_zero_after_the_executor(
    node: NodeCluster,
    release: HelmRelease,
    hangwatch_image: str,
    operator: OperatorRun,
    broker: SilentBroker,
) -> None:
    driver = submit_driver(node, "-legacy")
    script = executor_script(release.sidecar_port, broker.address, seconds=10)
    body = executor_for(
        node,
        driver,
        2,
        hangwatch_image,
        script,
        suffix="-legacy",
        labels={"spark-app-name": LEGACY_APP},
    )
    stored = create_pod(node, body)
    name = stored["metadata"]["name"]
    assert stored["metadata"]["annotations"][MODE_ANNOTATION] == "legacy"
    assert [c["name"] for c in stored["spec"]["containers"]] == [
        "spark-kubernetes-executor",
        SIDECAR_CONTAINER,
    ]
    assert stored["spec"]["shareProcessNamespace"] is True
    done = wait_pod_phase(node, name, "Succeeded")
    statuses = {s["name"]: _terminated(s) for s in done["status"]["containerStatuses"]}
    assert statuses["spark-kubernetes-executor"]["exitCode"] == 0
    assert statuses[SIDECAR_CONTAINER]["exitCode"] == 0, statuses[SIDECAR_CONTAINER]
    assert _time(statuses[SIDECAR_CONTAINER]["finishedAt"]) >= _time(
        statuses["spark-kubernetes-executor"]["finishedAt"]
    )


def test_deleting_the_executor_as_the_operator_does_stops_it_then_the_sidecar(
    node: NodeCluster,
    release: HelmRelease,
    hangwatch_image: str,
    operator: OperatorRun,
    broker: SilentBroker,
    tmp_path: Path,
) -> None:
    """Remediation's delete, on a real pod: the operator's own call (`KubeApi.delete_pod`,
    with the pod's uid as precondition, as the chart's ServiceAccount) is refused for
    another uid and leaves the pod running; with its uid the kubelet stops the executor
    (SIGTERM, as without hangwatch), then the sidecar, which exits 0, and the pod goes."""
    driver = submit_driver(node, "-deleted")
    script = executor_script(release.sidecar_port, broker.address, seconds=600)
    body = executor_for(node, driver, 3, hangwatch_image, script, suffix="-deleted")
    name = create_pod(node, body)["metadata"]["name"]
    running = wait_pod_phase(node, name, "Running")
    uid, version = running["metadata"]["uid"], running["metadata"]["resourceVersion"]
    kubeconfig = operator_kubeconfig(node, tmp_path)

    async def delete(with_uid: str) -> None:
        api = await KubeApi.connect(str(kubeconfig))
        try:
            await api.delete_pod(NAMESPACE, name, with_uid, None)
        finally:
            await api.close()

    with pytest.raises(KubeApiError) as refused:
        asyncio.run(delete("00000000-0000-0000-0000-000000000000"))
    assert refused.value.status == 409, refused.value
    assert read_pod(node, name)["status"]["phase"] == "Running"

    events: list[dict[str, Any]] = []
    path = (
        f"/api/v1/namespaces/{NAMESPACE}/pods?watch=true&resourceVersion={version}"
        f"&fieldSelector=metadata.name%3D{name}"
    )
    watcher = threading.Thread(
        target=lambda: events.extend(node.watch(path, lambda e: e["type"] == "DELETED"))
    )
    watcher.start()
    asyncio.run(delete(uid))
    watcher.join(300)
    assert events and events[-1]["type"] == "DELETED", [e["type"] for e in events]
    final = events[-1]["object"]["status"]
    sidecar = _terminated(final["initContainerStatuses"][0])
    executor = _terminated(final["containerStatuses"][0])
    assert executor["exitCode"] == 143, executor  # SIGTERM from the kubelet, as without us
    assert sidecar["exitCode"] == 0, sidecar
    assert _time(sidecar["finishedAt"]) >= _time(executor["finishedAt"])
