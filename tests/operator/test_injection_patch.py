"""Sidecar injection as a pure function: what the patch adds, and that it adds nothing else.

Covers: the JSONPatch for a realistic Spark 3.5 executor pod, applied with the
`jsonpatch` library, yields a pod the Kubernetes 1.29 Pod schema accepts (native) or the
1.27 schema accepts (legacy, which must not use init-container restartPolicy); native
puts the sidecar in initContainers with restartPolicy Always, legacy in containers with
shareProcessNamespace and `--exit-when-gone`; the sidecar contract (image, command, args
from the policy, probe timeouts as settings variables, port, probes, downward-API
identity, secrets only by secretKeyRef, hardened security context); the executor's
driver address and a `spark.ui.port` the job set reach the sidecar (and its own settings
read them into the driver UI's address), a driver address from a per-container source is
not copied; the executor container gets the mount and env without overriding what it
set; everything else in the pod is untouched (before == after minus the injected parts);
injection is idempotent and reinvocation-safe; opt-out by annotation; pods no policy
covers (other labels, driver role, other namespace) are left alone; conflicts are
refused; null lists and maps are created like absent ones; for every case of
`webhook_cases` the operations yield the pod the webhook's answer yielded before issue
15 (kopf's whole-pod diff, recorded in `webhook_operations.json`), apart from the
driver address the Spark view added since; the mode resolution table; our own
`apply_add_ops` agrees with `jsonpatch`.
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
from typing import Any

import jsonpatch
import kubernetes_validate
import pytest

from hangwatch.pod_security import NOT_JUDGED_ENV
from hangwatch_operator.injection import (
    INJECTED_ANNOTATION,
    MODE_ANNOTATION,
    POLICY_LABEL,
    SIDECAR_CONTAINER,
    TELEMETRY_VOLUME,
    InjectionConflictError,
    apply_add_ops,
    build_sidecar_patch,
    forced_native_note,
    resolve_injection_mode,
    server_minor_version,
)
from hangwatch_operator.policies import Policy, ProcessView, matching_policy, parse_policy
from hangwatch_operator.settings import InjectionMode, OperatorSettings
from hangwatch_sidecar import settings as sidecar_settings
from hangwatch_testing.spark_pods import PREFIX, driver_pod, executor_pod
from hangwatch_testing.structural import EXAMPLES, apply_defaults, load_yaml, version_schema
from tests.operator.webhook_cases import CASES, RECORDED, as_recorded, case_pod
from tests.operator.webhook_server import POLICY_OF

SETTINGS = OperatorSettings()
NATIVE, LEGACY = InjectionMode.NATIVE, InjectionMode.LEGACY
HANGWATCH_ENV = {
    "HANGWATCH_TELEMETRY_DIR",
    "HANGWATCH_POD_NAME",
    "HANGWATCH_POD_NAMESPACE",
    "HANGWATCH_NODE_NAME",
}


def _policy(example: str = "policy-spark-executors.yaml") -> Policy:
    return parse_policy(apply_defaults(version_schema(), load_yaml(EXAMPLES / example)))


def _inject(pod: dict[str, Any], mode: InjectionMode, policy: Policy | None = None) -> Any:
    ops = build_sidecar_patch(pod, policy or _policy(), SETTINGS, mode)
    return jsonpatch.apply_patch(pod, ops)


def _sidecar(pod: dict[str, Any]) -> dict[str, Any]:
    spec = pod["spec"]
    found = [c for c in spec.get("initContainers", []) + spec["containers"]]
    (sidecar,) = [c for c in found if c["name"] == SIDECAR_CONTAINER]
    return sidecar


def _strip_injection(pod: dict[str, Any]) -> dict[str, Any]:
    """`pod` minus everything injection may add."""
    pod = copy.deepcopy(pod)
    meta, spec = pod["metadata"], pod["spec"]
    for key in (
        INJECTED_ANNOTATION,
        MODE_ANNOTATION,
        *(f"prometheus.io/{k}" for k in ("scrape", "port", "path")),
    ):
        meta.get("annotations", {}).pop(key, None)
    if meta.get("annotations") == {}:
        del meta["annotations"]
    del meta["labels"][POLICY_LABEL]
    spec.pop("shareProcessNamespace", None)
    spec["volumes"] = [v for v in spec["volumes"] if v["name"] != TELEMETRY_VOLUME]
    for key in ("containers", "initContainers"):
        spec[key] = [c for c in spec.get(key, []) if c["name"] != SIDECAR_CONTAINER]
    if spec["initContainers"] == []:
        del spec["initContainers"]
    for container in spec["containers"]:
        container["volumeMounts"] = [
            m for m in container["volumeMounts"] if m["name"] != TELEMETRY_VOLUME
        ]
        container["env"] = [e for e in container["env"] if e["name"] not in HANGWATCH_ENV]
    return pod


def test_native_injection_yields_a_pod_the_1_29_schema_accepts() -> None:
    pod = _inject(executor_pod(), NATIVE)
    kubernetes_validate.validate(pod, "1.29", strict=True)
    (sidecar,) = pod["spec"]["initContainers"]
    assert sidecar["name"] == SIDECAR_CONTAINER and sidecar["restartPolicy"] == "Always"
    assert [c["name"] for c in pod["spec"]["containers"]] == ["spark-kubernetes-executor"]
    # shared in either mode (every Pod Security level admits it): same-user evidence
    # needs the executor's processes visible, with or without the process view
    assert pod["spec"]["shareProcessNamespace"] is True
    assert pod["metadata"]["annotations"][MODE_ANNOTATION] == "native"
    on = dataclasses.replace(_policy(), process_view=ProcessView(enabled=True))
    assert _inject(executor_pod(), NATIVE, on)["spec"]["shareProcessNamespace"] is True


def test_legacy_injection_yields_a_pod_the_1_27_schema_accepts() -> None:
    pod = _inject(executor_pod(), LEGACY)
    kubernetes_validate.validate(pod, "1.27", strict=True)
    assert [c["name"] for c in pod["spec"]["containers"]] == [
        "spark-kubernetes-executor",
        SIDECAR_CONTAINER,
    ]
    assert "initContainers" not in pod["spec"] and pod["spec"]["shareProcessNamespace"] is True
    args = _sidecar(pod)["args"]
    assert args[args.index("--exit-when-gone") + 1] == "ExecutorBackend"
    assert "restartPolicy" not in _sidecar(pod)


def test_native_sidecars_are_unknown_to_1_27_which_is_why_legacy_exists() -> None:
    with pytest.raises(kubernetes_validate.ValidationError, match="restartPolicy"):
        kubernetes_validate.validate(_inject(executor_pod(), NATIVE), "1.27", strict=True)


def test_sidecar_follows_the_contract() -> None:
    sidecar = _sidecar(_inject(executor_pod(), NATIVE))
    assert sidecar["image"] == "ghcr.io/hangwatch/hangwatch:0.1.0"
    assert sidecar["command"] == ["hangwatch", "sidecar"]
    assert sidecar["args"] == [
        "--bootstrap", "kafka-0.kafka.orders.svc:9093,kafka-1.kafka.orders.svc:9093,"
        "kafka-2.kafka.orders.svc:9093",
        "--topics", "orders.enriched,orders.dlq",
        "--port", "9477",
        "--probe-interval-seconds", "10",
        "--stall-seconds", "90",
        "--heartbeat-seconds", "30",
        "--metadata-max-age-seconds", "900",
        "--election-grace-seconds", "30",
        "--producer-request-timeout-seconds", "30",
        "--time-to-error-budget-seconds", "120",
        "--telemetry-dir", "/var/run/hangwatch/telemetry",
    ]  # fmt: skip
    assert sidecar["ports"] == [{"name": "hangwatch", "containerPort": 9477, "protocol": "TCP"}]
    for probe in ("readinessProbe", "livenessProbe"):
        assert sidecar[probe]["httpGet"] == {"path": "/healthz", "port": "hangwatch"}
    assert sidecar["resources"] == {
        "requests": {"cpu": "50m", "memory": "64Mi"},
        "limits": {"memory": "128Mi"},
    }
    assert sidecar["volumeMounts"] == [
        {"name": TELEMETRY_VOLUME, "mountPath": "/var/run/hangwatch/telemetry", "readOnly": True}
    ]
    # the default passes the restricted Pod Security Standard
    assert sidecar["securityContext"] == {
        "runAsNonRoot": True,
        "runAsUser": 65532,
        "runAsGroup": 65532,
        "readOnlyRootFilesystem": True,
        "allowPrivilegeEscalation": False,
        "capabilities": {"drop": ["ALL"]},
        "seccompProfile": {"type": "RuntimeDefault"},
    }
    env = {e["name"]: e.get("value") for e in sidecar["env"]}
    assert env["HANGWATCH_PYTHON_STACKS"] == "false" and NOT_JUDGED_ENV not in env
    # the opt-in process view: SYS_PTRACE in the bounding set, reached only by py-spy's
    # file capability on exec (so privilege escalation stays allowed for that exec)
    on = dataclasses.replace(_policy(), process_view=ProcessView(enabled=True))
    opened = _sidecar(_inject(executor_pod(), NATIVE, on))["securityContext"]
    assert opened["allowPrivilegeEscalation"] is True
    assert opened["capabilities"] == {"drop": ["ALL"], "add": ["SYS_PTRACE"]}


def test_sidecar_identity_comes_from_the_downward_api() -> None:
    env = {e["name"]: e for e in _sidecar(_inject(executor_pod(), NATIVE))["env"]}
    fields = {
        name: e["valueFrom"]["fieldRef"]["fieldPath"]
        for name, e in env.items()
        if "valueFrom" in e and "fieldRef" in e["valueFrom"]
    }
    assert fields == {
        "HANGWATCH_POD_NAME": "metadata.name",
        "HANGWATCH_POD_NAMESPACE": "metadata.namespace",
        "HANGWATCH_NODE_NAME": "spec.nodeName",
        "HANGWATCH_EXECUTOR_ID": "metadata.labels['spark-exec-id']",
        "HANGWATCH_APPLICATION_ID": "metadata.labels['spark-app-selector']",
    }
    assert env["HANGWATCH_TELEMETRY_DIR"]["value"] == "/var/run/hangwatch/telemetry"
    assert env["HANGWATCH_CONNECT_TIMEOUT_MS"]["value"] == "2000"
    assert env["HANGWATCH_REQUEST_TIMEOUT_MS"]["value"] == "3000"


def _spark_env(pod: dict[str, Any]) -> dict[str, dict[str, Any]]:
    env = _sidecar(_inject(pod, NATIVE))["env"]
    return {e["name"]: e for e in env if e["name"].startswith("HANGWATCH_SPARK_")}


def test_sidecar_gets_the_executors_driver_address_and_ui_port() -> None:
    pod = executor_pod()
    executor_env = pod["spec"]["containers"][0]["env"]
    driver_url = next(e["value"] for e in executor_env if e["name"] == "SPARK_DRIVER_URL")
    assert _spark_env(pod) == {
        "HANGWATCH_SPARK_DRIVER_URL": {"name": "HANGWATCH_SPARK_DRIVER_URL", "value": driver_url}
    }
    executor_env.append({"name": "SPARK_JAVA_OPT_1", "value": "-Dspark.ui.port=4050"})
    env = _spark_env(pod)
    assert env["HANGWATCH_SPARK_UI_PORT"]["value"] == "4050"
    # The sidecar's own settings read these variables into the driver UI's address.
    parser = argparse.ArgumentParser()
    sidecar_settings.add_arguments(parser)
    values = {name: e["value"] for name, e in env.items()} | {"HANGWATCH_BOOTSTRAP": "k:9092"}
    ui = sidecar_settings.from_args(parser.parse_args([]), values).spark_ui
    assert ui is not None and ui.url == f"http://{PREFIX}-driver-svc.spark-jobs.svc:4050"


def test_driver_address_from_elsewhere_is_copied_only_when_pod_wide() -> None:
    pod = executor_pod()
    env = pod["spec"]["containers"][0]["env"]
    (url,) = [e for e in env if e["name"] == "SPARK_DRIVER_URL"]
    ref = {"configMapKeyRef": {"name": "spark-driver", "key": "url"}}
    url.pop("value")
    url["valueFrom"] = ref
    assert _spark_env(pod)["HANGWATCH_SPARK_DRIVER_URL"]["valueFrom"] == ref
    url["valueFrom"] = {"resourceFieldRef": {"resource": "limits.cpu"}}  # per container
    assert _spark_env(pod) == {}
    env.remove(url)
    env.append({"name": "SPARK_JAVA_OPT_3", "value": "-Dspark.ui.port=0"})  # random port
    assert _spark_env(pod) == {}


def test_kafka_secrets_are_referenced_never_inlined() -> None:
    env = {e["name"]: e for e in _sidecar(_inject(executor_pod(), NATIVE))["env"]}
    assert env["HANGWATCH_KAFKA_SECURITY_PROTOCOL"] == {
        "name": "HANGWATCH_KAFKA_SECURITY_PROTOCOL",
        "value": "SASL_SSL",
    }
    assert env["HANGWATCH_KAFKA_SASL_MECHANISM"]["value"] == "SCRAM-SHA-512"
    secret_refs = {
        name: e["valueFrom"]["secretKeyRef"]
        for name, e in env.items()
        if "secretKeyRef" in e.get("valueFrom", {})
    }
    assert secret_refs == {
        "HANGWATCH_KAFKA_SASL_USERNAME": {
            "name": "kafka-client",
            "key": "username",
            "optional": False,
        },
        "HANGWATCH_KAFKA_SASL_PASSWORD": {
            "name": "kafka-client",
            "key": "password",
            "optional": False,
        },
        "HANGWATCH_KAFKA_SSL_CA_PEM": {"name": "kafka-client", "key": "ca.pem", "optional": False},
    }
    assert all("value" not in env[name] for name in secret_refs)


def test_executor_container_gets_the_mount_and_env_but_keeps_its_own_values() -> None:
    pod = executor_pod()
    pod["spec"]["containers"][0]["env"].append({"name": "HANGWATCH_POD_NAME", "value": "mine"})
    executor = _inject(pod, NATIVE)["spec"]["containers"][0]
    assert {"name": TELEMETRY_VOLUME, "mountPath": "/var/run/hangwatch/telemetry"} in executor[
        "volumeMounts"
    ]
    env = [e for e in executor["env"] if e["name"].startswith("HANGWATCH_")]
    assert [e["name"] for e in env] == [
        "HANGWATCH_POD_NAME",
        "HANGWATCH_TELEMETRY_DIR",
        "HANGWATCH_POD_NAMESPACE",
        "HANGWATCH_NODE_NAME",
    ]
    assert env[0] == {"name": "HANGWATCH_POD_NAME", "value": "mine"}


@pytest.mark.parametrize("mode", [NATIVE, LEGACY])
def test_everything_else_in_the_pod_is_untouched(mode: InjectionMode) -> None:
    before = executor_pod()
    after = _inject(before, mode)
    assert after != before
    assert _strip_injection(after) == before
    labels = after["metadata"]["labels"]
    assert labels[POLICY_LABEL] == "orders-writers"
    assert after["metadata"]["annotations"][INJECTED_ANNOTATION] == "orders-writers"


def test_existing_prometheus_annotations_are_not_overwritten() -> None:
    theirs = {"prometheus.io/scrape": "true", "prometheus.io/port": "4040"}
    pod = _inject(executor_pod(annotations=theirs), NATIVE)
    assert pod["metadata"]["annotations"]["prometheus.io/port"] == "4040"
    assert "prometheus.io/path" not in pod["metadata"]["annotations"]


@pytest.mark.parametrize("mode", [NATIVE, LEGACY])
def test_injection_is_idempotent_and_reinvocation_safe(mode: InjectionMode) -> None:
    once = _inject(executor_pod(), mode)
    assert build_sidecar_patch(once, _policy(), SETTINGS, mode) == []
    # Another webhook (a service mesh) added its proxy after us; we are called again.
    once["spec"]["containers"].append({"name": "istio-proxy", "image": "istio/proxyv2:1.22.0"})
    assert build_sidecar_patch(once, _policy(), SETTINGS, mode) == []
    # Even with our annotation stripped by someone, the container name is recognised.
    del once["metadata"]["annotations"][INJECTED_ANNOTATION]
    assert build_sidecar_patch(once, _policy(), SETTINGS, mode) == []


@pytest.mark.parametrize("value", ["false", "False", " FALSE "])
def test_pod_can_opt_out_by_annotation(value: str) -> None:
    pod = executor_pod(annotations={"hangwatch.dev/inject": value})
    assert matching_policy(pod, [_policy()]) is not None
    assert build_sidecar_patch(pod, _policy(), SETTINGS, NATIVE) == []


def test_pods_no_policy_covers_are_left_alone() -> None:
    policy = _policy()
    assert matching_policy(executor_pod(labels={"team": "search"}), [policy]) is None
    assert matching_policy(executor_pod(labels={"spark-app-name": "adhoc"}), [policy]) is None
    assert matching_policy(driver_pod(), [policy]) is None
    assert matching_policy(executor_pod(namespace="analytics"), [policy]) is None
    plain = executor_pod()
    del plain["metadata"]["labels"]["spark-role"]
    assert matching_policy(plain, [policy]) is None
    assert matching_policy(executor_pod(), [policy]) is policy


def test_first_policy_by_name_wins_when_several_cover_a_pod() -> None:
    body = apply_defaults(version_schema(), load_yaml(EXAMPLES / "policy-dry-run.yaml"))
    body["metadata"]["namespace"] = "spark-jobs"
    broad = parse_policy(body)
    assert matching_policy(executor_pod(), [_policy(), broad]).name == "orders-writers"


def test_bare_pod_without_lists_or_maps_gets_them_created() -> None:
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "e", "namespace": "analytics", "labels": {"spark-role": "executor"}},
        "spec": {"containers": [{"name": "spark-kubernetes-executor", "image": "spark:3.5.1"}]},
    }
    patched = _inject(pod, NATIVE, _policy("policy-dry-run.yaml"))
    kubernetes_validate.validate(patched, "1.29", strict=True)
    assert patched["spec"]["volumes"] == [{"name": TELEMETRY_VOLUME, "emptyDir": {}}]
    executor = patched["spec"]["containers"][0]
    assert {e["name"] for e in executor["env"]} == HANGWATCH_ENV
    assert [m["name"] for m in executor["volumeMounts"]] == [TELEMETRY_VOLUME]
    assert patched["metadata"]["annotations"][INJECTED_ANNOTATION] == "try-it-out"


def test_null_lists_and_maps_are_created_like_absent_ones() -> None:
    """JSON null where a list or map belongs (what a client may send for an empty one)."""
    pod = executor_pod()
    pod["metadata"]["annotations"] = None
    pod["spec"]["volumes"] = None
    pod["spec"]["containers"][0] |= {"env": None, "volumeMounts": None}
    patched = _inject(pod, NATIVE)
    kubernetes_validate.validate(patched, "1.29", strict=True)
    executor = patched["spec"]["containers"][0]
    assert {e["name"] for e in executor["env"]} == HANGWATCH_ENV
    assert [m["name"] for m in executor["volumeMounts"]] == [TELEMETRY_VOLUME]
    assert patched["spec"]["volumes"] == [{"name": TELEMETRY_VOLUME, "emptyDir": {}}]


@pytest.mark.parametrize("case", sorted(CASES))
def test_operations_equal_the_webhooks_answers_before_issue_15(case: str) -> None:
    """The pure builder yields, for every recorded case, the pod kopf's diff yielded."""
    pod, namespace = case_pod(case)
    before = RECORDED[case]
    policy, mode = POLICY_OF.get(namespace, (None, NATIVE))
    covering = matching_policy(pod, [] if policy is None else [parse_policy(policy)])
    try:
        ops = [] if covering is None else build_sidecar_patch(pod, covering, SETTINGS, mode)
    except InjectionConflictError as conflict:
        assert before["warnings"] == [f"hangwatch: sidecar not injected: {conflict}"]
        ops = []
    assert as_recorded(jsonpatch.apply_patch(pod, ops)) == jsonpatch.apply_patch(
        pod, before["operations"]
    )


