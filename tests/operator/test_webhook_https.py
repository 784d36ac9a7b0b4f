"""The injection webhook served for real: kopf's HTTPS server, real AdmissionReviews.

The operator runs as its own process (`webhook_server.serving_webhook`: `kopf run -m
hangwatch_operator.webhook`, settings from HANGWATCH_OPERATOR_* variables) against
kmock's Kubernetes emulator, which holds the example policies (with CRD defaults
applied, as the API server stores them) and reports API server 1.30. Requests are POSTed
over HTTPS with `ssl` verifying the webhook's certificate against the generated CA, as
the API server does with caBundle.

Covers: the configuration the chart installs is valid, short (5 s), fails open and skips
system namespaces and the operator's own, with one webhook for Spark's pods and one for
opted-in producer pods (selectors excluding each other, one path); kopf registers the
webhook (our CA, path /inject-sidecar, failurePolicy Ignore, only pods with spark-role);
a Spark executor pod gets `patchType: JSONPatch` whose base64 patch, applied with
`jsonpatch`, yields a pod the 1.29 Pod schema accepts and equals the pure builder's
result; `auto` resolves to native on 1.30, a legacy policy gets shareProcessNamespace;
the namespace comes from the request when the object has none; opted-out, uncovered,
driver and already-injected pods are admitted unchanged; a conflicting pod is admitted
with a warning, and so is a pod with a field of the wrong type (fail open: allowed,
never denied); for every case of `webhook_cases` the answer (operations applied to the
pod, warnings) equals the one recorded before issue 15 from kopf's admission machinery,
and the operations are exactly the pure builder's, and kopf's own admission path (the
benchmark's reference) answers the same; an AdmissionReview v1beta1 is answered in
v1beta1; an invalid policy is reported in the log and injects nothing; a client without
our CA is refused; with no certificate configured the operator self-signs and publishes
its CA in the webhook configuration; bad settings stop the operator at once with the
variable named.
"""

from __future__ import annotations

import base64
import copy
import json
import ssl
import urllib.error
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonpatch
import kubernetes_validate
import pytest

from hangwatch_operator.certificates import generate_webhook_certificates
from hangwatch_operator.injection import SIDECAR_CONTAINER, build_sidecar_patch
from hangwatch_operator.policies import parse_policy
from hangwatch_operator.settings import InjectionMode, OperatorSettings
from hangwatch_operator.webhook_configuration import build_webhook_configuration
from hangwatch_testing import kopf_admission_path
from hangwatch_testing.emulated_cluster import running_operator
from hangwatch_testing.ports import free_port
from hangwatch_testing.spark_pods import admission_review, driver_pod, executor_pod
from hangwatch_testing.structural import EXAMPLES, load_yaml
from tests.operator.webhook_cases import CASES, RECORDED, as_recorded, case_pod
from tests.operator.webhook_server import (
    MANAGED_CONFIGURATION,
    POLICY_OF,
    Webhook,
    client_config,
    indexed,
    patch_ops,
    post_json,
    serving_webhook,
    stored,
)


@pytest.fixture(scope="module")
def webhook(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Webhook]:
    with serving_webhook(tmp_path_factory.mktemp("webhook")) as served:
        yield served


def test_kopf_registers_the_webhook_with_our_ca_and_failure_policy_ignore(webhook: Webhook) -> None:
    hook = client_config(webhook.cluster, MANAGED_CONFIGURATION)
    assert hook is not None
    assert hook["clientConfig"]["url"] == webhook.url
    assert base64.b64decode(hook["clientConfig"]["caBundle"]) == webhook.ca_file.read_bytes()
    assert hook["failurePolicy"] == "Ignore"
    assert hook["sideEffects"] == "None"
    assert hook["rules"][0]["resources"] == ["pods"] and hook["rules"][0]["operations"] == [
        "CREATE"
    ]
    assert hook["objectSelector"] == {
        "matchExpressions": [{"key": "spark-role", "operator": "Exists"}]
    }


def test_installed_webhook_configuration_is_valid_short_and_fails_open() -> None:
    settings = OperatorSettings(operator_namespace="hangwatch")
    config = build_webhook_configuration(settings, ca_bundle=b"CA", service_name="hangwatch")
    kubernetes_validate.validate(config, "1.25", strict=True)
    spark, producer = config["webhooks"]
    for hook in (spark, producer):
        assert (hook["failurePolicy"], hook["timeoutSeconds"]) == ("Ignore", 5)
        assert hook["reinvocationPolicy"] == "IfNeeded" and hook["sideEffects"] == "None"
        assert hook["clientConfig"]["service"]["path"] == "/inject-sidecar"
        excluded = hook["namespaceSelector"]["matchExpressions"][0]["values"]
        assert {"kube-system", "hangwatch"} <= set(excluded)
    assert spark["objectSelector"] == {
        "matchExpressions": [{"key": "spark-role", "operator": "Exists"}]
    }
    assert producer["objectSelector"] == {
        "matchLabels": {"hangwatch.dev/producer": "true"},
        "matchExpressions": [{"key": "spark-role", "operator": "DoesNotExist"}],
    }


