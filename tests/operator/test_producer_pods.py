"""Pods that are not Spark's, opted in with `hangwatch.dev/producer: "true"`: pure parts.

Covers: a pod's role (`spark-role` wins over the producer label, which counts only as
"true"; any labels give a role or None, never an error); only a policy with the
`producer` role covers such a pod; the patch for a Deployment-like producer pod yields a
pod the 1.29 schema (native) and 1.27 schema (legacy) accept, watches the container the
`hangwatch.dev/container` annotation names (else the first), and its sidecar is the one
a Spark pod gets under the same policy (same security context, same user rule) apart
from the legacy `--exit-when-gone`, which only a Spark pod's sidecar has; a producer pod
whose restartPolicy is not Always is injected natively and refused in legacy mode with
one warning; an annotation naming no container (any text, any JSON type) gets exactly one
warning that does not repeat it, and the pod is admitted unchanged; the operator reads a
producer pod's role and controlling owner; remediation refuses to restart or
decommission a producer pod without a controlling owner (alerts go on) and limits
actions per hour per owner, not per Spark application; `hangwatch check`'s dry-run pod
for a producer-only policy is a producer pod, and its selection uses the same role.
"""

from __future__ import annotations

import copy
import dataclasses
from typing import Any

import jsonpatch
import kubernetes_validate
import pytest
from hypothesis import given
from hypothesis import strategies as st

from hangwatch import spark_driver
from hangwatch.contracts import Verdict
from hangwatch_operator.admission import WARNING_PREFIX, Result, Review, admit
from hangwatch_operator.decisions import decide
from hangwatch_operator.history import History
from hangwatch_operator.injection import (
    CONTAINER_ANNOTATION,
    SIDECAR_CONTAINER,
    InjectionConflictError,
    build_sidecar_patch,
)
from hangwatch_operator.install_model import labels_for, selects
from hangwatch_operator.operations import Operation, Outcome, Suppression
from hangwatch_operator.policies import (
    PRODUCER_LABEL,
    SPARK_ROLE_LABEL,
    Role,
    matching_policy,
    pod_role,
)
from hangwatch_operator.settings import InjectionMode, OperatorSettings
from hangwatch_operator.watched import watched_pod
from hangwatch_testing.spark_pods import executor_pod
from tests.operator.builders import NOW, findings, fleet, policy

SETTINGS = OperatorSettings()
NATIVE, LEGACY = InjectionMode.NATIVE, InjectionMode.LEGACY
PRODUCERS = policy(roles=["producer"], detection={"expectedWriteIntervalSeconds": 30})
EXECUTORS_AND_PRODUCERS = policy(roles=["executor", "producer"])
OWNER = {
    "apiVersion": "apps/v1",
    "kind": "ReplicaSet",
    "name": "orders-api-7c9d",
    "uid": "5e0c1f7a-1b2c-4d3e-8f9a-0b1c2d3e4f5a",
    "controller": True,
}


def producer_pod(
    *,
    annotations: dict[str, Any] | None = None,
    restart_policy: str | None = "Always",
    owned: bool = True,
) -> dict[str, Any]:
    """A Deployment's pod (after the API server's defaulting) running a producer service
    beside a log shipper, labelled for injection."""
    meta: dict[str, Any] = {
        "name": "orders-api-7c9d-x2k4p",
        "namespace": "jobs",
        "labels": {"app": "orders-api", PRODUCER_LABEL: "true"},
    }
    if owned:
        meta["ownerReferences"] = [OWNER]
    if annotations is not None:
        meta["annotations"] = annotations
    spec: dict[str, Any] = {
        "containers": [
            {"name": "log-shipper", "image": "fluent/fluent-bit:3.0"},
            {
                "name": "orders-api",
                "image": "registry.example/orders-api:1.4",
                "securityContext": {"runAsUser": 1001, "runAsGroup": 1001},
                "env": [{"name": "KAFKA_BROKERS", "value": "kafka-0:9092"}],
            },
        ],
        "serviceAccountName": "default",
    }
    if restart_policy is not None:
        spec["restartPolicy"] = restart_policy
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}


def _patched(pod: dict[str, Any], mode: InjectionMode) -> Any:
    return jsonpatch.apply_patch(pod, build_sidecar_patch(pod, PRODUCERS, SETTINGS, mode))


def _sidecar(pod: dict[str, Any]) -> dict[str, Any]:
    spec = pod["spec"]
    (found,) = [
        c
        for c in [*spec.get("initContainers", []), *spec["containers"]]
        if c["name"] == SIDECAR_CONTAINER
    ]
    return found


def _review(pod: dict[str, Any]) -> Review:
    return Review("admission.k8s.io/v1", "uid-1", "jobs", pod, "CREATE")


