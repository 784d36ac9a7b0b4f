"""The chart on the oldest Kubernetes its `kubeVersion` admits: the floor release.

A control plane of the floor release (scripts/kube/kubernetes-floor/go.mod, built by
`scripts/build-kube.sh --floor`: kube-apiserver, kube-controller-manager, kubectl; no
kubelet), started as the tier's own (the `floor` fixture: `local_cluster(floor=True)`),
the chart installed by real Helm with the README's values. What the chart and operator
need of the server, and what differs by version, is covered:

- the floor is the chart's claim: the server reports the floor release, whose minor is
  the lower bound of Chart.yaml's `kubeVersion`, and Helm's kubeVersion check passes;
  the control: the chart claiming one minor more is refused by Helm there;
- the CRD (apiextensions v1) is Established with its CEL rules kept (CRD validation
  rules: beta and on by default since 1.25, GA in 1.29); both example policies are
  accepted, and every document of examples/invalid is refused with the error its
  `# expect:` line names, the five only a CEL rule catches included, in this release's
  wording (`Invalid value: "object": `);
- the webhook (admissionregistration v1, called through the chart's Service) injects
  the legacy sidecar into an executor pod: `injectionMode: auto` on a server before
  1.29 (no native sidecars) is a regular container with the pod's process namespace
  shared; the operator's calls are all allowed by the chart's RBAC;
- Pod Security admission (GA in 1.25) in a namespace enforcing `baseline` admits the
  injected executor of a policy asking for the process view (left out there, the
  sidecar told so), and refuses the control: the same sidecar with SYS_PTRACE;
- `hangwatch check` reads the install: the API server reachable as the floor release,
  the Helm release deployed, the CRD and webhook configuration in place. (No kubelet:
  the operator's pods never run, so the checks that need them are not asserted here;
  tests/node runs them on the current release.)
"""

from __future__ import annotations

import copy
import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonpatch
import pytest
import yaml

from hangwatch.pod_security import ENFORCE_LABEL, NOT_JUDGED_ENV, Level
from hangwatch_operator.injection import (
    MODE_ANNOTATION,
    SIDECAR_CONTAINER,
    build_sidecar_patch,
    server_minor_version,
    sidecar_args,
)
from hangwatch_operator.policies import parse_policy
from hangwatch_operator.settings import InjectionMode, OperatorSettings
from hangwatch_testing.emulated_cluster import OperatorRun
from hangwatch_testing.kube.cluster import LocalCluster
from hangwatch_testing.kube.readme import helm_install
from hangwatch_testing.kube.release import (
    CHART,
    OPERATOR_USER,
    HelmRelease,
    hangwatch_check,
    running_operator,
    wait_for_operator,
)
from hangwatch_testing.kube.spark import (
    as_submitted,
    container_names,
    dry_run_create,
    ensure_namespace,
    sidecar_of,
    submit_application,
)
from hangwatch_testing.spark_pods import executor_pod
from hangwatch_testing.structural import EXAMPLES, EXECUTOR_POLICY, expected_error

JOBS = "spark-jobs"
BASELINE = "floor-baseline"
FORCED_NATIVE = "floor-native"
INVALID = sorted((EXAMPLES / "invalid").glob("*.yaml"))


@pytest.fixture(scope="module")
def floor_release(floor: LocalCluster) -> HelmRelease:
    installed = HelmRelease(floor, CHART)
    installed.install(helm_install().values)  # the README's own `helm install` values
    return installed


def _example_policy(
    name: str, namespace: str, section: str, fields: dict[str, Any]
) -> dict[str, Any]:
    """The example policy as `name` in `namespace`, with `fields` set in its spec's `section`."""
    body: dict[str, Any] = yaml.safe_load(EXECUTOR_POLICY.read_text())
    body["metadata"] = {"name": name, "namespace": namespace}
    body["spec"].setdefault(section, {}).update(fields)
    return body


def _baseline_policy() -> dict[str, Any]:
    """The example policy in the baseline namespace, asking for the process view."""
    return _example_policy("floor-baseline", BASELINE, "processView", {"enabled": True})


def _forced_native_policy() -> dict[str, Any]:
    """The example policy forcing native sidecars, which v1.25 cannot run."""
    return _example_policy("floor-native", FORCED_NATIVE, "sidecar", {"injectionMode": "native"})


