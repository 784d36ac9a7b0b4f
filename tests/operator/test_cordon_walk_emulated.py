"""The cordon walk of issue 13 against the real operator: at most one node, ever.

One `hangwatch operator` process on kmock's Kubernetes, ten nodes, and two policies
in two namespaces that both ask for `cordonNode` on `node_network_fault` (one with
default safety, one with its own caps raised to 10). Each policy has two injected
executor pods on every node, each with a real sidecar HTTP server the test controls,
and one pod that merely looks injected (the policy label and the injection
annotation, a `hangwatch-sidecar` container from another image) whose server always
says it is cut off from Kafka.

The walk: step by step, the pods of the next node report `cluster_unreachable` (no
broker answers) and those of the node before recover, each step lasting until both
policies completed two more rounds. Covers: the first node blamed is cordoned once;
no other node is ever cordoned, though every node is blamed in turn (Events name the
`max_cordoned` limit: the policy's own cap for the policy holding the cordon, if it is
the one with default safety, the operator's cap otherwise);
the look-alike pod is never polled (its server sees no request) and the policies'
Ready condition counts it as ignored.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from hangwatch.contracts import Verdict
from hangwatch_testing import remediation_cluster as rc
from hangwatch_testing.emulated_cluster import OperatorRun

WALKED = [f"walk-{i}" for i in range(10)]
CORDON = {"actions": {"nodeNetworkFault": ["cordonNode", "alert"]}}
POLICY_SPECS = {
    "walk-default": CORDON,
    "walk-roomy": {**CORDON, "safety": {"maxCordonedNodes": 10, "maxConcurrent": 10}},
}


class _Counting(BaseHTTPRequestHandler):
    """A forged sidecar: answers nothing useful, counts what reaches it."""

    hits = 0

    def do_GET(self) -> None:
        type(self).hits += 1
        self.send_response(500)
        self.end_headers()

    def log_message(self, *_: Any) -> None:
        return


@dataclass
class Walk:
    cluster: rc.RemediationCluster
    operator: OperatorRun
    metrics_port: int
    sidecars: dict[str, list[rc.FakeSidecar]]
    """Node -> the sidecars of every policy's pods on it."""

    def cordoned(self) -> list[str]:
        return sorted(
            n["metadata"]["name"]
            for n in self.cluster.items(rc.NODES)
            if (n.get("spec") or {}).get("unschedulable")
        )

    def wait_rounds(self, count: int) -> None:
        def rounds() -> list[float]:
            return [rc.poll_rounds(self.metrics_port, f"{ns}/p") for ns in POLICY_SPECS]

        start = rounds()
        self.operator.wait_for(
            f"{count} more rounds of each policy",
            lambda: all(now >= then + count for now, then in zip(rounds(), start, strict=True)),
        )


@pytest.fixture(scope="module")
def walk(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Walk]:
    workdir = tmp_path_factory.mktemp("walk")
    with ExitStack() as stack:
        cluster = stack.enter_context(rc.RemediationCluster())
        for node in WALKED:
            cluster.add_node(node)
        forged = ThreadingHTTPServer(("127.0.0.1", 0), _Counting)
        threading.Thread(target=forged.serve_forever, args=(0.05,), daemon=True).start()
        stack.callback(forged.server_close)
        stack.callback(forged.shutdown)
        sidecars: dict[str, list[rc.FakeSidecar]] = {node: [] for node in WALKED}
        for namespace, spec in POLICY_SPECS.items():
            policy = rc.stored_policy(namespace, "p", **rc.FAST, **spec)
            for number, node in enumerate([n for n in WALKED for _ in range(2)], start=1):
                sidecar = rc.FakeSidecar().start()
                stack.callback(sidecar.close)
                sidecars[node].append(sidecar)
                body = rc.watched_executor(policy, number, sidecar.port, node=node)
                cluster.create(rc.PODS, namespace, body)
            cluster.create(rc.PODS, namespace, _look_alike(policy, forged.server_address[1]))
            cluster.create(rc.POLICIES, namespace, policy)
        operator, metrics_port = stack.enter_context(rc.remediating_operator(cluster, workdir))
        yield Walk(cluster, operator, metrics_port, sidecars)


def _look_alike(policy: dict[str, Any], port: int) -> dict[str, Any]:
    """A pod the webhook did not inject that carries what a tenant can write itself."""
    body = rc.watched_executor(policy, 99, port, node=WALKED[-1])
    body["metadata"]["name"] += "-look-alike"
    for container in body["spec"]["initContainers"]:
        if container["name"] == "hangwatch-sidecar":
            container["image"] = "tenant.example/always-cut-off:1"
    return body


def test_walking_the_nodes_cordons_one_node_only(walk: Walk) -> None:
    walk.wait_rounds(1)
    assert walk.cordoned() == []
    before = _Counting.hits
    for step, node in enumerate(WALKED):
        if step:
            for sidecar in walk.sidecars[WALKED[step - 1]]:
                sidecar.set(Verdict.HEALTHY)
        for sidecar in walk.sidecars[node]:
            sidecar.set(Verdict.CLUSTER_UNREACHABLE, reachable=False)
        walk.wait_rounds(2)
        assert walk.cordoned() == [WALKED[0]], f"after blaming {node}"
    cordons = walk.cluster.events("default", "HangwatchCordonNode")
    assert [e["involvedObject"]["name"] for e in cordons] == [WALKED[0]]
    holder = (walk.cluster.get(rc.NODES, None, WALKED[0]) or {})["metadata"]["annotations"]
    holder_key = holder["hangwatch.dev/cordoned-by"]
    for namespace in POLICY_SPECS:
        capped = [
            e["message"]
            for e in walk.cluster.events("default", "HangwatchSuppressed")
            if f"Policy {namespace}/p." in e["message"]
        ]
        assert capped and all("suppressed by max_cordoned" in m for m in capped), capped
        if namespace == "walk-default" and holder_key == "walk-default/p":
            limit = "this policy holds 1 cordoned node(s) (safety.maxCordonedNodes 1)"
        else:  # walk-roomy's own cap is 10: the operator's cap holds it back
            limit = "across all policies (operator max_cordoned_nodes 1)"
        assert any(limit in m for m in capped), (namespace, holder_key, capped)
    assert _Counting.hits == before == 0, "the look-alike pod is never polled"
    for namespace in POLICY_SPECS:
        status = walk.cluster.policy_status(namespace, "p")
        ready = {c["type"]: c for c in status["conditions"]}["Ready"]
        assert "ignoring 1 labelled pod(s) not injected for this policy" in ready["message"]
        assert status["watched"] == 2 * len(WALKED)
    assert "Not watching pod walk-default/" in walk.operator.log()