def test_executor_pod_gets_a_jsonpatch_that_yields_a_valid_pod(webhook: Webhook) -> None:
    response, patched = webhook.review(executor_pod(), "spark-jobs")
    assert patched is not None, response
    kubernetes_validate.validate(patched, "1.29", strict=True)
    (sidecar,) = patched["spec"]["initContainers"]  # API server 1.30: auto means native
    assert sidecar["name"] == SIDECAR_CONTAINER and sidecar["restartPolicy"] == "Always"
    assert patched["metadata"]["annotations"]["hangwatch.dev/injected"] == "orders-writers"


def test_patch_over_https_equals_the_pure_builders_result(webhook: Webhook) -> None:
    pod = executor_pod(7)
    _, patched = webhook.review(pod, "spark-jobs")
    policy = parse_policy(stored(load_yaml(EXAMPLES / "policy-spark-executors.yaml")))
    ops = build_sidecar_patch(pod, policy, OperatorSettings(), InjectionMode.NATIVE)
    assert patched == jsonpatch.apply_patch(pod, ops)


@pytest.mark.parametrize("case", sorted(CASES))
def test_every_recorded_case_gets_the_answer_it_got_before(webhook: Webhook, case: str) -> None:
    pod, namespace = case_pod(case)
    before = RECORDED[case]
    assert (before["pod"], before["namespace"]) == (pod, namespace)  # the same question
    request = admission_review(pod, namespace)
    answer = webhook.answer(request)
    response = answer["response"]
    assert answer["apiVersion"] == "admission.k8s.io/v1" and answer["kind"] == "AdmissionReview"
    assert response["uid"] == request["request"]["uid"] and response["allowed"] is True
    assert response.get("warnings", []) == before["warnings"]
    ops = patch_ops(response)
    assert bool(ops) == bool(before["operations"])
    assert as_recorded(jsonpatch.apply_patch(pod, ops)) == jsonpatch.apply_patch(
        pod, before["operations"]
    )
    if ops:  # what the pure builder computes, not a diff of the whole pod
        assert response["patchType"] == "JSONPatch"
        policy, mode = POLICY_OF[namespace]
        assert ops == build_sidecar_patch(pod, parse_policy(policy), OperatorSettings(), mode)


def test_kopfs_admission_path_gives_the_same_answers(webhook: Webhook, tmp_path: Path) -> None:
    """The reference path of the benchmark (`kopf_admission_path`) answers as recorded too."""
    ca, cert, key = generate_webhook_certificates(["localhost"]).write(tmp_path / "tls")
    port = free_port()
    settings = {
        "webhook_listen_address": "127.0.0.1",
        "webhook_port": port,
        "webhook_cert_file": cert,
        "webhook_key_file": key,
    }
    reference = kopf_admission_path.__name__
    with running_operator(webhook.cluster, tmp_path, settings, reference) as operator:
        for namespace, name in [("spark-jobs", "orders-writers"), ("legacy-jobs", "old-nodes")]:
            operator.wait_for_log(indexed(namespace, name))
        url = f"https://localhost:{port}/{kopf_admission_path.VIA_KOPF_ID}"
        via_kopf = Webhook(webhook.cluster, operator, url, ca)
        operator.wait_for("the webhook served", via_kopf.listening)
        for case in sorted(CASES):
            pod, namespace = case_pod(case)
            response = via_kopf.answer(admission_review(pod, namespace))["response"]
            before = RECORDED[case]
            assert response.get("warnings", []) == before["warnings"], case
            expected = jsonpatch.apply_patch(pod, before["operations"])
            assert as_recorded(jsonpatch.apply_patch(pod, patch_ops(response))) == expected, case


def test_a_v1beta1_review_is_answered_in_v1beta1(webhook: Webhook) -> None:
    request = admission_review(executor_pod(), "spark-jobs")
    request["apiVersion"] = "admission.k8s.io/v1beta1"
    answer = webhook.answer(request)
    assert answer["apiVersion"] == "admission.k8s.io/v1beta1"
    assert answer["kind"] == "AdmissionReview"
    assert answer["response"]["uid"] == request["request"]["uid"]
    assert answer["response"]["allowed"] is True and patch_ops(answer["response"])


def test_namespace_comes_from_the_request_when_the_object_has_none(webhook: Webhook) -> None:
    _, patched = webhook.review(executor_pod(namespace=None), "spark-jobs")
    assert patched is not None and "namespace" not in patched["metadata"]


