"""The single-node cluster is a real one: the kubelet runs pods and stops them.

Covered, on the release scripts/build-kube.sh pins (a current one, with cgroup v1 and
the pause image built here):

- the node registers itself with the kubelet's version and the tier's node IP (the
  address of the bridge the tier created) and reports Ready;
- a pod with only the locally built pause image is scheduled by kube-scheduler, gets
  an address on the tier's bridge from the CNI bridge plugin, runs (containerd, runc)
  and, once deleted, is stopped by the kubelet and removed (no sandbox left in the
  runtime).
"""

from __future__ import annotations

from typing import Any

import pytest

from hangwatch_testing.node.cluster import NodeCluster
from hangwatch_testing.node.components import NODE_NAME
from hangwatch_testing.node.workloads import wait_for

pytestmark = pytest.mark.xdist_group("node")


def test_node_registers_ready_with_its_version_and_bridge_address(node: NodeCluster) -> None:
    found = node.get(f"/api/v1/nodes/{NODE_NAME}")
    assert found["status"]["nodeInfo"]["kubeletVersion"] == node.components.kube_version
    addresses = {a["type"]: a["address"] for a in found["status"]["addresses"]}
    assert addresses["InternalIP"] == node.node_ip
    assert node.node_ready()[0]
    runtime = found["status"]["nodeInfo"]["containerRuntimeVersion"]
    assert runtime.startswith("containerd://"), runtime


def test_a_pod_runs_on_the_bridge_and_is_stopped_when_deleted(node: NodeCluster) -> None:
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "pause-only", "namespace": "default"},
        "spec": {
            "automountServiceAccountToken": False,
            "terminationGracePeriodSeconds": 5,
            "containers": [
                {
                    "name": "pause",
                    "image": node.components.pause_image,
                    "imagePullPolicy": "Never",
                }
            ],
        },
    }
    node.create("/api/v1/namespaces/default/pods", pod)

    def running() -> dict[str, Any] | None:
        found: dict[str, Any] = node.get("/api/v1/namespaces/default/pods/pause-only")
        return found if found["status"].get("phase") == "Running" else None

    found = wait_for("the pod to run", running)
    assert found["spec"]["nodeName"] == NODE_NAME
    assert found["status"]["podIP"] in {str(ip) for ip in node.pod_network.hosts()}
    sandboxes_running = node.ctr("containers", "ls", "-q").stdout.split()
    assert len(sandboxes_running) >= 2  # the sandbox (pause) and the container
    node.delete("/api/v1/namespaces/default/pods/pause-only")
    wait_for(
        "the pod to be gone", lambda: not node.exists("/api/v1/namespaces/default/pods/pause-only")
    )
    wait_for(
        "the runtime to remove its containers",
        lambda: not node.ctr("containers", "ls", "-q").stdout.split(),
    )