def test_legacy_injection_leaves_host_pid_pods_without_share_process_namespace() -> None:
    pod = executor_pod()
    pod["spec"]["hostPID"] = True
    patched = _inject(pod, LEGACY)
    assert "shareProcessNamespace" not in patched["spec"]
    kubernetes_validate.validate(patched, "1.27", strict=True)


@pytest.mark.parametrize(
    "conflict",
    [
        lambda spec: spec["volumes"].append({"name": TELEMETRY_VOLUME, "emptyDir": {}}),
        lambda spec: spec["containers"][0]["ports"].append({"containerPort": 9477}),
    ],
    ids=["volume-name", "port"],
)
def test_pods_already_using_our_names_are_refused(conflict: Any) -> None:
    pod = executor_pod()
    conflict(pod["spec"])
    with pytest.raises(InjectionConflictError):
        build_sidecar_patch(pod, _policy(), SETTINGS, NATIVE)


def test_auto_mode_is_refused_by_the_builder() -> None:
    with pytest.raises(ValueError, match="resolve the injection mode"):
        build_sidecar_patch(executor_pod(), _policy(), SETTINGS, InjectionMode.AUTO)


@pytest.mark.parametrize(
    ("policy_mode", "operator_mode", "minor", "expected"),
    [
        (InjectionMode.NATIVE, InjectionMode.LEGACY, 28, NATIVE),
        (InjectionMode.NATIVE, InjectionMode.AUTO, None, NATIVE),
        # forced native on a server that predates it: every pod would be refused
        (InjectionMode.NATIVE, InjectionMode.LEGACY, 27, LEGACY),
        (InjectionMode.AUTO, InjectionMode.NATIVE, 25, LEGACY),
        (InjectionMode.LEGACY, InjectionMode.NATIVE, 25, LEGACY),
        (InjectionMode.LEGACY, InjectionMode.AUTO, 31, LEGACY),
        (InjectionMode.AUTO, InjectionMode.NATIVE, 28, NATIVE),
        (InjectionMode.AUTO, InjectionMode.AUTO, 29, NATIVE),
        (InjectionMode.AUTO, InjectionMode.AUTO, 28, LEGACY),
        (InjectionMode.AUTO, InjectionMode.AUTO, None, LEGACY),
    ],
)
def test_injection_mode_resolution(
    policy_mode: InjectionMode, operator_mode: InjectionMode, minor: int | None, expected: Any
) -> None:
    settings = OperatorSettings(injection_mode=operator_mode)
    assert resolve_injection_mode(policy_mode, settings, minor) is expected


