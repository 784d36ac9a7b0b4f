"""Actions carried out against the Kubernetes API (kmock's emulator, real HTTP).

Covers `actuation.carry_out` and `kube_api.KubeApi` in-process: a restart deletes the
pod (an already-gone pod is not a failure); a decommission deletes a pod whose Spark
container has the `/opt/decom.sh` preStop hook and fails, saying how to enable it,
for one without; cordoning makes the node unschedulable, adds the
`hangwatch.dev/network-fault=true:NoSchedule` taint next to existing taints (once, even
when repeated), the `hangwatch.dev/cordoned` label and the cordoned-by/at annotations;
a node someone else cordoned is left alone; uncordoning undoes exactly hangwatch's
changes and only for the policy that cordoned; API errors become outcome `failed` with
the HTTP status; decisions that are not `acted` are not carried out; Events and status
patches land in the emulator.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest

from hangwatch.contracts import Verdict
from hangwatch_operator.actuation import carry_out
from hangwatch_operator.decisions import Decision
from hangwatch_operator.kube_api import KubeApi, KubeApiError
from hangwatch_operator.operations import Operation, Outcome, Suppression
from hangwatch_operator.watched import watched_pod
from hangwatch_testing.remediation_cluster import (
    NODES,
    PODS,
    POLICIES,
    RemediationCluster,
    stored_policy,
    watched_executor,
)

POLICY = "jobs/writers"
NOW = 1_800_000_000.0
T = TypeVar("T")


@pytest.fixture(scope="module")
def cluster() -> Iterator[RemediationCluster]:
    with RemediationCluster() as running:
        yield running


@pytest.fixture(scope="module")
def kubeconfig(cluster: RemediationCluster, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return cluster.write_kubeconfig(tmp_path_factory.mktemp("actuation") / "kubeconfig")


def _with_api(kubeconfig: Path, use: Callable[[KubeApi], Awaitable[T]]) -> T:
    async def run() -> T:
        api = await KubeApi.connect(str(kubeconfig))
        try:
            return await use(api)
        finally:
            await api.close()

    return asyncio.run(run())


def _act(kubeconfig: Path, decision: Decision) -> Decision:
    return _with_api(
        kubeconfig,
        lambda api: carry_out(decision, api, policy_key=POLICY, restart_grace_seconds=30, now=NOW),
    )


def _pod(cluster: RemediationCluster, exec_id: int, *, hook: bool = False) -> dict[str, Any]:
    body = watched_executor(stored_policy("jobs", "writers"), exec_id, 9477)
    if hook:
        body["spec"]["containers"][0]["lifecycle"] = {
            "preStop": {"exec": {"command": ["/opt/decom.sh"]}}
        }
    cluster.put(PODS, "jobs", body["metadata"]["name"], body)
    return body


def _node(cluster: RemediationCluster, name: str, **spec: Any) -> None:
    cluster.put(
        NODES,
        None,
        name,
        {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}, "spec": spec},
    )


def _decision(
    operation: Operation, pod: dict[str, Any] | None = None, node: str | None = None
) -> Decision:
    watched = None if pod is None else watched_pod(pod, 9477)
    verdict = Verdict.NODE_NETWORK_FAULT if pod is None else Verdict.PRODUCER_HUNG
    return Decision(operation, verdict, Outcome.ACTED, pod=watched, node=node)


def test_restart_deletes_the_pod_and_a_gone_pod_is_not_a_failure(
    cluster: RemediationCluster, kubeconfig: Path
) -> None:
    pod = _pod(cluster, 1)
    done = _act(kubeconfig, _decision(Operation.RESTART, pod))
    assert (done.outcome, done.note) == (Outcome.ACTED, "pod deleted with a 30 s grace period")
    assert cluster.get(PODS, "jobs", pod["metadata"]["name"]) is None
    again = _act(kubeconfig, _decision(Operation.RESTART, pod))
    assert (again.outcome, again.note) == (Outcome.ACTED, "pod already gone")


def test_decommission_needs_sparks_decom_hook(
    cluster: RemediationCluster, kubeconfig: Path
) -> None:
    plain = _pod(cluster, 2)
    failed = _act(kubeconfig, _decision(Operation.DECOMMISSION, plain))
    assert failed.outcome is Outcome.FAILED
    assert "spark.decommission.enabled=true" in failed.note
    assert cluster.get(PODS, "jobs", plain["metadata"]["name"]) is not None
    hooked = _pod(cluster, 3, hook=True)
    done = _act(kubeconfig, _decision(Operation.DECOMMISSION, hooked))
    assert done.outcome is Outcome.ACTED and "SIGPWR" in done.note
    assert cluster.get(PODS, "jobs", hooked["metadata"]["name"]) is None


def test_cordon_taints_once_and_keeps_other_taints(
    cluster: RemediationCluster, kubeconfig: Path
) -> None:
    gpu = {"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"}
    _node(cluster, "node-c", taints=[gpu])
    for _ in range(2):
        done = _act(kubeconfig, _decision(Operation.CORDON_NODE, node="node-c"))
        assert done.outcome is Outcome.ACTED
    node = cluster.get(NODES, None, "node-c") or {}
    assert node["spec"]["unschedulable"] is True
    assert node["spec"]["taints"] == [
        gpu,
        {"key": "hangwatch.dev/network-fault", "value": "true", "effect": "NoSchedule"},
    ]
    assert node["metadata"]["labels"] == {"hangwatch.dev/cordoned": "true"}
    annotations = node["metadata"]["annotations"]
    assert annotations["hangwatch.dev/cordoned-by"] == POLICY
    assert annotations["hangwatch.dev/cordoned-at"] == "2027-01-15T08:00:00Z"


def test_a_node_someone_else_cordoned_is_left_alone(
    cluster: RemediationCluster, kubeconfig: Path
) -> None:
    _node(cluster, "node-d", unschedulable=True)
    done = _act(kubeconfig, _decision(Operation.CORDON_NODE, node="node-d"))
    assert done.outcome is Outcome.ACTED and "not by hangwatch" in done.note
    node = cluster.get(NODES, None, "node-d") or {}
    assert "taints" not in node["spec"] and "annotations" not in node["metadata"]
    not_ours = _act(kubeconfig, _decision(Operation.UNCORDON_NODE, node="node-d"))
    assert "not cordoned by this policy" in not_ours.note
    assert (cluster.get(NODES, None, "node-d") or {})["spec"]["unschedulable"] is True


def test_uncordon_undoes_exactly_what_hangwatch_did(
    cluster: RemediationCluster, kubeconfig: Path
) -> None:
    gpu = {"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"}
    _node(cluster, "node-e", taints=[gpu])
    _act(kubeconfig, _decision(Operation.CORDON_NODE, node="node-e"))
    done = _act(kubeconfig, _decision(Operation.UNCORDON_NODE, node="node-e"))
    assert (done.outcome, done.note) == (Outcome.ACTED, "node uncordoned and untainted")
    node = cluster.get(NODES, None, "node-e") or {}
    assert node["spec"] == {"taints": [gpu]}
    assert not node["metadata"].get("annotations") and not node["metadata"].get("labels")


def test_api_errors_fail_the_decision_and_other_outcomes_are_not_carried_out(
    cluster: RemediationCluster, kubeconfig: Path
) -> None:
    failed = _act(kubeconfig, _decision(Operation.CORDON_NODE, node="no-such-node"))
    assert failed.outcome is Outcome.FAILED and failed.note.startswith("HTTP 404")
    pod = _pod(cluster, 4)
    suppressed = dataclasses.replace(
        _decision(Operation.RESTART, pod), outcome=Outcome.SUPPRESSED, suppression=Suppression.STORM
    )
    assert _act(kubeconfig, suppressed) == suppressed
    assert cluster.get(PODS, "jobs", pod["metadata"]["name"]) is not None


def test_events_and_status_patches_land(cluster: RemediationCluster, kubeconfig: Path) -> None:
    cluster.add_policy("jobs", "writers")
    event = {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": "e1.abc", "namespace": "jobs"},
        "involvedObject": {"apiVersion": "v1", "kind": "Pod", "name": "e1", "namespace": "jobs"},
        "type": "Warning",
        "reason": "HangwatchRestart",
        "message": "producer_hung: restart done",
        "count": 1,
        "firstTimestamp": "2027-01-15T08:00:00Z",
        "lastTimestamp": "2027-01-15T08:00:00Z",
        "source": {"component": "hangwatch-operator"},
    }

    async def write(api: KubeApi) -> None:
        await api.create_event(event)
        await api.patch_policy_status("jobs", "writers", {"watched": 3})
        with pytest.raises(KubeApiError) as missing:
            await api.patch_policy_status("jobs", "nobody", {"watched": 3})
        assert missing.value.status == 404

    _with_api(kubeconfig, write)
    (stored,) = cluster.events("jobs", "HangwatchRestart")
    assert stored["message"] == "producer_hung: restart done"
    assert (cluster.get(POLICIES, "jobs", "writers") or {})["status"] == {"watched": 3}