def test_spark_role_wins_and_only_true_opts_in() -> None:
    assert pod_role({SPARK_ROLE_LABEL: "executor", PRODUCER_LABEL: "true"}) == "executor"
    assert pod_role({PRODUCER_LABEL: "true"}) == Role.PRODUCER
    assert pod_role({PRODUCER_LABEL: "True"}) is None
    assert pod_role({"app": "x"}) is None


@given(st.dictionaries(st.sampled_from([SPARK_ROLE_LABEL, PRODUCER_LABEL, "app"]), st.text()))
def test_any_labels_give_a_role_or_none(labels: dict[str, str]) -> None:
    role = pod_role(labels)
    if SPARK_ROLE_LABEL in labels:
        assert role == labels[SPARK_ROLE_LABEL]
    else:
        assert role == (Role.PRODUCER if labels.get(PRODUCER_LABEL) == "true" else None)


def test_only_a_policy_with_the_producer_role_covers_a_producer_pod() -> None:
    executors = policy()
    assert matching_policy(producer_pod(), [executors]) is None
    assert matching_policy(producer_pod(), [PRODUCERS]) == PRODUCERS
    spark = executor_pod(namespace="jobs", labels={PRODUCER_LABEL: "true"})
    assert matching_policy(spark, [PRODUCERS]) is None
    assert matching_policy(spark, [EXECUTORS_AND_PRODUCERS]) == EXECUTORS_AND_PRODUCERS


@pytest.mark.parametrize(("mode", "version"), [(NATIVE, "1.29"), (LEGACY, "1.27")])
def test_a_producer_pod_is_injected_into_a_valid_pod(mode: InjectionMode, version: str) -> None:
    pod = producer_pod()
    patched = _patched(pod, mode)
    kubernetes_validate.validate(patched, version, strict=True)
    sidecar = _sidecar(patched)
    assert "--exit-when-gone" not in sidecar["args"]
    assert sidecar["args"][sidecar["args"].index("--expected-write-interval-seconds") + 1] == "30"
    first, second = patched["spec"]["containers"][:2]
    assert any(m["name"] == "hangwatch-telemetry" for m in first.get("volumeMounts", []))
    assert "volumeMounts" not in second  # only the watched container
    assert sidecar["securityContext"]["runAsUser"] == 65532  # the first declares no user
    assert patched["spec"]["shareProcessNamespace"] is True


def test_the_annotation_picks_the_watched_container_and_its_user() -> None:
    patched = _patched(producer_pod(annotations={CONTAINER_ANNOTATION: "orders-api"}), NATIVE)
    shipper, api = patched["spec"]["containers"]
    assert "volumeMounts" not in shipper
    assert any(e["name"] == "HANGWATCH_TELEMETRY_DIR" for e in api["env"])
    security = _sidecar(patched)["securityContext"]
    assert (security["runAsUser"], security["runAsGroup"]) == (1001, 1001)


@pytest.mark.parametrize("mode", [NATIVE, LEGACY])
def test_the_sidecar_is_a_spark_pods_sidecar_but_for_the_legacy_exit(mode: InjectionMode) -> None:
    spark = executor_pod(namespace="jobs")
    spark_sidecar = _sidecar(
        jsonpatch.apply_patch(
            spark, build_sidecar_patch(spark, EXECUTORS_AND_PRODUCERS, SETTINGS, mode)
        )
    )
    pod = producer_pod()
    producer_sidecar = _sidecar(
        jsonpatch.apply_patch(
            pod, build_sidecar_patch(pod, EXECUTORS_AND_PRODUCERS, SETTINGS, mode)
        )
    )
    spark_args = spark_sidecar.pop("args")
    producer_args = producer_sidecar.pop("args")
    driver = {spark_driver.SIDECAR_DRIVER_URL_ENV, spark_driver.SIDECAR_UI_PORT_ENV}
    spark_sidecar["env"] = [e for e in spark_sidecar["env"] if e["name"] not in driver]
    assert producer_sidecar == spark_sidecar
    if mode is LEGACY:
        at = spark_args.index("--exit-when-gone")
        assert producer_args == spark_args[:at] + spark_args[at + 2 :]
    else:
        assert producer_args == spark_args


@pytest.mark.parametrize("restart", ["Never", "OnFailure"])
def test_a_pod_that_ends_needs_native_sidecars(restart: str) -> None:
    pod = producer_pod(restart_policy=restart)
    kubernetes_validate.validate(_patched(pod, NATIVE), "1.29", strict=True)
    with pytest.raises(InjectionConflictError, match="restartPolicy is not Always"):
        build_sidecar_patch(pod, PRODUCERS, SETTINGS, LEGACY)
    admission = admit(_review(pod), [PRODUCERS], SETTINGS, 27)
    assert admission.result is Result.SKIPPED and not admission.ops
    assert len(admission.warnings) == 1


