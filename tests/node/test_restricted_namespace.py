"""An executor in a namespace enforcing the restricted Pod Security level, with its sidecar.

The namespace carries `pod-security.kubernetes.io/enforce: restricted`; its policy
opts into the process view (which restricted refuses). The driver and the executor are
restricted-compliant as a team's pod template makes them (`make_restricted`: Spark's
uid 185, seccomp RuntimeDefault, no privilege escalation, every capability dropped);
the executor runs a process from the hangwatch image that opens a connection to an
unanswering broker (the policy's only bootstrap address) and holds a request on it.
Covered, on a real kubelet:

- the API server admits the injected executor; it runs with the native sidecar, which
  runs as the executor's user (185), with no capability and no privilege escalation;
- the sidecar's /status names the pod, says the process view was left out
  (`not_judged`), lists the executor's connection in its socket view (sock_diag with no
  capability), and judges the frozen broker: `cluster_unreachable` (no restart);
- the policy's status counts the pod under `notJudged`.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

from hangwatch.pod_security import ENFORCE_LABEL
from hangwatch_operator.injection import SIDECAR_CONTAINER
from hangwatch_testing.emulated_cluster import OperatorRun
from hangwatch_testing.kube.release import HelmRelease
from hangwatch_testing.kube.spark import as_submitted
from hangwatch_testing.node.cluster import NodeCluster
from hangwatch_testing.node.workloads import (
    create_pod,
    ensure_namespace,
    executor_for,
    executor_script,
    operator_with_policies,
    policy,
    wait_for_connection_in_status,
    wait_pod_phase,
)
from hangwatch_testing.silent_broker import SilentBroker
from hangwatch_testing.spark_pods import SPARK_UID, driver_pod, make_restricted

pytestmark = [pytest.mark.xdist_group("node"), pytest.mark.timeout(1200)]

NAMESPACE = "spark-restricted"
POLICY = "restricted-executors"


@pytest.fixture(scope="module")
def operator(
    node: NodeCluster,
    release: HelmRelease,
    broker: SilentBroker,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[OperatorRun]:
    if not node.exists(f"/api/v1/namespaces/{NAMESPACE}"):
        labels = {ENFORCE_LABEL: "restricted"}
        node.create("/api/v1/namespaces", {"metadata": {"name": NAMESPACE, "labels": labels}})
    ensure_namespace(node, NAMESPACE)
    body = policy(POLICY, broker.address, namespace=NAMESPACE)
    body["spec"]["processView"] = {"enabled": True}
    workdir = tmp_path_factory.mktemp("restricted")
    with operator_with_policies(node, release, workdir, NAMESPACE, body) as run:
        yield run


def test_a_restricted_executor_runs_with_its_sidecar_and_the_frozen_broker_is_judged(
    node: NodeCluster,
    release: HelmRelease,
    hangwatch_image: str,
    operator: OperatorRun,
    broker: SilentBroker,
) -> None:
    driver = make_restricted(as_submitted(driver_pod()))
    driver["metadata"]["name"] += "-restricted"
    driver["spec"]["schedulingGates"] = [{"name": "hangwatch.dev/not-run-here"}]
    driver = node.create(f"/api/v1/namespaces/{NAMESPACE}/pods", driver)
    script = executor_script(release.sidecar_port, broker.address, seconds=120)
    body = executor_for(
        node, driver, 1, hangwatch_image, script, suffix="-restricted", namespace=NAMESPACE
    )
    stored = create_pod(node, make_restricted(body), NAMESPACE)  # admitted by restricted
    name = stored["metadata"]["name"]
    try:
        (sidecar,) = stored["spec"]["initContainers"]
        assert sidecar["name"] == SIDECAR_CONTAINER
        context = sidecar["securityContext"]
        assert context["runAsUser"] == SPARK_UID and context["runAsGroup"] == SPARK_UID
        assert context["capabilities"] == {"drop": ["ALL"]}
        assert context["allowPrivilegeEscalation"] is False

        pod_ip = wait_pod_phase(node, name, "Running", NAMESPACE)["status"]["podIP"]
        started = time.monotonic()
        status = wait_for_connection_in_status(
            pod_ip, release.sidecar_port, broker, verdict="cluster_unreachable", timeout=180
        )
        print(f"restricted: cluster_unreachable {time.monotonic() - started:.1f} s after Running")
        assert name in status["identity"].values(), status["identity"]
        assert set(status["not_judged"]) == {"process_view"}, status["not_judged"]

        base = f"/apis/hangwatch.dev/v1alpha1/namespaces/{NAMESPACE}/producerhealthpolicies"

        def counted() -> Any:
            found = node.get(f"{base}/{POLICY}").get("status", {}).get("notJudged") or []
            return found if any(e["feature"] == "process_view" for e in found) else None

        (entry,) = operator.wait_for("status.notJudged", counted)
        assert entry["watchedPods"] >= 1, entry
    finally:
        node.delete(f"/api/v1/namespaces/{NAMESPACE}/pods/{name}", grace_seconds=0)
