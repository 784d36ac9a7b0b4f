"""The chart, installed by real Helm, is accepted and served by a real API server.

Covered against kube-apiserver with RBAC and the default admission plugins:

- the ProducerHealthPolicy CRD is established with a structural schema (no
  NonStructuralSchema condition) and its CEL rules, served with its short name and
  category;
- the server's defaulting of a minimal policy equals the defaults the emulator tier
  applies (`tests/operator/structural.apply_defaults`);
- `kubectl get producerhealthpolicies` prints the CRD's printer columns, filled from
  status; `-o wide` adds Dry Run;
- status is a subresource: a write to the main resource leaves status alone, a write
  to /status leaves spec and generation alone;
- the RBAC objects give the operator's ServiceAccount exactly the chart's rules
  (`kubectl auth can-i --as`), reading Secrets and patching nodes (cordoning off) no;
- the MutatingWebhookConfiguration carries the CA of the chart's Secret, whose serving
  certificate is valid for the Service's DNS name;
- every example policy is accepted and stored with the defaults the emulator tier
  applies. (Every document of examples/invalid is rejected by this same release's
  server in the node tier, tests/node/test_crd_rules_on_the_server.py.)
"""

from __future__ import annotations

import base64
import json
import ssl
from pathlib import Path
from typing import Any

import pytest
import yaml
from cryptography import x509

from hangwatch_testing.kube.cluster import LocalCluster
from hangwatch_testing.kube.release import NAMESPACE, OPERATOR_USER, HelmRelease
from hangwatch_testing.structural import (
    EXAMPLES,
    apply_defaults,
    policy_document,
    version_schema,
)

pytestmark = pytest.mark.xdist_group("kube")

CRD = "producerhealthpolicies.hangwatch.dev"


def _json(cluster: LocalCluster, *args: str) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(cluster.kubectl(*args, "-o", "json").stdout)
    return loaded


def _namespace(cluster: LocalCluster, name: str) -> str:
    if cluster.kubectl("get", "namespace", name, check=False).returncode != 0:
        cluster.kubectl("create", "namespace", name)
    return name


def _policy(namespace: str, name: str, **spec: Any) -> dict[str, Any]:
    return policy_document(namespace, name, ["kafka-0.kafka:9092"], **spec)


def test_crd_is_established_structural_and_served(
    cluster: LocalCluster, release: HelmRelease
) -> None:
    crd = _json(cluster, "get", "crd", CRD)
    conditions = {c["type"]: c["status"] for c in crd["status"]["conditions"]}
    assert conditions["Established"] == "True"
    assert conditions["NamesAccepted"] == "True"
    assert "NonStructuralSchema" not in conditions, crd["status"]["conditions"]
    assert "x-kubernetes-validations" in json.dumps(crd["spec"])  # kept: the server runs them
    resources = cluster.kubectl("api-resources", "--api-group=hangwatch.dev").stdout
    assert "producerhealthpolicies" in resources and "phpolicy" in resources
    assert cluster.kubectl("get", "hangwatch", "-A").returncode == 0  # the category


def test_server_defaults_equal_the_emulator_tiers(
    cluster: LocalCluster, release: HelmRelease
) -> None:
    namespace = _namespace(cluster, "defaults")
    body = _policy(namespace, "minimal")
    cluster.kubectl("create", "-f", "-", stdin=json.dumps(body))
    stored = _json(cluster, "get", "producerhealthpolicy", "minimal", "-n", namespace)
    assert stored["spec"] == apply_defaults(version_schema(), body)["spec"]
    assert stored["metadata"]["generation"] == 1


def test_printer_columns_and_status_subresource(
    cluster: LocalCluster, release: HelmRelease
) -> None:
    namespace = _namespace(cluster, "columns")
    cluster.kubectl("create", "-f", "-", stdin=json.dumps(_policy(namespace, "writers")))
    status = {"watched": 7, "unhealthy": 2, "lastAction": {"summary": "restart exec-3"}}
    cluster.merge_patch("producerhealthpolicy", "writers", namespace, {"status": status})
    # the main resource ignores status: nothing shows yet
    table = cluster.kubectl("get", "producerhealthpolicies", "-n", namespace).stdout.splitlines()
    header = table[0].split()
    assert header == ["NAME", "WATCHED", "UNHEALTHY", "LAST", "ACTION", "AGE"], table
    assert len(table[1].split()) == 2, table  # NAME and AGE only: empty columns print blank
    _patch_status(cluster, namespace, "writers", status)
    row = cluster.kubectl("get", "phpolicy", "writers", "-n", namespace).stdout.splitlines()[1]
    assert row.split()[:5] == ["writers", "7", "2", "restart", "exec-3"], row
    wide = cluster.kubectl("get", "phpolicy", "writers", "-n", namespace, "-o", "wide").stdout
    assert "DRY RUN" in wide.splitlines()[0] and "false" in wide.splitlines()[1]
    stored = _json(cluster, "get", "phpolicy", "writers", "-n", namespace)
    assert stored["metadata"]["generation"] == 1  # a status write is not a spec change
    spec_change = {"spec": {"safety": {"dryRun": True}}, "status": {"watched": 0}}
    cluster.merge_patch("phpolicy", "writers", namespace, spec_change)
    stored = _json(cluster, "get", "phpolicy", "writers", "-n", namespace)
    assert stored["metadata"]["generation"] == 2
    assert stored["status"]["watched"] == 7  # status only changes through /status