def test_no_restart_policy_means_always() -> None:
    assert _patched(producer_pod(restart_policy=None), LEGACY) is not None


_HOSTILE = st.one_of(
    st.text(max_size=300).filter(lambda t: t not in {"log-shipper", "orders-api"}),
    st.integers(),
    st.none(),
    st.booleans(),
    st.lists(st.text(max_size=5), max_size=3),
    st.dictionaries(st.text(max_size=5), st.text(max_size=5), max_size=3),
)


@given(_HOSTILE, st.sampled_from([27, 30]))
def test_an_annotation_naming_no_container_gets_one_warning_and_no_patch(
    value: Any, server_minor: int
) -> None:
    pod = producer_pod(annotations={CONTAINER_ANNOTATION: value})
    before = copy.deepcopy(pod)
    admission = admit(_review(pod), [PRODUCERS], SETTINGS, server_minor)
    assert admission.result is Result.SKIPPED and not admission.ops
    (warning,) = admission.warnings
    assert (
        warning
        == f"{WARNING_PREFIX}annotation {CONTAINER_ANNOTATION} names no container of the pod"
    )
    assert pod == before


def test_a_producer_pod_without_containers_is_left_alone() -> None:
    pod = producer_pod()
    pod["spec"]["containers"] = []
    admission = admit(_review(pod), [PRODUCERS], SETTINGS, 30)
    assert admission.result is Result.SKIPPED and len(admission.warnings) == 1


def test_the_operator_reads_a_producer_pods_role_and_owner() -> None:
    pod = producer_pod()
    watched = watched_pod(pod, 9477)
    assert (watched.role, watched.owner, watched.limit_group) == (
        "producer",
        "ReplicaSet/orders-api-7c9d",
        "ReplicaSet/orders-api-7c9d",
    )
    assert watched.replaceable
    bare = watched_pod(producer_pod(owned=False), 9477)
    assert bare.owner is None and not bare.replaceable
    not_controller = producer_pod()
    not_controller["metadata"]["ownerReferences"] = [{**OWNER, "controller": False}]
    assert watched_pod(not_controller, 9477).owner is None
    spark = watched_pod(executor_pod(), 9477)
    assert spark.replaceable and spark.limit_group == spark.application_id


@pytest.mark.parametrize("operation", ["restart", "decommission"])
def test_a_bare_producer_pod_is_never_deleted_but_still_alerted(operation: str) -> None:
    bare = dataclasses.replace(watched_pod(producer_pod(owned=False), 9477), ip="10.0.0.9")
    acting = policy(roles=["producer"], actions={"producerHung": [operation, "alert"]})
    decisions = decide(findings((bare, Verdict.PRODUCER_HUNG), *fleet(3)), acting, History(), NOW)
    by_operation = {d.operation: d for d in decisions if d.pod == bare}
    assert by_operation[Operation.ALERT].outcome is Outcome.ACTED
    suppressed = by_operation[Operation(operation)]
    assert (suppressed.outcome, suppressed.suppression) == (
        Outcome.SUPPRESSED,
        Suppression.NO_OWNER,
    )


def _producer(name: str, owner: str) -> Any:
    pod = producer_pod()
    pod["metadata"]["name"] = name
    pod["metadata"]["ownerReferences"] = [{**OWNER, "name": owner}]
    return dataclasses.replace(watched_pod(pod, 9477), ip="10.0.0.9")


def test_the_hourly_limit_counts_per_owner() -> None:
    acting = policy(
        roles=["producer"],
        safety={"maxActionsPerApplicationPerHour": 1, "maxConcurrent": 5},
    )
    hung = [_producer("a-1", "a"), _producer("a-2", "a"), _producer("b-1", "b")]
    many = findings(*[(p, Verdict.PRODUCER_HUNG) for p in hung], *fleet(6))
    outcomes = {
        d.pod.name: (d.outcome, d.suppression)
        for d in decide(many, acting, History(), NOW)
        if d.pod is not None and d.operation is Operation.RESTART
    }
    assert sorted(outcomes.values()).count((Outcome.ACTED, None)) == 2
    assert outcomes["b-1"] == (Outcome.ACTED, None)
    assert {outcomes["a-1"][1], outcomes["a-2"][1]} == {None, Suppression.RATE_LIMIT}


def test_hangwatch_checks_dry_run_pod_of_a_producer_only_policy_is_a_producer_pod() -> None:
    labels = labels_for(PRODUCERS)
    assert pod_role(labels) == Role.PRODUCER and SPARK_ROLE_LABEL not in labels
    assert selects(PRODUCERS, producer_pod())
    assert not selects(PRODUCERS, executor_pod(namespace="jobs"))
