"""Remediation against the real API server, through the chart's RBAC.

The release is upgraded with `operator.nodeCordoning.enabled=true` (real `helm
upgrade`: the webhook certificate Secret is kept) and the operator runs as the chart's
ServiceAccount. Executor pods are created through the admission chain, bound to Nodes
and reported Running with their own loopback pod IP, where a sidecar status server the
test controls answers. Policies poll every 2 s. Covered:

- a `producer_hung` pod is deleted once, with its uid as the delete precondition (the
  request body in the audit log), the healthy ones are not; a HangwatchRestart Event
  and the policy's status (printer columns) are visible with kubectl; the operator's
  metrics count the action;
- during an outage (every sidecar: cluster unreachable) nothing is deleted for several
  rounds;
- a node fault (pods on one node cut off, on another fine) cordons and taints that node
  while another controller adds taints to it back to back: every taint it added
  survives, hangwatch's is there once; the HangwatchCordonNode Event is on the node;
- a policy in dry run decides the restart, reports HangwatchDryRun and deletes nothing;
- `helm rollback` returns to the previous revision: node patching is forbidden again.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import pytest

from hangwatch.contracts import Verdict
from hangwatch_operator.watched import NETWORK_FAULT_TAINT
from hangwatch_testing.emulated_cluster import OperatorRun
from hangwatch_testing.kube.cluster import LocalCluster
from hangwatch_testing.kube.fleet import (
    Fleet,
    TaintingController,
    ensure_node,
    launch,
    set_verdicts,
)
from hangwatch_testing.kube.release import NAMESPACE, OPERATOR_USER, HelmRelease, running_operator
from hangwatch_testing.remediation_cluster import scrape

pytestmark = pytest.mark.xdist_group("kube")

CORDONING = {"operator": {"nodeCordoning": {"enabled": True}}}


class Remediation:
    def __init__(self, cluster: LocalCluster, release: HelmRelease, run: OperatorRun, metrics: int):
        self.cluster, self.release, self.run, self.metrics_port = cluster, release, run, metrics
        self.fleets: list[Fleet] = []

    def launch(self, namespace: str, nodes: list[str], **spec: Any) -> Fleet:
        fleet = launch(self.cluster, namespace, nodes, self.release.sidecar_port, spec)
        self.fleets.append(fleet)
        self.wait_watched(fleet, len(nodes))
        return fleet

    def status(self, namespace: str) -> dict[str, Any]:
        done = self.cluster.kubectl("get", "phpolicy", "writers", "-n", namespace, "-o", "json")
        status: dict[str, Any] = json.loads(done.stdout).get("status") or {}
        return status

    def wait_watched(self, fleet: Fleet, count: int) -> None:
        self.run.wait_for(
            f"{count} healthy pods watched in {fleet.namespace}",
            lambda: (
                (s := self.status(fleet.namespace)).get("watched") == count
                and s.get("verdictCounts", {}).get("healthy") == count
            ),
        )

    def rounds(self, namespace: str) -> float:
        key = ("hangwatch_operator_poll_rounds_total", (("policy", f"{namespace}/writers"),))
        return scrape(self.metrics_port).get(key, 0.0)

    def wait_rounds(self, namespace: str, count: int) -> None:
        start = self.rounds(namespace)
        self.run.wait_for(f"{count} rounds", lambda: self.rounds(namespace) >= start + count)

    def events(self, namespace: str, reason: str) -> list[dict[str, Any]]:
        done = self.cluster.kubectl(
            "get", "events", "-n", namespace, f"--field-selector=reason={reason}", "-o", "json"
        )
        items: list[dict[str, Any]] = json.loads(done.stdout)["items"]
        return items

    def deletes(self, namespace: str) -> list[dict[str, Any]]:
        """The operator's pod deletions in `namespace`, from the audit log."""
        time.sleep(0.3)  # batched audit writes
        return [
            e
            for e in self.cluster.audit_events()
            if e["user"]["username"] == OPERATOR_USER
            and e["verb"] == "delete"
            and e.get("objectRef", {}).get("resource") == "pods"
            and e["objectRef"].get("namespace") == namespace
        ]


@pytest.fixture(scope="module")
def remediation(
    cluster: LocalCluster, release: HelmRelease, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Remediation]:
    before = _tls_secret(cluster)
    release.upgrade(CORDONING)
    assert _tls_secret(cluster) == before, "helm upgrade re-issued the webhook certificate"
    for node in ("node-a", "nf-a", "nf-b", "nf-c"):
        ensure_node(cluster, node)
    workdir = tmp_path_factory.mktemp("remediation")
    with running_operator(cluster, workdir, "hangwatch-operator-r") as (run, command):
        run.wait_for_log("Activity 'start_remediation' succeeded")
        state = Remediation(cluster, release, run, command.metrics_port)
        try:
            yield state
        finally:
            for fleet in state.fleets:
                fleet.close()


def _tls_secret(cluster: LocalCluster) -> dict[str, str]:
    done = cluster.kubectl("get", "secret", "hangwatch-webhook-tls", "-n", NAMESPACE, "-o", "json")
    data: dict[str, str] = json.loads(done.stdout)["data"]
    return data


