"""Pods that are not Spark's, opted in with `hangwatch.dev/producer: "true"`, on the real
API server: the chart's webhook configuration, the operator's webhook and remediation.

The operator runs as the chart's ServiceAccount (as in test_admission); the controller
manager's deployment and replicaset controllers create a Deployment's pods, so they go
through the admission chain as in a cluster. One policy covers executors and producer
pods. Covered:

- a labelled Deployment's pod is stored with the sidecar (native: the server is 1.29 or
  newer) and the policy's write interval, without `--exit-when-gone`; an unlabelled
  Deployment's pod is stored untouched;
- a Spark executor pod carrying the producer label too costs the webhook the same
  requests as a plain executor (one injection; the API server's reinvocation, which
  finds the pod injected, is skipped): the two webhooks' selectors exclude each other;
  it is stored with one sidecar;
- with a producer_hung verdict on a Deployment's pod and on a bare labelled pod, the
  Deployment's pod is deleted (its ReplicaSet replaces it) and the bare pod never is,
  the refusal counted as `no_owner`, over several rounds.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from hangwatch.contracts import Verdict
from hangwatch_operator.injection import INJECTED_ANNOTATION, SIDECAR_CONTAINER
from hangwatch_operator.policies import PRODUCER_LABEL
from hangwatch_testing.emulated_cluster import OperatorRun
from hangwatch_testing.kube.cluster import LocalCluster
from hangwatch_testing.kube.fleet import RunningPod, ensure_node, policy_body, run_pod, set_verdicts
from hangwatch_testing.kube.release import HelmRelease, running_operator, wait_for_operator
from hangwatch_testing.kube.spark import (
    container_names,
    create_pod,
    ensure_namespace,
    executor_pod_for,
    sidecar_of,
    submit_application,
)
from hangwatch_testing.remediation_cluster import scrape

pytestmark = pytest.mark.xdist_group("kube")

NAMESPACE = "producers"
NODE = "node-producers"
WRITE_INTERVAL = 10


@dataclass
class Producers:
    cluster: LocalCluster
    release: HelmRelease
    run: OperatorRun
    metrics_port: int

    def pods(self, app: str, count: int) -> list[dict[str, Any]]:
        """The `count` pods of Deployment `app`, once the ReplicaSet created them."""

        def listed() -> list[dict[str, Any]] | None:
            done = self.cluster.kubectl(
                "get", "pods", "-n", NAMESPACE, "-l", f"app={app}", "-o", "json"
            )
            items: list[dict[str, Any]] = json.loads(done.stdout)["items"]
            live = [p for p in items if not p["metadata"].get("deletionTimestamp")]
            return live if len(live) >= count else None

        found: list[dict[str, Any]] = self.run.wait_for(f"{count} pods of {app}", listed)
        return found

    def stored(self, name: str) -> dict[str, Any]:
        done = self.cluster.kubectl("get", "pod", name, "-n", NAMESPACE, "-o", "json")
        loaded: dict[str, Any] = json.loads(done.stdout)
        return loaded

    def requests(self) -> dict[str, float]:
        """The webhook's requests so far by result."""
        return {
            dict(labels)["result"]: value
            for (sample, labels), value in scrape(self.metrics_port).items()
            if sample == "hangwatch_operator_webhook_requests_total"
        }

    def metric(self, name: str, **labels: str) -> float:
        return sum(
            value
            for (sample, got), value in scrape(self.metrics_port).items()
            if sample == name and set(labels.items()) <= set(got)
        )


def deployment(app: str, replicas: int, *, opted_in: bool) -> dict[str, Any]:
    labels = {"app": app, **({PRODUCER_LABEL: "true"} if opted_in else {})}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": app, "namespace": NAMESPACE},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": app}},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "containers": [{"name": "service", "image": "registry.example/orders-api:1.4"}]
                },
            },
        },
    }


@pytest.fixture(scope="module")
def producers(
    cluster: LocalCluster, release: HelmRelease, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Producers]:
    ensure_namespace(cluster, NAMESPACE)
    ensure_node(cluster, NODE)
    body = policy_body(
        NAMESPACE,
        roles=["executor", "producer"],
        detection={"expectedWriteIntervalSeconds": WRITE_INTERVAL},
        actions={"producerHung": ["restart", "alert"]},
        # so that only the owner check can spare the bare pod
        safety={"maxConcurrent": 5},
    )
    cluster.kubectl("apply", "-f", "-", stdin=json.dumps(body))
    workdir = tmp_path_factory.mktemp("producers")
    with running_operator(cluster, workdir, "hangwatch-operator-p") as (run, command):
        wait_for_operator(cluster, run, release.webhook_port, "writers", NAMESPACE)
        run.wait_for_log("Activity 'start_remediation' succeeded")
        yield Producers(cluster, release, run, command.metrics_port)


