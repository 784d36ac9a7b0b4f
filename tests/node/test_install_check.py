"""`hangwatch check` against a real install on the node tier, good and broken one way at a time.

One install for the module: the chart installed by real Helm (the tier's `release`),
the operator as the installed Deployment describes (hangwatch_testing.kube.release), a policy
in a namespace of the module's own, and one executor pod created as Spark's driver
creates it, injected by the real admission chain and run by the kubelet, its sidecar
answering. The command runs as a user runs it (`python -m hangwatch check
--kubeconfig ... -o json`, the admin's kubeconfig). Covered:

- the good install passes every check (CRD at the chart's version and schema, the
  release, the operator, the webhook's configuration, the certificate it presents at
  its Service address verifying against the caBundle, the policy selecting the running
  executor, a server-side dry run injected by the webhook, the namespace's Pod Security
  level, the sidecar's /status through the API server's pod proxy, monitoring, images);
- a producer policy beside it counts the producer service's pod that opted in, its dry
  run injected by the producer webhook;
- then, each restored before the next: the CRD labelled with another version, then
  deleted; the operator not ready; the caBundle of another CA (the presented
  certificate no longer verifies, and the API server's own call injects nothing); an
  invalid policy and one selecting no executor; a namespace enforcing `baseline` while
  the policy asks for the process view (the pure rule, and the API server's Pod
  Security admission refusing the dry run with the same capability); the sidecar
  stopped (SIGSTOP: its /status does not answer); the chart's monitoring on while a
  Prometheus Operator CRD is missing (the real CRDs, from the prometheus-operator Go
  module); a pull secret named and absent.

This tier has no deployment controller (the operator runs as a process, not as the
Deployment's pods): the test writes the Deployment's status as the controller would,
ready or not.
"""

from __future__ import annotations

import base64
import json
import os
import signal
import subprocess
import time
import urllib.error
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client

from hangwatch_operator.certificates import generate_webhook_certificates
from hangwatch_operator.helm_release import merge_values
from hangwatch_operator.install_model import CRD_NAME, VERSION_LABEL
from hangwatch_testing.kube.cluster import ROOT
from hangwatch_testing.kube.release import NAMESPACE as INSTALL
from hangwatch_testing.kube.release import HelmRelease, admin_api, hangwatch_check, running_operator
from hangwatch_testing.node.cluster import NodeCluster
from hangwatch_testing.node.workloads import (
    create_pod,
    ensure_namespace,
    executor_for,
    policy,
    read_pod,
    submit_driver,
    wait_for,
    wait_operator_ready,
)
from hangwatch_testing.silent_broker import SilentBroker

pytestmark = [pytest.mark.xdist_group("node"), pytest.mark.timeout(1200)]

JOBS = "hangwatch-check"
POLICY = "checked"
PRODUCERS = "checked-producers"
PLURAL = "producerhealthpolicies"
POLICIES = f"/apis/hangwatch.dev/v1alpha1/namespaces/{JOBS}/producerhealthpolicies"
CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
DEPLOYMENT = "hangwatch-operator"
PROMETHEUS_OPERATOR = "github.com/prometheus-operator/prometheus-operator@v0.92.1"
"""The newest release whose module the Go proxy serves; its example/ holds the CRDs."""
MERGE = "application/merge-patch+json"
"""The Python client's patch calls send a JSON Patch unless told."""
MONITORING = {
    "sidecarPodMonitor": "monitoring.coreos.com_podmonitors.yaml",
    "operatorServiceMonitor": "monitoring.coreos.com_servicemonitors.yaml",
    "prometheusRule": "monitoring.coreos.com_prometheusrules.yaml",
}
SETTLE_SECONDS = 120.0


def _check(node: NodeCluster, output: str = "json") -> tuple[int, Any, str]:
    """`hangwatch check -o OUTPUT` as the admin: exit code, the JSON document (the text
    report with `output="text"`), stderr."""
    done = hangwatch_check(node.admin_kubeconfig, INSTALL, output)
    assert "Traceback" not in done.stderr, done.stderr
    if output == "text":
        return done.returncode, done.stdout, done.stderr
    return done.returncode, json.loads(done.stdout) if done.stdout else {}, done.stderr


def _lines(doc: dict[str, Any]) -> dict[str, dict[str, str]]:
    return {c["check"]: c for c in doc.get("checks", ())}