def _patch_status(cluster: LocalCluster, namespace: str, name: str, status: dict[str, Any]) -> None:
    cluster.kubectl(
        *("patch", "phpolicy", name, "-n", namespace, "--subresource=status", "--type=merge"),
        *("-p", json.dumps({"status": status})),
    )


def test_rbac_gives_the_service_account_exactly_the_chart_rules(
    cluster: LocalCluster, release: HelmRelease
) -> None:
    allowed = [
        ("list", "customresourcedefinitions.apiextensions.k8s.io", None),
        ("watch", "namespaces", None),
        ("list", "nodes", None),
        ("patch", "producerhealthpolicies.hangwatch.dev", "spark-jobs"),
        ("patch", "producerhealthpolicies.hangwatch.dev/status", "spark-jobs"),
        ("delete", "pods", "spark-jobs"),
        ("watch", "pods", "spark-jobs"),
        ("create", "events", "spark-jobs"),
        ("create", "events.events.k8s.io", "default"),
        ("patch", "clusterkopfpeerings.kopf.dev", None),
    ]
    denied = [
        ("get", "secrets", NAMESPACE),
        ("list", "secrets", "spark-jobs"),
        ("patch", "nodes", None),
        ("get", "nodes", None),
        ("create", "pods", "spark-jobs"),
        ("update", "pods", "spark-jobs"),
        ("patch", "mutatingwebhookconfigurations.admissionregistration.k8s.io", None),
        ("delete", "producerhealthpolicies.hangwatch.dev", "spark-jobs"),
    ]
    for verb, resource, namespace in allowed + denied:
        scope = ["-n", namespace] if namespace else []
        answer = cluster.kubectl(
            "auth", "can-i", verb, resource, f"--as={OPERATOR_USER}", *scope, check=False
        ).stdout.strip()
        expected = "yes" if (verb, resource, namespace) in allowed else "no"
        assert answer == expected, f"{verb} {resource} in {namespace}: {answer}"


def test_webhook_configuration_carries_the_chart_ca(
    cluster: LocalCluster, release: HelmRelease, tmp_path: Path
) -> None:
    secret = _json(cluster, "get", "secret", "hangwatch-webhook-tls", "-n", NAMESPACE)
    config = _json(cluster, "get", "mutatingwebhookconfiguration", "hangwatch-sidecar-injector")
    spark, producer = config["webhooks"]  # Spark's pods, opted-in producer pods
    for webhook in (spark, producer):
        assert webhook["clientConfig"]["caBundle"] == secret["data"]["ca.crt"]
        assert webhook["clientConfig"]["service"]["port"] == release.webhook_port
        assert webhook["failurePolicy"] == "Ignore"
        assert webhook["reinvocationPolicy"] == "IfNeeded"
    ca = tmp_path / "ca.crt"
    ca.write_bytes(base64.b64decode(secret["data"]["ca.crt"]))
    cert = tmp_path / "tls.crt"
    cert.write_bytes(base64.b64decode(secret["data"]["tls.crt"]))
    key = tmp_path / "tls.key"
    key.write_bytes(base64.b64decode(secret["data"]["tls.key"]))
    server = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server.load_cert_chain(cert, key)  # the key matches the certificate
    parsed = x509.load_pem_x509_certificate(cert.read_bytes())
    names = parsed.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert f"hangwatch-operator.{NAMESPACE}.svc" in names.get_values_for_type(x509.DNSName)


@pytest.mark.parametrize("example", ["policy-spark-executors.yaml", "policy-dry-run.yaml"])
def test_example_policies_are_accepted(
    cluster: LocalCluster, release: HelmRelease, example: str
) -> None:
    body = yaml.safe_load((EXAMPLES / example).read_text())
    _namespace(cluster, body["metadata"]["namespace"])
    cluster.kubectl("apply", "-f", str(EXAMPLES / example))
    stored = _json(cluster, "get", "-f", str(EXAMPLES / example))
    assert stored["spec"]["kafka"] == apply_defaults(version_schema(), body)["spec"]["kafka"]