@pytest.mark.parametrize(
    ("policy_mode", "operator_mode", "minor", "noted"),
    [
        (InjectionMode.NATIVE, InjectionMode.AUTO, 25, True),
        (InjectionMode.AUTO, InjectionMode.NATIVE, 27, True),
        (InjectionMode.NATIVE, InjectionMode.AUTO, 28, False),
        (InjectionMode.NATIVE, InjectionMode.AUTO, None, False),
        (InjectionMode.LEGACY, InjectionMode.NATIVE, 25, False),
        (InjectionMode.AUTO, InjectionMode.AUTO, 25, False),
    ],
)
def test_a_forced_native_injected_as_legacy_is_said(
    policy_mode: InjectionMode, operator_mode: InjectionMode, minor: int | None, noted: bool
) -> None:
    settings = OperatorSettings(injection_mode=operator_mode)
    note = forced_native_note(policy_mode, settings, minor)
    assert (note is not None) is noted
    if note is not None:
        assert f"1.{minor}" in note and "legacy sidecar was injected" in note
        assert resolve_injection_mode(policy_mode, settings, minor) is LEGACY


def test_server_versions_as_managed_clusters_report_them() -> None:
    assert server_minor_version("1", "29+") == 29
    assert server_minor_version("1", "30") == 30
    assert server_minor_version("2", "0") is None
    assert server_minor_version("1", "") is None