def _until(node: NodeCluster, what: str, ok: Callable[[dict[str, dict[str, str]]], bool]) -> Any:
    """Run the check until `ok(lines)`; fail with the last report."""
    last: dict[str, Any] = {}
    deadline = time.monotonic() + SETTLE_SECONDS
    while time.monotonic() < deadline:
        code, doc, _ = _check(node)
        last = {"exit": code, **doc}
        if ok(_lines(doc)):
            return code, _lines(doc)
        time.sleep(2)
    pytest.fail(f"hangwatch check never showed {what}: {json.dumps(last, indent=1)[:6000]}")


def _shows(status: str, check: str, *words: str) -> Callable[[dict[str, dict[str, str]]], bool]:
    def ok(lines: dict[str, dict[str, str]]) -> bool:
        line = lines.get(check) or {}
        return line.get("status") == status and all(w in line.get("detail", "") for w in words)

    return ok


def _failed(check: str, *words: str) -> Callable[[dict[str, dict[str, str]]], bool]:
    return _shows("fail", check, *words)


def _set_ready(api: client.ApiClient, ready: int) -> None:
    """The Deployment's status as the deployment controller writes it."""
    client.AppsV1Api(api).patch_namespaced_deployment_status(
        DEPLOYMENT,
        INSTALL,
        {
            "status": {
                "replicas": 2,
                "readyReplicas": ready,
                "availableReplicas": ready,
                "updatedReplicas": 2,
            }
        },
        _content_type=MERGE,
    )


