"""Executor pods go through the real admission chain and the operator's webhook.

The operator runs as a process configured from the installed Deployment, authenticated
with a real token of the chart's ServiceAccount; the API server calls its webhook
through the chart's Service (ClusterIP on loopback) verifying the chart's caBundle.
Covered:

- an executor pod created as Spark's driver creates it (owned by the real driver pod,
  token mounted by the ServiceAccount plugin) is stored with the sidecar container,
  the telemetry volume mounted in both containers, the policy label and the injected
  and mode annotations: native mode (an init container with `restartPolicy: Always`),
  chosen automatically because the server is 1.29 or newer, with the pod's process
  namespace shared (always; tests/node starts such pods);
- the sidecar's arguments are those the policy gives (`injection.sidecar_args`);
- the driver, a pod without Spark labels and an executor annotated
  `hangwatch.dev/inject: "false"` are stored untouched;
- with the operator stopped, executor pods are still admitted (failurePolicy Ignore),
  without a sidecar (the admission latency then is measured by `benchmarks/admission.py`);
- every request the operator made is in the audit log as its ServiceAccount, and none
  was forbidden; with the same token, reading Secrets, reading or patching nodes
  (cordoning off), creating namespaces and deleting the webhook configuration are
  forbidden.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from hangwatch_operator.injection import (
    INJECTED_ANNOTATION,
    MODE_ANNOTATION,
    POLICY_LABEL,
    SIDECAR_CONTAINER,
    TELEMETRY_VOLUME,
    sidecar_args,
)
from hangwatch_operator.policies import parse_policy
from hangwatch_operator.settings import InjectionMode, OperatorSettings
from hangwatch_testing.emulated_cluster import OperatorRun
from hangwatch_testing.kube.cluster import LocalCluster
from hangwatch_testing.kube.release import (
    OPERATOR_USER,
    HelmRelease,
    operator_kubeconfig,
    running_operator,
    wait_for_operator,
)
from hangwatch_testing.kube.spark import (
    container_names,
    create_pod,
    ensure_namespace,
    executor_pod_for,
    submit_application,
)
from hangwatch_testing.structural import EXECUTOR_POLICY

pytestmark = pytest.mark.xdist_group("kube")

NAMESPACE = "spark-jobs"


@pytest.fixture(scope="module")
def operator(
    cluster: LocalCluster, release: HelmRelease, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[OperatorRun]:
    ensure_namespace(cluster, NAMESPACE)
    cluster.kubectl("apply", "-f", str(EXECUTOR_POLICY))
    with running_operator(cluster, tmp_path_factory.mktemp("admission")) as (run, _):
        wait_for_operator(cluster, run, release.webhook_port, "orders-writers", NAMESPACE)
        yield run


def _policy_settings(release: HelmRelease) -> tuple[Any, OperatorSettings]:
    policy = parse_policy(yaml.safe_load(EXECUTOR_POLICY.read_text()))
    return policy, OperatorSettings(sidecar_port=release.sidecar_port)


def test_executor_is_stored_with_the_native_sidecar(
    cluster: LocalCluster, release: HelmRelease, operator: OperatorRun
) -> None:
    _, (executor,) = submit_application(cluster, NAMESPACE, 1, suffix="-inj")
    meta, spec = executor["metadata"], executor["spec"]
    assert container_names(executor) == ["spark-kubernetes-executor", SIDECAR_CONTAINER]
    (sidecar,) = spec["initContainers"]
    assert sidecar["name"] == SIDECAR_CONTAINER and sidecar["restartPolicy"] == "Always"
    assert spec["shareProcessNamespace"] is True  # in either mode (every PSS level admits it)
    assert meta["labels"][POLICY_LABEL] == "orders-writers"
    assert meta["annotations"][INJECTED_ANNOTATION] == "orders-writers"
    assert meta["annotations"][MODE_ANNOTATION] == "native"
    assert {"name": TELEMETRY_VOLUME, "emptyDir": {}} in spec["volumes"]
    policy, settings = _policy_settings(release)
    assert sidecar["args"] == sidecar_args(policy, settings, InjectionMode.NATIVE)
    assert sidecar["ports"][0]["containerPort"] == release.sidecar_port
    for container in [*spec["containers"], sidecar]:
        mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
        assert mounts[TELEMETRY_VOLUME] == settings.telemetry_dir
    # the ServiceAccount plugin ran before the webhook: the token is mounted as usual
    assert any(v["name"].startswith("kube-api-access-") for v in spec["volumes"])
    assert "Injected the hangwatch sidecar into pod" in operator.log()


def test_driver_non_spark_and_opted_out_pods_are_untouched(
    cluster: LocalCluster, release: HelmRelease, operator: OperatorRun
) -> None:
    driver, _ = submit_application(cluster, NAMESPACE, 0, suffix="-untouched")
    assert container_names(driver) == ["spark-kubernetes-driver"]
    opted_out = executor_pod_for(
        driver, 7, suffix="-opted-out", annotations={"hangwatch.dev/inject": "false"}
    )
    stored, _ = create_pod(cluster, NAMESPACE, opted_out)
    plain = executor_pod_for(driver, 8, suffix="-plain")
    plain["metadata"]["labels"] = {"app": "not-spark", "team": "payments"}
    stored_plain, _ = create_pod(cluster, NAMESPACE, plain)
    for pod in (driver, stored, stored_plain):
        assert SIDECAR_CONTAINER not in container_names(pod)
        assert POLICY_LABEL not in pod["metadata"].get("labels", {})
        assert INJECTED_ANNOTATION not in pod["metadata"].get("annotations", {})
        assert "shareProcessNamespace" not in pod["spec"]


def test_every_operator_call_was_authorised_by_rbac(
    cluster: LocalCluster, release: HelmRelease, operator: OperatorRun
) -> None:
    time.sleep(0.5)  # the audit log is written in batches
    calls = [e for e in cluster.audit_events() if e["user"]["username"] == OPERATOR_USER]
    assert calls, "the operator made no call as its ServiceAccount"
    forbidden = [(e["verb"], e["requestURI"]) for e in calls if e["responseStatus"]["code"] == 403]
    assert forbidden == [], forbidden
    seen = {(e["verb"], e.get("objectRef", {}).get("resource")) for e in calls}
    # (watches are audited when they end, so lists stand for them here)
    for expected in [
        ("list", "pods"),
        ("list", "producerhealthpolicies"),
        ("patch", "producerhealthpolicies"),  # status (and kopf's progress annotations)
        ("patch", "clusterkopfpeerings"),  # peering keep-alives
        ("list", "nodes"),  # the index of cordoned nodes
    ]:
        assert expected in seen, sorted(map(str, seen))


def test_calls_outside_the_role_are_forbidden_with_the_operators_token(
    cluster: LocalCluster, release: HelmRelease, tmp_path: Path
) -> None:
    kubeconfig = operator_kubeconfig(cluster, tmp_path)
    assert cluster.kubectl("get", "pods", "-n", NAMESPACE, kubeconfig=kubeconfig).returncode == 0
    for args in [
        ("get", "secrets", "-n", "hangwatch-system"),
        ("get", "secret", "hangwatch-webhook-tls", "-n", "hangwatch-system"),
        ("patch", "node", "any-node", "-p", '{"spec":{"unschedulable":true}}'),
        ("get", "node", "any-node"),
        ("create", "namespace", "operator-may-not"),
        ("delete", "mutatingwebhookconfiguration", "hangwatch-sidecar-injector"),
    ]:
        done = cluster.kubectl(*args, kubeconfig=kubeconfig, check=False)
        assert done.returncode != 0 and "Forbidden" in done.stderr, (args, done.stderr)
        assert f'User "{OPERATOR_USER}" cannot' in done.stderr


def test_pods_are_admitted_with_the_operator_stopped(
    cluster: LocalCluster, release: HelmRelease, operator: OperatorRun, tmp_path: Path
) -> None:
    operator.process.terminate()
    operator.process.wait(30)
    driver, _ = submit_application(cluster, NAMESPACE, 0, suffix="-down")
    for exec_id in range(1, 11):
        body = executor_pod_for(driver, exec_id, suffix="-down")
        stored, _ = create_pod(cluster, NAMESPACE, body)
        assert SIDECAR_CONTAINER not in container_names(stored)