@pytest.mark.parametrize("mode", [NATIVE, LEGACY])
def test_our_patch_applier_agrees_with_jsonpatch(mode: InjectionMode) -> None:
    pod = executor_pod()
    ops = build_sidecar_patch(pod, _policy(), SETTINGS, mode)
    ours = copy.deepcopy(pod)
    apply_add_ops(ours, ops)
    assert ours == jsonpatch.apply_patch(pod, ops)


def test_socket_view_and_passive_first_probing_reach_the_sidecar_settings() -> None:
    """The policy's socketView and freshConnectIntervalSeconds ride in environment variables
    the real sidecar accepts (its own settings parser, with the injected args), and the
    sidecar gets no capability for the socket view (sock_diag of its own netns needs none)."""
    import argparse
    import dataclasses

    from hangwatch_operator.policies import SocketView
    from hangwatch_sidecar.settings import add_arguments, from_args

    policy = dataclasses.replace(
        _policy(), socket_view=SocketView(enabled=True, ports=(9093,), uids=(185, 1000))
    )
    sidecar = _sidecar(_inject(executor_pod(), NATIVE, policy))
    env = {e["name"]: e["value"] for e in sidecar["env"] if "value" in e}
    assert env["HANGWATCH_SOCKET_VIEW"] == "true"
    assert env["HANGWATCH_SOCKET_PORTS"] == "9093"
    assert env["HANGWATCH_SOCKET_UIDS"] == "185,1000"
    assert env["HANGWATCH_FRESH_CONNECT_INTERVAL_SECONDS"] == "300"
    assert env["HANGWATCH_PYTHON_STACKS"] == "false"  # the process view is opt-in
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    settings = from_args(parser.parse_args(sidecar["args"]), environ=env)
    assert settings.socket_view and settings.socket_port_set == {9093}
    assert settings.socket_uid_set == {185, 1000}
    assert settings.fresh_connect_interval_seconds == 300.0
    off = dataclasses.replace(policy, socket_view=SocketView(enabled=False))
    injected = _sidecar(_inject(executor_pod(), NATIVE, off))["env"]
    env = {e["name"]: e["value"] for e in injected if "value" in e}
    assert env["HANGWATCH_SOCKET_VIEW"] == "false" and "HANGWATCH_SOCKET_PORTS" not in env
    assert not from_args(parser.parse_args(sidecar["args"]), environ=env).socket_view


