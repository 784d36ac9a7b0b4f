"""The chart's MutatingWebhookConfiguration is the operator's, and its TLS material fits.

Covers: for the default values and for a scenario with other failure policy, timeout and
release namespace, the rendered configuration (both webhooks: Spark's pods and opted-in
producer pods) equals
`hangwatch_operator.webhook_configuration.build_webhook_configuration` for the same
settings (the operator's namespace from the release, caBundle from the chart-generated
Secret), labels included; extra namespace labels (opt-in) only add a matchLabels to each
webhook; the generated Secret is a kubernetes.io/tls Secret whose certificate is signed
by the CA in caBundle, valid for the webhook Service's DNS names, and whose key matches
it; the operator Deployment mounts that Secret where HANGWATCH_OPERATOR_WEBHOOK_*_FILE
point, and its environment parses into the same OperatorSettings
(`OperatorSettings.from_environ`).
"""

from __future__ import annotations

import base64
from typing import Any

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import padding, rsa

from hangwatch_operator.settings import OperatorSettings
from hangwatch_operator.webhook_configuration import build_webhook_configuration
from tests.chart.rendering import only, render

CASES = [
    ({}, "hangwatch-system"),
    ({"webhook": {"failurePolicy": "Fail", "timeoutSeconds": 10, "servicePort": 8443}}, "infra"),
]


def _expected(values: dict[str, Any], namespace: str, webhook: dict[str, Any]) -> dict[str, Any]:
    hook = values.get("webhook", {})
    settings = OperatorSettings(
        operator_namespace=namespace,
        webhook_failure_policy=hook.get("failurePolicy", "Ignore"),
        webhook_timeout_seconds=hook.get("timeoutSeconds", 5),
    )
    ca_bundle = base64.b64decode(webhook["webhooks"][0]["clientConfig"]["caBundle"])
    return build_webhook_configuration(
        settings,
        ca_bundle=ca_bundle,
        service_name="hangwatch-operator",
        service_port=hook.get("servicePort", 443),
        name="hangwatch-sidecar-injector",
    )


@pytest.mark.parametrize(("values", "namespace"), CASES)
def test_rendered_configuration_equals_the_operators(
    values: dict[str, Any], namespace: str
) -> None:
    webhook = only(render(values, namespace=namespace), "MutatingWebhookConfiguration")
    expected = _expected(values, namespace, webhook)
    assert webhook["webhooks"] == expected["webhooks"]
    assert webhook["apiVersion"] == expected["apiVersion"]
    assert webhook["kind"] == expected["kind"]
    assert webhook["metadata"]["name"] == expected["metadata"]["name"]
    assert expected["metadata"]["labels"].items() <= webhook["metadata"]["labels"].items()


def test_namespace_labels_only_add_match_labels() -> None:
    values = {"webhook": {"namespaceLabels": {"hangwatch.dev/injection": "enabled"}}}
    webhook = only(render(values), "MutatingWebhookConfiguration")
    expected = _expected({}, "hangwatch-system", webhook)
    for rendered, built in zip(webhook["webhooks"], expected["webhooks"], strict=True):
        selector = rendered.pop("namespaceSelector")
        expected_selector = built.pop("namespaceSelector")
        assert rendered == built
        labels = {"hangwatch.dev/injection": "enabled"}
        assert selector == {**expected_selector, "matchLabels": labels}


def test_generated_certificate_is_signed_by_the_ca_bundle() -> None:
    objects = render({})
    secret = only(objects, "Secret", "hangwatch-webhook-tls")
    assert secret["type"] == "kubernetes.io/tls"
    data = {k: base64.b64decode(v) for k, v in secret["data"].items()}
    webhook = only(objects, "MutatingWebhookConfiguration")
    ca_pem = base64.b64decode(webhook["webhooks"][0]["clientConfig"]["caBundle"])
    assert ca_pem == data["ca.crt"]
    ca = x509.load_pem_x509_certificate(ca_pem)
    cert = x509.load_pem_x509_certificate(data["tls.crt"])
    assert cert.issuer == ca.subject
    ca_key = ca.public_key()
    assert isinstance(ca_key, rsa.RSAPublicKey)
    assert cert.signature_hash_algorithm is not None
    ca_key.verify(
        cert.signature,
        cert.tbs_certificate_bytes,
        padding.PKCS1v15(),
        cert.signature_hash_algorithm,
    )
    names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert "hangwatch-operator.hangwatch-system.svc" in names.get_values_for_type(x509.DNSName)
    key = serialization.load_pem_private_key(data["tls.key"], password=None)
    assert key.public_key().public_numbers() == cert.public_key().public_numbers()  # type: ignore[union-attr]


def test_operator_reads_the_mounted_certificate_with_the_same_settings() -> None:
    objects = render({"webhook": {"failurePolicy": "Fail", "timeoutSeconds": 7}})
    pod = only(objects, "Deployment")["spec"]["template"]["spec"]
    container = pod["containers"][0]
    mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
    secret_volume = next(v for v in pod["volumes"] if v["name"] == "webhook-tls")
    assert secret_volume["secret"]["secretName"] == "hangwatch-webhook-tls"
    environ = {e["name"]: e["value"] for e in container["env"] if "value" in e}
    environ["HANGWATCH_OPERATOR_OPERATOR_NAMESPACE"] = "hangwatch-system"  # downward API
    settings = OperatorSettings.from_environ(environ)
    assert settings.webhook_failure_policy == "Fail"
    assert settings.webhook_timeout_seconds == 7
    assert settings.webhook_port == 9443
    assert settings.sidecar_port == 9477
    for path in (settings.webhook_cert_file, settings.webhook_key_file, settings.webhook_ca_file):
        assert path is not None and str(path.parent) == mounts["webhook-tls"]
    assert {p.name for p in (settings.webhook_cert_file, settings.webhook_key_file)} == {
        "tls.crt",
        "tls.key",
    }