@pytest.fixture(scope="module")
def floor_operator(
    floor: LocalCluster, floor_release: HelmRelease, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[OperatorRun]:
    ensure_namespace(floor, JOBS)
    floor.kubectl("apply", "-f", str(EXECUTOR_POLICY))
    ensure_namespace(floor, BASELINE)
    enforce = f"{ENFORCE_LABEL}={Level.BASELINE.value}"
    floor.kubectl("label", "namespace", BASELINE, enforce, "--overwrite")
    floor.kubectl("apply", "-f", "-", stdin=json.dumps(_baseline_policy()))
    ensure_namespace(floor, FORCED_NATIVE)
    floor.kubectl("apply", "-f", "-", stdin=json.dumps(_forced_native_policy()))
    with running_operator(floor, tmp_path_factory.mktemp("floor")) as (run, _):
        wait_for_operator(floor, run, floor_release.webhook_port, "orders-writers", JOBS)
        yield run


def _kube_version_floor() -> tuple[int, int]:
    """(major, minor) of the lower bound of Chart.yaml's `kubeVersion` (`>=1.25.0-0`)."""
    claim = yaml.safe_load((CHART / "Chart.yaml").read_text())["kubeVersion"]
    assert claim.startswith(">="), f"kubeVersion {claim!r} has no lower bound"
    major, minor, *_ = claim.removeprefix(">=").split(".")
    return int(major), int(minor)


def test_the_floor_release_is_the_oldest_the_chart_admits(
    floor: LocalCluster, floor_release: HelmRelease
) -> None:
    version = json.loads(floor.kubectl("get", "--raw", "/version").stdout)
    assert version["gitVersion"] == floor.binaries.version
    assert (int(version["major"]), server_minor_version(version["major"], version["minor"])) == (
        _kube_version_floor()
    )
    (deployed,) = floor_release.history()[-1:]
    assert deployed["status"] == "deployed", deployed


def test_control_a_chart_claiming_the_next_minor_is_refused_by_helm(
    floor: LocalCluster, tmp_path: Path
) -> None:
    """Helm's kubeVersion check is live on this server: the chart with its floor one minor
    higher is refused before anything is installed."""
    chart = tmp_path / "hangwatch"
    shutil.copytree(CHART, chart)
    meta = yaml.safe_load((chart / "Chart.yaml").read_text())
    major, minor = _kube_version_floor()
    meta["kubeVersion"] = f">={major}.{minor + 1}.0-0"
    (chart / "Chart.yaml").write_text(yaml.safe_dump(meta))
    with pytest.raises(Exception, match="kubeVersion") as refused:
        HelmRelease(floor, chart, name="hangwatch-control").install(helm_install().values)
    assert f"{major}.{minor + 1}" in str(refused.value), refused.value


def test_crd_is_established_with_its_cel_rules(
    floor: LocalCluster, floor_release: HelmRelease
) -> None:
    crd = json.loads(
        floor.kubectl("get", "crd", "producerhealthpolicies.hangwatch.dev", "-o", "json").stdout
    )
    conditions = {c["type"]: c["status"] for c in crd["status"]["conditions"]}
    assert conditions["Established"] == "True" and "NonStructuralSchema" not in conditions
    assert '"x-kubernetes-validations"' in json.dumps(crd["spec"]["versions"])


@pytest.mark.parametrize("path", INVALID, ids=lambda p: p.name)
def test_invalid_policies_are_refused_with_their_expected_error(
    floor: LocalCluster, floor_release: HelmRelease, path: Path
) -> None:
    """POSTed as the node tier does (no `fieldValidation`: kubectl's strict default would
    refuse an unknown field before the schema's rules)."""
    ensure_namespace(floor, JOBS)
    body = yaml.safe_load(path.read_text())
    body["metadata"]["namespace"] = JOBS
    collection = f"/apis/hangwatch.dev/v1alpha1/namespaces/{JOBS}/producerhealthpolicies"
    done = floor.kubectl(
        "create",
        "--raw",
        f"{collection}?dryRun=All",
        "-f",
        "-",
        stdin=json.dumps(body),
        check=False,
    )
    assert done.returncode != 0, f"{path.name} was accepted"
    assert expected_error(path) in done.stderr, done.stderr


@pytest.mark.parametrize("example", ["policy-spark-executors.yaml", "policy-dry-run.yaml"])
def test_example_policies_are_accepted(
    floor: LocalCluster, floor_release: HelmRelease, example: str
) -> None:
    body = yaml.safe_load((EXAMPLES / example).read_text())
    ensure_namespace(floor, body["metadata"]["namespace"])
    floor.kubectl("create", "--dry-run=server", "-f", "-", stdin=json.dumps(body))


def test_the_executor_is_stored_with_the_legacy_sidecar(
    floor: LocalCluster, floor_release: HelmRelease, floor_operator: OperatorRun
) -> None:
    _, (executor,) = submit_application(floor, JOBS, 1, suffix="-floor")
    spec = executor["spec"]
    assert container_names(executor) == ["spark-kubernetes-executor", SIDECAR_CONTAINER]
    assert not spec.get("initContainers")
    assert spec["shareProcessNamespace"] is True
    assert executor["metadata"]["annotations"][MODE_ANNOTATION] == "legacy"
    policy = parse_policy(yaml.safe_load(EXECUTOR_POLICY.read_text()))
    settings = OperatorSettings(sidecar_port=floor_release.sidecar_port)
    assert spec["containers"][1]["args"] == sidecar_args(policy, settings, InjectionMode.LEGACY)
    assert "Injection mode auto (API server 1.25)" in floor_operator.log()
    forbidden = [
        (e["verb"], e["requestURI"])
        for e in floor.audit_events()
        if e["user"]["username"] == OPERATOR_USER and e["responseStatus"]["code"] == 403
    ]
    assert forbidden == [], forbidden


def _executor(name: str) -> dict[str, Any]:
    """An executor pod as spark-submit's driver would create it, named `name`."""
    body = as_submitted(executor_pod())
    body["metadata"]["name"] = name
    return body


def _baseline_executor() -> dict[str, Any]:
    return _executor("exec-floor-baseline")


def test_baseline_admits_the_injected_pod_and_refuses_the_control(
    floor: LocalCluster, floor_release: HelmRelease, floor_operator: OperatorRun
) -> None:
    injected = dry_run_create(floor, BASELINE, _baseline_executor())
    assert injected.admitted, injected.stderr
    sidecar = sidecar_of(injected.pod)
    assert sidecar is not None and sidecar in injected.pod["spec"]["containers"]
    assert "add" not in sidecar["securityContext"]["capabilities"]
    assert {"name": NOT_JUDGED_ENV, "value": "process_view"} in sidecar["env"]
    assert "enforces Pod Security baseline" in injected.stderr, injected.stderr
    # the control: the sidecar as injected regardless of the level (SYS_PTRACE)
    policy = parse_policy(_baseline_policy())
    settings = OperatorSettings(sidecar_port=floor_release.sidecar_port)
    pod = _baseline_executor()
    ops = build_sidecar_patch(copy.deepcopy(pod), policy, settings, InjectionMode.LEGACY)
    control = dry_run_create(floor, BASELINE, jsonpatch.apply_patch(pod, ops))
    assert not control.admitted and "violates PodSecurity" in control.stderr, control.stderr
    assert "SYS_PTRACE" in control.stderr, control.stderr


def test_hangwatch_check_reads_the_install(
    floor: LocalCluster, floor_release: HelmRelease, floor_operator: OperatorRun
) -> None:
    done = hangwatch_check(floor.admin_kubeconfig)
    assert "Traceback" not in done.stderr, done.stderr
    lines = {c["check"]: c for c in json.loads(done.stdout)["checks"]}
    print(json.dumps(lines, indent=1))
    assert lines["kubernetes-api"]["detail"] == f"reachable, {floor.binaries.version}"
    for check in [
        "kubernetes-api",
        "helm-release",
        "crd",
        "webhook-configuration",
        "webhook-certificate",
        f"webhook-admission {JOBS}/orders-writers",
        f"webhook-admission {BASELINE}/floor-baseline",
    ]:
        assert lines[check]["status"] == "pass", lines[check]
    for policy in (f"{JOBS}/orders-writers", f"{BASELINE}/floor-baseline"):
        assert "(legacy, policy" in lines[f"webhook-admission {policy}"]["detail"]
    # no kubelet: the operator's Deployment never gets a ready pod, and the check says so
    assert lines["operator"]["status"] == "fail" and "0/2 ready" in lines["operator"]["detail"]
    assert done.returncode != 0


def test_a_forced_native_sidecar_is_injected_as_legacy_and_the_pod_admitted(
    floor: LocalCluster, floor_release: HelmRelease, floor_operator: OperatorRun
) -> None:
    injected = dry_run_create(floor, FORCED_NATIVE, _executor("exec-floor-native"))
    assert injected.admitted, injected.stderr
    sidecar = sidecar_of(injected.pod)
    assert sidecar is not None and sidecar in injected.pod["spec"]["containers"]
    assert injected.pod["metadata"]["annotations"][MODE_ANNOTATION] == "legacy"
    assert "the legacy sidecar was injected instead" in injected.stderr, injected.stderr
    # the control: the native sidecar the policy asked for is refused by this server
    policy = parse_policy(_forced_native_policy())
    settings = OperatorSettings(sidecar_port=floor_release.sidecar_port)
    pod = _executor("exec-floor-native-control")
    ops = build_sidecar_patch(copy.deepcopy(pod), policy, settings, InjectionMode.NATIVE)
    control = dry_run_create(floor, FORCED_NATIVE, jsonpatch.apply_patch(pod, ops))
    assert not control.admitted, control.stderr
    # submitted whole, the init container's restartPolicy is a field v1.25 does not know
    # (through the webhook, its livenessProbe "may not be set for init containers")
    assert "spec.initContainers[0]" in control.stderr, control.stderr
