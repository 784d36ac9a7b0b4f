"""The injected pod is admitted wherever the uninjected one is, on the real API server.

Pod Security admission (built into kube-apiserver, on by default) runs after the
mutating webhooks, on the injected pod. Namespaces enforcing `privileged`, `baseline`
and `restricted` (`pod-security.kubernetes.io/enforce`), each with four policies
(native and legacy injection x process view on and off, told apart by a pod label);
executor pods of two shapes: as spark-submit's driver creates them (no security
context at all) and a restricted-compliant one (non-root as Spark's uid 185, seccomp
RuntimeDefault, no privilege escalation, every capability dropped). Every pod is
created with `--dry-run=server` through the chart's webhook configuration and the
operator (a process configured from the installed Deployment, with its
ServiceAccount's token), once opted out (`hangwatch.dev/inject: "false"`: the pod as
it was) and once injected. Checked, case by case: the injected pod is admitted whenever
the uninjected one is; it carries the sidecar (the webhook ran); the process view's
SYS_PTRACE is there in the privileged namespace only, elsewhere its sidecar is told
what it cannot judge (`HANGWATCH_NOT_JUDGED`), the API server passes the webhook's
warning on and, for a real create, the policy gets a `HangwatchFeatureLeftOut` Event
(a dry run posts none: the webhook declares no side effects); the sidecar of a
pod that declares its user runs as that user.

The control: the same pods with the sidecar as the webhook injected it before it knew
namespace levels (process view on: SYS_PTRACE, privilege escalation) are refused by
baseline and restricted, so the matrix can fail.
"""

from __future__ import annotations

import copy
import json
import socket
from collections.abc import Iterator
from typing import Any

import jsonpatch
import pytest
import yaml

from hangwatch.pod_security import ENFORCE_LABEL, NOT_JUDGED_ENV, Level
from hangwatch_operator.injection import INJECT_ANNOTATION, build_sidecar_patch
from hangwatch_operator.policies import parse_policy
from hangwatch_operator.settings import InjectionMode, OperatorSettings
from hangwatch_testing.emulated_cluster import OperatorRun
from hangwatch_testing.kube.cluster import LocalCluster
from hangwatch_testing.kube.release import HelmRelease, running_operator
from hangwatch_testing.kube.spark import (
    Created,
    as_submitted,
    dry_run_create,
    ensure_namespace,
    sidecar_of,
)
from hangwatch_testing.spark_pods import SPARK_UID, executor_pod, make_restricted
from hangwatch_testing.structural import EXAMPLES

pytestmark = pytest.mark.xdist_group("kube")

MATRIX_LABEL = "hangwatch.dev/matrix"
MODES = (InjectionMode.NATIVE, InjectionMode.LEGACY)
VIEWS = (False, True)
SHAPES = ("spark-submit", "restricted-compliant")


def namespace_of(level: Level) -> str:
    return f"psa-{level.value}"


def variant(mode: InjectionMode, view: bool) -> str:
    return f"{mode.value}-view-{'on' if view else 'off'}"


def policy_body(level: Level, mode: InjectionMode, view: bool) -> dict[str, Any]:
    body: dict[str, Any] = yaml.safe_load((EXAMPLES / "policy-spark-executors.yaml").read_text())
    body["metadata"] = {"name": variant(mode, view), "namespace": namespace_of(level)}
    body["spec"]["selector"] = {"matchLabels": {MATRIX_LABEL: variant(mode, view)}}
    body["spec"]["sidecar"] = {**body["spec"].get("sidecar", {}), "injectionMode": mode.value}
    body["spec"]["processView"] = {"enabled": view}
    return body


def pod_body(shape: str, mode: InjectionMode, view: bool, *, opted_out: bool) -> dict[str, Any]:
    annotations = {INJECT_ANNOTATION: "false"} if opted_out else None
    body = as_submitted(
        executor_pod(labels={MATRIX_LABEL: variant(mode, view)}, annotations=annotations)
    )
    body["metadata"]["name"] = f"exec-{shape}-{variant(mode, view)}"
    if shape == "restricted-compliant":
        make_restricted(body)
    return body