def test_a_labelled_deployments_pod_is_injected_an_unlabelled_one_not(
    producers: Producers,
) -> None:
    cluster = producers.cluster
    for app, opted_in in (("labelled", True), ("unlabelled", False)):
        manifest = deployment(app, 1, opted_in=opted_in)
        cluster.kubectl("apply", "-f", "-", stdin=json.dumps(manifest))
    (labelled,) = producers.pods("labelled", 1)
    (unlabelled,) = producers.pods("unlabelled", 1)
    assert labelled["metadata"]["ownerReferences"][0]["kind"] == "ReplicaSet"
    assert container_names(labelled) == ["service", SIDECAR_CONTAINER]
    sidecar = sidecar_of(labelled)
    assert sidecar is not None and sidecar["restartPolicy"] == "Always"
    args = sidecar["args"]
    assert args[args.index("--expected-write-interval-seconds") + 1] == str(WRITE_INTERVAL)
    assert "--exit-when-gone" not in args
    assert labelled["metadata"]["annotations"][INJECTED_ANNOTATION] == "writers"
    assert container_names(unlabelled) == ["service"]
    assert INJECTED_ANNOTATION not in unlabelled["metadata"].get("annotations", {})


def test_a_spark_executor_with_the_producer_label_is_injected_once(producers: Producers) -> None:
    driver, _ = submit_application(producers.cluster, NAMESPACE, 0, suffix="-both")
    plain = executor_pod_for(driver, 1, suffix="-both")
    both = executor_pod_for(driver, 2, suffix="-both", labels={PRODUCER_LABEL: "true"})
    calls = []
    for body in (plain, both):
        before = producers.requests()
        stored, _ = create_pod(producers.cluster, NAMESPACE, body)
        after = producers.requests()
        calls.append({result: after[result] - before[result] for result in after})
        names = container_names(stored)
        assert names.count(SIDECAR_CONTAINER) == 1, names
    # The same calls as a plain executor's: one injection (and the API server's
    # reinvocation, which finds the pod injected: skipped), never a second webhook's.
    assert calls[1] == calls[0]
    assert calls[0]["injected"] == 1


def test_a_bare_producer_pod_is_never_restarted_an_owned_one_is(producers: Producers) -> None:
    cluster, port = producers.cluster, producers.release.sidecar_port
    manifest = deployment("owned", 4, opted_in=True)
    cluster.kubectl("apply", "-f", "-", stdin=json.dumps(manifest))
    bare_body = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "bare-producer", "labels": {"app": "bare", PRODUCER_LABEL: "true"}},
        "spec": {"containers": [{"name": "service", "image": "registry.example/orders-api:1.4"}]},
    }
    bare_stored, _ = create_pod(cluster, NAMESPACE, bare_body)
    assert SIDECAR_CONTAINER in container_names(bare_stored)
    running: list[RunningPod] = []
    try:
        for stored in [bare_stored, *producers.pods("owned", 4)]:
            running.append(run_pod(cluster, stored, NODE, port))
        bare, hung, *_ = running
        producers.run.wait_for(
            "5 pods polled, healthy",
            lambda: _status(cluster).get("verdictCounts", {}).get("healthy", 0) >= 5,
        )
        set_verdicts([bare, hung], Verdict.PRODUCER_HUNG)
        producers.run.wait_for(
            "the owned hung pod deleted",
            lambda: producers.stored(hung.name)["metadata"].get("deletionTimestamp"),
        )
        rounds = "hangwatch_operator_poll_rounds_total"
        start = producers.metric(rounds, policy=f"{NAMESPACE}/writers")
        producers.run.wait_for(
            "3 more rounds",
            lambda: producers.metric(rounds, policy=f"{NAMESPACE}/writers") >= start + 3,
        )
        assert "deletionTimestamp" not in producers.stored(bare.name)["metadata"]
        refused = producers.metric(
            "hangwatch_operator_suppressions_total",
            policy=f"{NAMESPACE}/writers",
            reason="no_owner",
        )
        assert refused >= 1
        producers.pods("owned", 4)  # the ReplicaSet replaced the deleted pod
    finally:
        for pod in running:
            pod.sidecar.close()


def _status(cluster: LocalCluster) -> dict[str, Any]:
    done = cluster.kubectl("get", "phpolicy", "writers", "-n", NAMESPACE, "-o", "json")
    status: dict[str, Any] = json.loads(done.stdout).get("status") or {}
    return status