def test_legacy_policy_gets_a_sidecar_that_exits_with_the_executor(webhook: Webhook) -> None:
    pod = executor_pod(namespace="legacy-jobs")
    _, patched = webhook.review(pod, "legacy-jobs")
    kubernetes_validate.validate(patched, "1.27", strict=True)
    assert patched["spec"]["shareProcessNamespace"] is True
    assert patched["spec"]["containers"][-1]["name"] == SIDECAR_CONTAINER
    assert "--exit-when-gone" in patched["spec"]["containers"][-1]["args"]


@pytest.mark.parametrize(
    ("pod", "namespace"),
    [
        (executor_pod(annotations={"hangwatch.dev/inject": "false"}), "spark-jobs"),
        (executor_pod(labels={"team": "search"}), "spark-jobs"),
        (driver_pod(), "spark-jobs"),
        (executor_pod(namespace="no-policy-here"), "no-policy-here"),
    ],
    ids=["opted-out", "other-team", "driver", "namespace-without-policy"],
)
def test_pods_not_to_inject_are_admitted_unchanged(
    webhook: Webhook, pod: dict[str, Any], namespace: str
) -> None:
    response, patched = webhook.review(pod, namespace)
    assert patched is None and "warnings" not in response


def test_reinvoked_webhook_leaves_an_injected_pod_alone(webhook: Webhook) -> None:
    _, once = webhook.review(executor_pod(), "spark-jobs")
    response, twice = webhook.review(copy.deepcopy(once), "spark-jobs")
    assert twice is None, response


def test_conflicting_pod_is_admitted_with_a_warning(webhook: Webhook) -> None:
    pod = executor_pod()
    pod["spec"]["volumes"].append({"name": "hangwatch-telemetry", "emptyDir": {}})
    response, patched = webhook.review(pod, "spark-jobs")
    assert patched is None
    assert response["warnings"] == [
        "hangwatch: sidecar not injected: the pod already has a volume named hangwatch-telemetry"
    ]


def test_a_pod_the_webhook_cannot_read_is_admitted_unchanged(webhook: Webhook) -> None:
    pod = executor_pod()
    pod["spec"]["containers"][0]["env"] = "not-a-list"  # used to make the handler fail
    response, patched = webhook.review(pod, "spark-jobs")
    assert patched is None
    assert response["warnings"] == [
        "hangwatch: sidecar not injected: malformed request (spec.containers[0].env is not a list)"
    ]
    webhook.operator.wait_for_log("Malformed admission request")


def test_invalid_policy_is_reported_and_injects_nothing(webhook: Webhook) -> None:
    assert (
        "Invalid ProducerHealthPolicy broken/too-small (generation 1): "
        "spec.sidecar.resources.requests.memory (256Mi) exceeds the limit (128Mi); "
        "its pods are not injected." in webhook.operator.log()
    )
    _, patched = webhook.review(executor_pod(namespace="broken"), "broken")
    assert patched is None


def test_client_without_our_ca_is_refused(webhook: Webhook) -> None:
    review = admission_review(executor_pod(), "spark-jobs")
    with pytest.raises(urllib.error.URLError) as caught:
        post_json(webhook.url, review, ssl.create_default_context())
    assert isinstance(caught.value.reason, ssl.SSLCertVerificationError)


def test_local_run_self_signs_and_publishes_its_ca(webhook: Webhook, tmp_path: Path) -> None:
    port = free_port()
    settings = {
        "webhook_listen_address": "127.0.0.1",
        "webhook_port": port,
        "webhook_host": "localhost",
        "webhook_managed_configuration": "hangwatch-local",
        "injection_mode": "legacy",
    }
    with running_operator(webhook.cluster, tmp_path, settings) as operator:
        hook = operator.wait_for(
            "the webhook is registered", lambda: client_config(webhook.cluster, "hangwatch-local")
        )
        operator.wait_for_log(indexed("spark-jobs", "orders-writers"))
        context = ssl.create_default_context(
            cadata=base64.b64decode(hook["clientConfig"]["caBundle"]).decode()
        )
        request = admission_review(executor_pod(), "spark-jobs")
        answer = post_json(hook["clientConfig"]["url"], request, context)
        ops = json.loads(base64.b64decode(answer["response"]["patch"]))
        patched = jsonpatch.apply_patch(request["request"]["object"], ops)
        assert patched["spec"]["shareProcessNamespace"] is True  # forced legacy by the setting
        assert "generating a self-signed one" in operator.log()


def test_bad_operator_settings_stop_the_operator_with_the_variable_named(
    webhook: Webhook, tmp_path: Path
) -> None:
    with running_operator(webhook.cluster, tmp_path, {"sidecar_port": "ninety"}) as operator:
        operator.wait_for("exit", lambda: operator.process.poll() is not None)
        assert operator.process.returncode != 0
        assert "invalid operator settings: HANGWATCH_OPERATOR_SIDECAR_PORT" in operator.log()