def test_a_hung_producer_is_deleted_once_with_its_uid_precondition(
    remediation: Remediation,
) -> None:
    fleet = remediation.launch("hung", ["node-a"] * 3)
    hung, *healthy = fleet.pods
    set_verdicts([hung], Verdict.PRODUCER_HUNG)
    remediation.run.wait_for(
        "the hung pod deleted",
        lambda: (fleet.stored(hung.name) or {}).get("metadata", {}).get("deletionTimestamp"),
    )
    remediation.wait_rounds("hung", 2)
    deletes = remediation.deletes("hung")
    assert [e["objectRef"]["name"] for e in deletes] == [hung.name], deletes
    (delete,) = deletes
    assert delete["responseStatus"]["code"] == 200
    assert delete["requestObject"]["preconditions"]["uid"] == hung.uid
    assert delete["requestObject"]["gracePeriodSeconds"] == 30
    for pod in healthy:
        assert "deletionTimestamp" not in (fleet.stored(pod.name) or {})["metadata"]
    (event,) = remediation.events("hung", "HangwatchRestart")
    assert event["involvedObject"]["name"] == hung.name
    assert "producer_hung" in event["message"]
    table = remediation.cluster.kubectl("get", "producerhealthpolicies", "-n", "hung").stdout
    header, row = table.splitlines()
    assert header.split()[:5] == ["NAME", "WATCHED", "UNHEALTHY", "LAST", "ACTION"]
    assert row.split()[0] == "writers" and "restart" in row, table
    metrics = scrape(remediation.metrics_port)
    acted = [
        value
        for (name, labels), value in metrics.items()
        if name == "hangwatch_operator_actions_total" and ("policy", "hung/writers") in labels
    ]
    assert sum(acted) >= 1, [k for k in metrics if "action" in k[0]]


def test_during_an_outage_nothing_is_deleted(remediation: Remediation) -> None:
    fleet = remediation.launch("outage", ["node-a"] * 3)
    set_verdicts(fleet.pods, Verdict.CLUSTER_UNREACHABLE, reachable=False)
    remediation.run.wait_for(
        "the outage in status",
        lambda: (
            remediation.status("outage").get("verdictCounts", {}).get("cluster_unreachable") == 3
        ),
    )
    remediation.wait_rounds("outage", 3)
    assert remediation.deletes("outage") == []
    for pod in fleet.pods:
        assert "deletionTimestamp" not in (fleet.stored(pod.name) or {})["metadata"]


def test_a_node_fault_cordons_the_node_and_a_concurrent_taint_survives(
    remediation: Remediation,
) -> None:
    cluster = remediation.cluster
    fleet = remediation.launch(
        "node-fault",
        # node blame needs witnesses: pods on at least two other nodes reach the brokers
        ["nf-a", "nf-a", "nf-b", "nf-b", "nf-c", "nf-c"],
        actions={"nodeNetworkFault": ["cordonNode", "alert"]},
    )
    tainter = TaintingController(cluster, "nf-a").start()
    try:
        set_verdicts(fleet.pods[:2], Verdict.CLUSTER_UNREACHABLE, reachable=False)

        def node() -> dict[str, Any]:
            loaded: dict[str, Any] = json.loads(
                cluster.kubectl("get", "node", "nf-a", "-o", "json").stdout
            )
            return loaded

        remediation.run.wait_for("nf-a cordoned", lambda: node()["spec"].get("unschedulable"))
        time.sleep(1.0)  # the other controller keeps adding after the cordon too
    finally:
        tainter.stop()
    final = node()
    keys = [t["key"] for t in final["spec"]["taints"]]
    lost = [key for key in tainter.added if key not in keys]
    print(f"other controller: {len(tainter.added)} taints added, {tainter.conflicts} conflicts")
    assert lost == [], f"taints lost: {lost}"
    assert keys.count(NETWORK_FAULT_TAINT["key"]) == 1
    assert final["metadata"]["annotations"]["hangwatch.dev/cordoned-by"] == "node-fault/writers"
    other = json.loads(cluster.kubectl("get", "node", "nf-b", "-o", "json").stdout)
    assert not other["spec"].get("unschedulable")
    (event,) = remediation.events("default", "HangwatchCordonNode")
    assert event["involvedObject"]["kind"] == "Node" and event["involvedObject"]["name"] == "nf-a"
    assert all("deletionTimestamp" not in fleet.stored(p.name)["metadata"] for p in fleet.pods)


def test_dry_run_acts_on_nothing(remediation: Remediation) -> None:
    fleet = remediation.launch("dry-run", ["node-a"] * 3, safety={"dryRun": True})
    set_verdicts([fleet.pods[0]], Verdict.PRODUCER_HUNG)
    events = remediation.run.wait_for(
        "a HangwatchDryRun Event", lambda: remediation.events("dry-run", "HangwatchDryRun")
    )
    assert events[0]["involvedObject"]["name"] == fleet.pods[0].name
    remediation.wait_rounds("dry-run", 2)
    assert remediation.deletes("dry-run") == []
    last = remediation.status("dry-run")["lastAction"]
    assert last["dryRun"] is True, last


def test_helm_rollback_forbids_node_patches_again(remediation: Remediation) -> None:
    cluster, release = remediation.cluster, remediation.release
    can_patch = ["auth", "can-i", "patch", "nodes", f"--as={OPERATOR_USER}"]
    assert cluster.kubectl(*can_patch, check=False).stdout.strip() == "yes"
    release.rollback()
    assert cluster.kubectl(*can_patch, check=False).stdout.strip() == "no"
    revisions = [(r["revision"], r["status"]) for r in release.history()]
    assert revisions[-1][1] == "deployed" and revisions[-1][0] >= 3, revisions