@pytest.fixture(scope="module")
def install(
    node: NodeCluster,
    release: HelmRelease,
    hangwatch_image: str,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[dict[str, Any]]:
    """The good install: operator running, the policy read, one injected executor running."""
    ensure_namespace(node, JOBS)
    broker = SilentBroker(node.node_ip)
    body = policy(POLICY, broker.address, namespace=JOBS)
    body["spec"]["processView"] = {"enabled": False}
    node.create(POLICIES, body)
    api = admin_api(node)
    try:
        with running_operator(node, tmp_path_factory.mktemp("operator")) as (run, _):
            wait_operator_ready(run, node, release, JOBS, POLICY)
            _set_ready(api, 2)
            driver = submit_driver(node, "-check", namespace=JOBS)
            pod = executor_for(
                node,
                driver,
                1,
                hangwatch_image,
                "import time; time.sleep(3600)",
                suffix="-check",
                namespace=JOBS,
            )
            name = create_pod(node, pod, namespace=JOBS)["metadata"]["name"]
            wait_for(
                f"executor {name} Running",
                lambda: read_pod(node, name, JOBS)["status"].get("phase") == "Running",
                timeout=300,
            )
            yield {"api": api, "pod": name, "broker": broker.address, "driver": driver}
            node.delete(f"/api/v1/namespaces/{JOBS}/pods/{name}", grace_seconds=0)
    finally:
        api.close()  # type: ignore[no-untyped-call]
        broker.close()


def test_a_good_install_passes_every_check(node: NodeCluster, install: dict[str, Any]) -> None:
    code, lines = _until(
        node,
        "every check passing",
        lambda ls: (
            ls.get("sidecars", {}).get("status") == "pass"
            and all(v["status"] != "fail" for v in ls.values())
        ),
    )
    assert code == 0
    text_code, text, _ = _check(node, "text")
    print(f"hangwatch check on the good install (exit {text_code}):\n{text}")
    assert text_code == 0 and "\u221a sidecars: 1 sidecars answer /status" in text
    for check in (
        "helm-release",
        "crd",
        "operator",
        "webhook-configuration",
        "webhook-certificate",
        f"policy {JOBS}/{POLICY}",
        f"webhook-admission {JOBS}/{POLICY}",
        f"pod-security {JOBS}",
        "sidecars",
        "monitoring",
        "sidecar-image",
    ):
        assert lines[check]["status"] == "pass", lines[check]
    assert "presents at" in lines["webhook-certificate"]["detail"]
    assert "schema equal to the chart's" in lines["crd"]["detail"]
    assert (
        "selects 1 running executor pods, all injected"
        in lines[f"policy {JOBS}/{POLICY}"]["detail"]
    )


def test_a_producer_policy_counts_the_pods_that_opted_in(
    node: NodeCluster, install: dict[str, Any], hangwatch_image: str
) -> None:
    """A policy with `roles: [producer]` beside the executors' one, and a producer
    service's pod that opted in (`hangwatch.dev/producer: "true"`, no `spark-role`, no
    owner): the policy's line counts that pod (never the executor), its dry run is
    injected by the producer webhook, and both sidecars answer."""
    body = policy(PRODUCERS, install["broker"], namespace=JOBS)
    body["spec"]["roles"] = ["producer"]
    body["spec"]["processView"] = {"enabled": False}
    node.create(POLICIES, body)
    pod = executor_for(
        node, install["driver"], 2, hangwatch_image, "import time; time.sleep(3600)",
        suffix="-check", namespace=JOBS,
    )  # fmt: skip
    meta = pod["metadata"]
    meta["name"] = "producer-service-check"
    meta.pop("ownerReferences")
    meta["labels"] = {k: v for k, v in meta["labels"].items() if not k.startswith("spark-")}
    meta["labels"]["hangwatch.dev/producer"] = "true"
    path = f"/api/v1/namespaces/{JOBS}/pods/producer-service-check"
    try:
        stored = create_pod(node, pod, namespace=JOBS)
        assert "spark-role" not in stored["metadata"]["labels"]
        _, lines = _until(
            node,
            "the producer policy selecting its injected pod, both sidecars answering",
            lambda ls: (
                ls.get(f"policy {JOBS}/{PRODUCERS}", {}).get("status") == "pass"
                and ls.get("sidecars", {}).get("detail") == "2 sidecars answer /status"
            ),
        )
        producers, executors = lines[f"policy {JOBS}/{PRODUCERS}"], lines[f"policy {JOBS}/{POLICY}"]
        assert producers["detail"] == "valid, selects 1 running producer pods, all injected"
        assert "selects 1 running executor pods, all injected" in executors["detail"]
        admission = lines[f"webhook-admission {JOBS}/{PRODUCERS}"]
        assert admission["status"] == "pass", admission
        assert lines["sidecars"]["status"] == "pass", lines["sidecars"]
    finally:
        for made in (path, f"{POLICIES}/{PRODUCERS}"):
            with suppress(urllib.error.HTTPError):  # not made: the create failed
                node.delete(made, grace_seconds=0)
        wait_for("the producer pod gone", lambda: not node.exists(path), timeout=120)


def test_the_crd_of_another_version_fails(node: NodeCluster, install: dict[str, Any]) -> None:
    extensions = client.ApiextensionsV1Api(install["api"])
    label = {"metadata": {"labels": {VERSION_LABEL: "0.0.1"}}}
    own = yaml.safe_load((ROOT / "crds" / "producerhealthpolicy.yaml").read_text())
    try:
        extensions.patch_custom_resource_definition(CRD_NAME, label, _content_type=MERGE)
        code, lines = _until(node, "the CRD's version", _failed("crd", "0.0.1"))
        assert code == 1 and "never upgrades" in lines["crd"]["hint"]
    finally:
        extensions.patch_custom_resource_definition(
            CRD_NAME, {"metadata": own["metadata"]}, _content_type=MERGE
        )


def test_an_operator_not_ready_fails(node: NodeCluster, install: dict[str, Any]) -> None:
    try:
        _set_ready(install["api"], 0)
        code, _ = _until(node, "the operator not ready", _failed("operator", "0/2 ready"))
        assert code == 1
    finally:
        _set_ready(install["api"], 2)


def test_a_ca_bundle_of_another_ca_fails(node: NodeCluster, install: dict[str, Any]) -> None:
    hooks = client.AdmissionregistrationV1Api(install["api"])
    listed = node.get("/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations")
    [configuration] = [
        c
        for c in listed["items"]
        if any(w["name"] == "inject-sidecar.hangwatch.dev" for w in c["webhooks"])
    ]
    name: str = configuration["metadata"]["name"]
    original: str = configuration["webhooks"][0]["clientConfig"]["caBundle"]
    other = base64.b64encode(generate_webhook_certificates(["x.invalid"]).ca_pem).decode()
    path = "/webhooks/0/clientConfig/caBundle"
    try:
        hooks.patch_mutating_webhook_configuration(
            name, [{"op": "replace", "path": path, "value": other}]
        )
        code, lines = _until(
            node,
            "the CA mismatch",
            lambda ls: (
                _failed("webhook-certificate", "does not verify")(ls)
                and _failed(f"webhook-admission {JOBS}/{POLICY}", "without the sidecar")(ls)
            ),
        )
        assert code == 1 and "hangwatch webhook CA" in lines["webhook-certificate"]["detail"]
        text_code, text, _ = _check(node, "text")
        print(f"hangwatch check with the caBundle of another CA (exit {text_code}):\n{text}")
    finally:
        hooks.patch_mutating_webhook_configuration(
            name, [{"op": "replace", "path": path, "value": original}]
        )


def test_an_invalid_policy_and_one_selecting_nothing_fail(
    node: NodeCluster, install: dict[str, Any]
) -> None:
    too_big = policy("too-big", "kafka:9092", namespace=JOBS)
    too_big["spec"]["sidecar"] = {
        "resources": {"requests": {"memory": "256Mi"}, "limits": {"memory": "128Mi"}}
    }
    nobody = policy("nobody", "kafka:9092", namespace=JOBS)
    nobody["spec"]["selector"] = {"matchLabels": {"team": "nobody"}}
    node.create(POLICIES, too_big)
    node.create(POLICIES, nobody)
    try:
        code, _ = _until(
            node,
            "the invalid policy and the one selecting nothing",
            lambda ls: (
                _failed(f"policy {JOBS}/too-big", "invalid", "exceeds the limit")(ls)
                and _failed(f"policy {JOBS}/nobody", "selects none of the 1 running")(ls)
            ),
        )
        assert code == 1
    finally:
        node.delete(f"{POLICIES}/too-big")
        node.delete(f"{POLICIES}/nobody")


def test_a_namespace_level_that_forbids_what_the_policy_asks_is_left_out(
    node: NodeCluster, install: dict[str, Any]
) -> None:
    """Baseline forbids the process view the policy asks for: the webhook leaves it out
    (the API server admits the dry-run pod with the sidecar, minus the view) and the check
    warns what is lost there, without failing the install."""
    core, custom = client.CoreV1Api(install["api"]), client.CustomObjectsApi(install["api"])
    enforce = "pod-security.kubernetes.io/enforce"

    def view(enabled: bool) -> None:
        custom.patch_namespaced_custom_object(
            "hangwatch.dev",
            "v1alpha1",
            JOBS,
            "producerhealthpolicies",
            POLICY,
            {"spec": {"processView": {"enabled": enabled}}},
            _content_type=MERGE,
        )

    try:
        core.patch_namespace(
            JOBS, {"metadata": {"labels": {enforce: "baseline"}}}, _content_type=MERGE
        )
        view(True)
        # The webhook caches a namespace's level for 30 s: until then the dry run is
        # refused by Pod Security (the check fails it); after, the view is left out.
        code, lines = _until(
            node,
            "the process view left out, by the rule and by the API server",
            lambda ls: (
                _shows("warn", f"pod-security {JOBS}", "baseline", "leaves out process_view")(ls)
                and _shows(
                    "pass",
                    f"webhook-admission {JOBS}/{POLICY}",
                    "left out for Pod Security: process_view",
                )(ls)
            ),
        )
        assert "processView" in lines[f"pod-security {JOBS}"]["hint"]
        assert all(line["status"] != "fail" for line in lines.values()) and code == 0, lines
        code, text, _ = _check(node, "text")
        print(text)  # docs/check.md's sample of this case
        assert code == 0 and f"‼ pod-security {JOBS}: enforces baseline" in text
    finally:
        view(False)
        core.patch_namespace(JOBS, {"metadata": {"labels": {enforce: None}}}, _content_type=MERGE)


def _sidecar_pid(pod: str) -> int:
    """The sidecar process of `pod` on this machine (the node's containers run here)."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
            environ = (entry / "environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"sidecar" in cmdline and f"HANGWATCH_POD_NAME={pod}".encode() in environ:
            return int(entry.name)
    raise AssertionError(f"no sidecar process of pod {pod}")


def test_a_sidecar_that_does_not_answer_fails(node: NodeCluster, install: dict[str, Any]) -> None:
    pid = _sidecar_pid(install["pod"])
    os.kill(pid, signal.SIGSTOP)
    try:
        code, lines = _until(node, "the silent sidecar", _failed("sidecars", "1 of 1"))
        assert code == 1 and install["pod"] in lines["sidecars"]["detail"]
    finally:
        with suppress(ProcessLookupError):  # the kubelet's liveness probe restarted it
            os.kill(pid, signal.SIGCONT)


@contextmanager
def _crds(node: NodeCluster, files: list[Path]) -> Iterator[None]:
    names = []
    for path in files:
        body = yaml.safe_load(path.read_text())
        names.append(body["metadata"]["name"])
        if not node.exists(f"{CRDS}/{names[-1]}"):
            node.create(CRDS, body)
    wait_for(
        "the Prometheus Operator CRDs Established",
        lambda: all(
            any(
                c["type"] == "Established" and c["status"] == "True"
                for c in node.get(f"{CRDS}/{n}").get("status", {}).get("conditions", ())
            )
            for n in names
        ),
    )
    try:
        yield
    finally:
        for name in names:
            if node.exists(f"{CRDS}/{name}"):
                node.delete(f"{CRDS}/{name}")


def prometheus_operator_crds() -> dict[str, Path]:
    """The Prometheus Operator's own CRD files (`go mod download` of its module, cached)."""
    go = next(p for p in ("/usr/local/go/bin/go", "go") if Path(p).exists() or p == "go")
    done = subprocess.run(
        [go, "mod", "download", "-json", PROMETHEUS_OPERATOR],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        cwd=ROOT,
        env={**os.environ, "GOFLAGS": "-mod=mod"},
    )
    found = json.loads(done.stdout or "{}")
    assert found.get("Dir"), f"go mod download {PROMETHEUS_OPERATOR}: {done.stderr or found}"
    where = Path(found["Dir"]) / "example" / "prometheus-operator-crd"
    return {key: where / name for key, name in MONITORING.items()}


def test_monitoring_on_without_the_prometheus_operator_crds_fails(
    node: NodeCluster, release: HelmRelease, install: dict[str, Any]
) -> None:
    files = prometheus_operator_crds()
    before = dict(release.values)
    on = {"monitoring": {key: {"enabled": True} for key in MONITORING}}
    with _crds(node, list(files.values())):
        release.upgrade(merge_values(before, on))
        try:
            _until(
                node,
                "monitoring on, CRDs served",
                lambda ls: (
                    ls.get("monitoring", {}).get("status") == "pass"
                    and "on, CRDs served" in ls["monitoring"]["detail"]
                ),
            )
            podmonitors = yaml.safe_load(files["sidecarPodMonitor"].read_text())["metadata"]
            node.delete(f"{CRDS}/{podmonitors['name']}")
            code, _ = _until(
                node,
                "the PodMonitor CRD missing",
                _failed("monitoring", "podmonitors.monitoring.coreos.com"),
            )
            assert code == 1
            wait_for(
                "the PodMonitor CRD gone", lambda: not node.exists(f"{CRDS}/{podmonitors['name']}")
            )
            node.create(CRDS, yaml.safe_load(files["sidecarPodMonitor"].read_text()))
            wait_for(
                "the PodMonitor CRD back", lambda: node.exists(f"{CRDS}/{podmonitors['name']}")
            )
        finally:
            release.upgrade(before)


def test_a_pull_secret_named_and_absent_fails(node: NodeCluster, install: dict[str, Any]) -> None:
    core = client.CoreV1Api(install["api"])
    try:
        core.patch_namespaced_service_account(
            "default", JOBS, {"imagePullSecrets": [{"name": "regcred"}]}, _content_type=MERGE
        )
        code, _ = _until(
            node, "the absent pull secret", _failed("sidecar-image", f"{JOBS}/regcred")
        )
        assert code == 1
    finally:
        core.patch_namespaced_service_account(
            "default", JOBS, {"imagePullSecrets": None}, _content_type=MERGE
        )


def test_without_the_crd_the_check_fails_first(node: NodeCluster, install: dict[str, Any]) -> None:
    """Last: deleting the CRD deletes every policy (the module's own too); the CRD is
    created again from crds/ afterwards, as `helm install` made it."""
    own = yaml.safe_load((ROOT / "crds" / "producerhealthpolicy.yaml").read_text())
    custom = client.CustomObjectsApi(install["api"])
    node.delete(f"{CRDS}/{CRD_NAME}")

    def gone() -> bool:
        """The CRD waits for its objects, which wait for their finalizers (kopf's): as a
        user deleting the CRD under a stopped operator would, clear them."""
        try:
            listed: Any = custom.list_cluster_custom_object("hangwatch.dev", "v1alpha1", PLURAL)
        except client.ApiException:
            listed = {"items": []}
        for item in listed.get("items", ()):
            meta = item["metadata"]
            if meta.get("finalizers"):
                with suppress(client.ApiException):
                    custom.patch_namespaced_custom_object(
                        "hangwatch.dev",
                        "v1alpha1",
                        meta["namespace"],
                        PLURAL,
                        meta["name"],
                        {"metadata": {"finalizers": None}},
                        _content_type=MERGE,
                    )
        return not node.exists(f"{CRDS}/{CRD_NAME}")

    try:
        wait_for("the CRD gone", gone, timeout=120)
        code, lines = _until(node, "the CRD missing", _failed("crd", "is not served"))
        assert code == 1 and lines["policies"]["status"] == "warn"
    finally:
        if not node.exists(f"{CRDS}/{CRD_NAME}"):
            node.create(CRDS, own)
        wait_for("the CRD served again", lambda: node.exists(f"{CRDS}/{CRD_NAME}"))