def test_a_declared_write_interval_reaches_the_sidecar_settings_only_when_set() -> None:
    """`detection.expectedWriteIntervalSeconds` becomes the real sidecar's own setting (its
    parser, the injected args); left out, the sidecar gets no flag (0: not said)."""
    import argparse

    from hangwatch_operator.policies import Detection
    from hangwatch_sidecar.settings import add_arguments, from_args

    parser = argparse.ArgumentParser()
    add_arguments(parser)

    def sidecar_settings(policy: Policy) -> Any:
        sidecar = _sidecar(_inject(executor_pod(), NATIVE, policy))
        env = {e["name"]: e["value"] for e in sidecar["env"] if "value" in e}
        return sidecar["args"], from_args(parser.parse_args(sidecar["args"]), environ=env)

    args, settings = sidecar_settings(_policy())
    assert "--expected-write-interval-seconds" not in args
    assert settings.expected_write_interval_seconds == 0.0
    declared = dataclasses.replace(
        _policy(), detection=Detection(stall_seconds=90, expected_write_interval_seconds=45)
    )
    args, settings = sidecar_settings(declared)
    assert args[args.index("--expected-write-interval-seconds") + 1] == "45"
    assert settings.expected_write_interval_seconds == 45.0


@pytest.mark.parametrize(
    ("section", "message"),
    [
        ({"enabled": "yes"}, "spec.socketView.enabled must be true or false"),
        ({"ports": [0]}, "spec.socketView.ports: 0 is not in 1..65535"),
        ({"ports": [True]}, "spec.socketView.ports: True is not in 1..65535"),
        ({"uids": [-1]}, "spec.socketView.uids: -1 is not in 0..4294967294"),
        ({"uids": list(range(33))}, "spec.socketView.uids must be a list of at most 32"),
        ({"ports": "9092"}, "spec.socketView.ports must be a list of at most 32"),
    ],
)
def test_invalid_socket_view_is_refused_naming_the_field(
    section: dict[str, Any], message: str
) -> None:
    from hangwatch_operator.policies import InvalidPolicyError

    body = apply_defaults(version_schema(), load_yaml(EXAMPLES / "policy-spark-executors.yaml"))
    body["spec"]["socketView"] = section
    with pytest.raises(InvalidPolicyError, match=message.replace(".", r"\.")):
        parse_policy(body)