@pytest.fixture(scope="module")
def matrix_operator(
    cluster: LocalCluster, release: HelmRelease, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[OperatorRun]:
    for level in Level:
        name = namespace_of(level)
        ensure_namespace(cluster, name)
        cluster.kubectl("label", "namespace", name, f"{ENFORCE_LABEL}={level.value}", "--overwrite")
        for mode in MODES:
            for view in VIEWS:
                cluster.kubectl(
                    "apply", "-f", "-", stdin=json.dumps(policy_body(level, mode, view))
                )
    with running_operator(cluster, tmp_path_factory.mktemp("psa")) as (run, _):

        def webhook_up() -> bool:
            try:
                with socket.create_connection(("127.0.0.1", release.webhook_port), timeout=0.5):
                    return True
            except OSError:
                return False

        run.wait_for("serving the webhook", webhook_up)
        yield run


def test_the_injected_pod_is_admitted_wherever_the_pod_is(
    cluster: LocalCluster, release: HelmRelease, matrix_operator: OperatorRun
) -> None:
    results: list[tuple[str, str, str, str, bool, bool]] = []
    for level in Level:
        namespace = namespace_of(level)
        for mode in MODES:
            for view in VIEWS:
                for shape in SHAPES:
                    case = f"{level}/{variant(mode, view)}/{shape}"
                    plain = dry_run_create(
                        cluster, namespace, pod_body(shape, mode, view, opted_out=True)
                    )
                    assert sidecar_of(plain.pod) is None, case
                    injected = dry_run_create(
                        cluster, namespace, pod_body(shape, mode, view, opted_out=False)
                    )
                    results.append(
                        (
                            str(level),
                            mode.value,
                            str(view),
                            shape,
                            plain.admitted,
                            injected.admitted,
                        )
                    )
                    if not plain.admitted:
                        assert "violates PodSecurity" in plain.stderr, (case, plain.stderr)
                        continue
                    assert injected.admitted, (case, injected.stderr)
                    _check_injected(case, level, mode, view, shape, injected)
    print_matrix(results)
    admitted = [r for r in results if r[4]]
    # the only pod a level refuses as it is: spark-submit's (no security context) under
    # restricted, in each of its four variants
    assert len(results) == 24 and len(admitted) == 20
    assert all(r[5] for r in admitted)


def _check_injected(
    case: str, level: Level, mode: InjectionMode, view: bool, shape: str, injected: Created
) -> None:
    sidecar = sidecar_of(injected.pod)
    assert sidecar is not None, (case, "the webhook did not inject")
    context = sidecar["securityContext"]
    env = {e["name"]: e.get("value") for e in sidecar["env"]}
    kept = view and level is Level.PRIVILEGED
    assert ("add" in context["capabilities"]) is kept, case
    assert context["allowPrivilegeEscalation"] is kept, case
    assert env["HANGWATCH_PYTHON_STACKS"] == ("true" if kept else "false"), case
    if view and not kept:
        assert env[NOT_JUDGED_ENV] == "process_view", case
        assert f"enforces Pod Security {level}" in injected.stderr, (case, injected.stderr)
    else:
        assert NOT_JUDGED_ENV not in env, case
    expected_uid = SPARK_UID if shape == "restricted-compliant" else 65532
    assert context["runAsUser"] == expected_uid, case
    assert injected.pod["spec"]["shareProcessNamespace"] is True, case
    if mode is InjectionMode.NATIVE:
        assert sidecar["restartPolicy"] == "Always", case


def print_matrix(results: list[tuple[str, str, str, str, bool, bool]]) -> None:
    """The matrix in the test's output (`-s`), one line per case."""
    for level, mode, view, shape, plain, injected in results:
        verdicts = f"pod {'admitted' if plain else 'denied'}, injected " + (
            "admitted" if injected else "denied"
        )
        print(f"psa-matrix {level:10} {mode:6} view={view:5} {shape:20} {verdicts}")


def test_a_left_out_feature_is_an_event_on_the_policy(
    cluster: LocalCluster, release: HelmRelease, matrix_operator: OperatorRun
) -> None:
    """A real create (a dry run posts nothing: the webhook declares no side effects)."""
    namespace = namespace_of(Level.BASELINE)
    body = pod_body("spark-submit", InjectionMode.NATIVE, True, opted_out=False)
    body["metadata"]["name"] = "exec-event"
    cluster.kubectl("create", "-n", namespace, "-f", "-", stdin=json.dumps(body))
    try:

        def posted() -> list[dict[str, Any]]:
            done = cluster.kubectl(
                "get",
                "events",
                "-n",
                namespace,
                "--field-selector",
                f"involvedObject.name={variant(InjectionMode.NATIVE, True)},"
                "involvedObject.kind=ProducerHealthPolicy,reason=HangwatchFeatureLeftOut",
                "-o",
                "json",
            )
            items: list[dict[str, Any]] = json.loads(done.stdout)["items"]
            return items

        (event, *_) = matrix_operator.wait_for("the HangwatchFeatureLeftOut Event", posted)
        assert event["type"] == "Warning" and event["involvedObject"]["uid"]
        assert f"Pod {namespace}/exec-event" in event["message"], event["message"]
        assert "process_view left out" in event["message"], event["message"]
    finally:
        cluster.kubectl("delete", "pod", "exec-event", "-n", namespace, "--wait=false")


def test_control_the_old_injection_is_refused_below_privileged(
    cluster: LocalCluster, release: HelmRelease, matrix_operator: OperatorRun
) -> None:
    """The injection with the process view regardless of level (what the webhook did
    before it read namespace levels): refused by baseline and restricted."""
    settings = OperatorSettings(sidecar_port=release.sidecar_port)
    denied: list[str] = []
    for level in Level:
        policy = parse_policy(policy_body(level, InjectionMode.NATIVE, True))
        pod = pod_body("restricted-compliant", InjectionMode.NATIVE, True, opted_out=False)
        ops = build_sidecar_patch(copy.deepcopy(pod), policy, settings, InjectionMode.NATIVE)
        patched = jsonpatch.apply_patch(pod, ops)  # marked injected: the webhook skips it
        created = dry_run_create(cluster, namespace_of(level), patched)
        if not created.admitted:
            assert "SYS_PTRACE" in created.stderr, created.stderr
            denied.append(str(level))
    assert denied == ["baseline", "restricted"]
