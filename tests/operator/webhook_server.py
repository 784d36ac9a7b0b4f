"""The operator serving the injection webhook over HTTPS, with a known set of policies.

Not a test module. `serving_webhook` starts kmock's Kubernetes emulator (API server
1.30) holding the example policies as the API server stores them (CRD defaults
applied, uid and generation set), a legacy policy in `legacy-jobs` and an invalid
one in `broken`, then the real operator as its own process (`kopf run -m
hangwatch_operator.webhook`, settings from HANGWATCH_OPERATOR_* variables) with a
certificate from our CA, and waits until the webhook is registered and every policy
loaded by the webhook's own policy watch. `Webhook.post` sends any body over HTTPS
verified against that CA, as the API server does with caBundle.
"""

from __future__ import annotations

import base64
import json
import ssl
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jsonpatch

from hangwatch_operator.certificates import generate_webhook_certificates
from hangwatch_operator.settings import InjectionMode
from hangwatch_testing.emulated_cluster import EmulatedCluster, OperatorRun, running_operator
from hangwatch_testing.ports import free_port
from hangwatch_testing.spark_pods import admission_review
from hangwatch_testing.structural import (
    EXAMPLES,
    apply_defaults,
    load_yaml,
    policy_document,
    version_schema,
)

POLICIES = "hangwatch.dev/v1alpha1/producerhealthpolicies"
WEBHOOK_CONFIGS = "admissionregistration.k8s.io/v1/mutatingwebhookconfigurations"
MANAGED_CONFIGURATION = "hangwatch-test"


@dataclass
class Webhook:
    cluster: EmulatedCluster
    operator: OperatorRun
    url: str
    ca_file: Path

    def context(self) -> ssl.SSLContext:
        return ssl.create_default_context(cafile=str(self.ca_file))

    def post(self, data: bytes, timeout: float = 10) -> tuple[int, bytes]:
        """POST raw bytes; the HTTP status and body (also for error statuses)."""
        request = urllib.request.Request(
            self.url, data=data, headers={"Content-Type": "application/json"}
        )
        try:
            with urllib.request.urlopen(request, context=self.context(), timeout=timeout) as reply:
                return reply.status, reply.read()
        except urllib.error.HTTPError as error:
            return error.code, error.read()

    def listening(self) -> bool:
        """Whether the server accepts HTTPS connections yet (any answer counts)."""
        try:
            self.post(b"{}", timeout=2)
        except (urllib.error.URLError, OSError):
            return False
        return True

    def answer(self, review: Any) -> Any:
        """POST an AdmissionReview (any JSON value); its parsed answer (HTTP 200 only)."""
        status, body = self.post(json.dumps(review).encode())
        assert status == 200, (status, body[:500])
        return json.loads(body)

    def review(self, pod: dict[str, Any], namespace: str) -> tuple[dict[str, Any], Any]:
        """POST an AdmissionReview; return its response and the patched pod (None if unpatched)."""
        request = admission_review(pod, namespace)
        answer = self.answer(request)
        response = answer["response"]
        assert answer["kind"] == "AdmissionReview" and answer["apiVersion"] == "admission.k8s.io/v1"
        assert response["uid"] == request["request"]["uid"] and response["allowed"] is True
        if "patch" not in response:
            return response, None
        assert response["patchType"] == "JSONPatch"
        return response, jsonpatch.apply_patch(request["request"]["object"], patch_ops(response))


def patch_ops(response: dict[str, Any]) -> list[dict[str, Any]]:
    """The JSON Patch operations of an AdmissionReview response ([] without a patch)."""
    if "patch" not in response:
        return []
    ops: list[dict[str, Any]] = json.loads(base64.b64decode(response["patch"]))
    return ops


def post_json(url: str, body: dict[str, Any], context: ssl.SSLContext) -> Any:
    data = json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, context=context, timeout=10) as reply:
        return json.load(reply)


def stored(body: dict[str, Any]) -> dict[str, Any]:
    """A policy as the API server stores it: defaults applied, uid and generation set."""
    stored = apply_defaults(version_schema(), body)
    meta = stored["metadata"]
    meta |= {"uid": f"uid-{meta['namespace']}-{meta['name']}", "generation": 1}
    return stored


def put_policy(cluster: EmulatedCluster, body: dict[str, Any]) -> dict[str, Any]:
    policy = stored(body)
    cluster.put(POLICIES, policy["metadata"]["namespace"], policy["metadata"]["name"], policy)
    return policy


def inline_policy(namespace: str, name: str, **spec: Any) -> dict[str, Any]:
    return policy_document(namespace, name, ["kafka.kafka.svc:9092"], **spec)


def indexed(namespace: str, name: str, generation: int = 1) -> str:
    """The operator's log line once its webhook's own policy watch holds the policy."""
    return f"Policy {namespace}/{name} (generation {generation}) loaded for injection."


def client_config(cluster: EmulatedCluster, name: str) -> dict[str, Any] | None:
    config = cluster.get(WEBHOOK_CONFIGS, None, name)
    hooks = (config or {}).get("webhooks") or []
    return hooks[0] if hooks and "clientConfig" in hooks[0] else None


LEGACY_POLICY = inline_policy("legacy-jobs", "old-nodes", sidecar={"injectionMode": "legacy"})
POLICY_OF = {
    "spark-jobs": (
        stored(load_yaml(EXAMPLES / "policy-spark-executors.yaml")),
        InjectionMode.NATIVE,
    ),
    "analytics": (stored(load_yaml(EXAMPLES / "policy-dry-run.yaml")), InjectionMode.NATIVE),
    "legacy-jobs": (stored(LEGACY_POLICY), InjectionMode.LEGACY),
}
"""The valid policy `serving_webhook` holds per namespace, and its mode on API server 1.30."""


@contextmanager
def serving_webhook(workdir: Path) -> Iterator[Webhook]:
    """The operator with the policies described above, serving the webhook."""
    ca, cert, key = generate_webhook_certificates(["localhost", "127.0.0.1"]).write(workdir / "tls")
    port = free_port()
    with ExitStack() as stack:
        cluster = stack.enter_context(EmulatedCluster(minor_version=30))
        for example in ("policy-spark-executors.yaml", "policy-dry-run.yaml"):
            put_policy(cluster, load_yaml(EXAMPLES / example))
        put_policy(cluster, LEGACY_POLICY)
        too_small = {"resources": {"requests": {"memory": "256Mi"}, "limits": {"memory": "128Mi"}}}
        put_policy(cluster, inline_policy("broken", "too-small", sidecar=too_small))
        settings = {
            "webhook_listen_address": "127.0.0.1",
            "webhook_port": port,
            "webhook_host": "localhost",
            "webhook_cert_file": cert,
            "webhook_key_file": key,
            "webhook_ca_file": ca,
            "webhook_managed_configuration": MANAGED_CONFIGURATION,
        }
        operator = stack.enter_context(running_operator(cluster, workdir, settings))
        operator.wait_for(
            "the webhook is registered", lambda: client_config(cluster, MANAGED_CONFIGURATION)
        )
        for namespace, name in [
            ("spark-jobs", "orders-writers"),
            ("analytics", "try-it-out"),
            ("legacy-jobs", "old-nodes"),
        ]:
            operator.wait_for_log(indexed(namespace, name))
        operator.wait_for_log("Invalid ProducerHealthPolicy broken/too-small (generation 1)")
        yield Webhook(cluster, operator, f"https://localhost:{port}/inject-sidecar", ca)
