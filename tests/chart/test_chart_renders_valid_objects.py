"""The chart renders, lints and yields only valid Kubernetes objects, in every scenario.

Covers, with the real Helm v4 engine (helm-python-sdk) for the default values and each
`charts/hangwatch/ci/*-values.yaml` scenario (cert-manager, monitoring all on, node
cordoning, peering off, namespaced): `helm lint --strict` reports nothing above info;
every built-in object passes the Kubernetes 1.25 and latest OpenAPI schemas strictly
(kubernetes-validate, unknown fields rejected); CRD-based kinds (PodMonitor,
ServiceMonitor, PrometheusRule, cert-manager Certificate/Issuer, kopf peerings), which
kubernetes-validate cannot know, are named explicitly and checked against a minimal
structural JSON schema here; every object carries the chart's labels and sits in the
release namespace (cluster-scoped kinds excepted); the chart's CRD copy equals `crds/`;
the operator Deployment is hardened (non-root, read-only root filesystem, no privilege
escalation, all capabilities dropped, probes, resources) and runs `hangwatch operator`
with the flags of its scenario; NOTES.txt tells the next steps.
"""

from __future__ import annotations

from typing import Any

import helm_python as helm
import jsonschema
import kubernetes_validate
import pytest

from tests.chart.rendering import (
    CHART,
    NAMESPACE,
    ROOT,
    SCENARIOS,
    Rendered,
    kinds,
    only,
    render,
    render_raw,
    rendered,
    scenario_values,
)
from tests.chart.schemas import DURATION, closed, non_empty

CLUSTER_SCOPED = {
    "ClusterRole",
    "ClusterRoleBinding",
    "MutatingWebhookConfiguration",
    "CustomResourceDefinition",
    "ClusterKopfPeering",
}

_LABELS = {"type": "object", "additionalProperties": {"type": "string"}}
_META = {
    "type": "object",
    "required": ["name", "labels"],
    "properties": {"name": {"type": "string"}, "namespace": {"type": "string"}, "labels": _LABELS},
}
_RELABEL = closed(
    {
        "sourceLabels": {"type": "array", "items": {"type": "string"}},
        "targetLabel": {"type": "string"},
        "replacement": {"type": "string"},
    },
    "targetLabel",
)
_ENDPOINT = closed(
    {
        "port": {"type": "string"},
        "path": {"type": "string"},
        "interval": DURATION,
        "scrapeTimeout": DURATION,
        "honorLabels": {"type": "boolean"},
        "relabelings": {"type": "array", "items": _RELABEL},
    },
    "port",
    "path",
    "interval",
)
_SELECTOR = closed({"matchLabels": _LABELS, "matchExpressions": {"type": "array"}})


def _kind(api_version: str, spec: dict[str, Any] | None) -> dict[str, Any]:
    schema: dict[str, Any] = {
        "type": "object",
        "required": ["apiVersion", "kind", "metadata"],
        "additionalProperties": False,
        "properties": {
            "apiVersion": {"const": api_version},
            "kind": {"type": "string"},
            "metadata": _META,
        },
    }
    if spec is not None:
        schema["required"].append("spec")
        schema["properties"]["spec"] = spec
    return schema


_RULE = closed(
    {
        "alert": {"type": "string", "pattern": "^Hangwatch[A-Za-z]+$"},
        "expr": {"type": "string", "minLength": 1},
        "for": DURATION,
        "labels": {
            "type": "object",
            "required": ["severity"],
            "properties": {"severity": {"enum": ["critical", "warning", "info"]}},
        },
        "annotations": closed(
            {k: {"type": "string"} for k in ("summary", "description", "runbook_url")},
            "summary",
            "description",
            "runbook_url",
        ),
    },
    "alert",
    "expr",
    "for",
    "labels",
    "annotations",
)


def _monitor(endpoints: str) -> dict[str, Any]:
    """A PodMonitor (`podMetricsEndpoints`) or ServiceMonitor (`endpoints`) spec."""
    return closed(
        {
            "namespaceSelector": {"type": "object"},
            "selector": _SELECTOR,
            endpoints: non_empty(_ENDPOINT),
        },
        "selector",
        endpoints,
    )


CUSTOM_KIND_SCHEMAS: dict[str, dict[str, Any]] = {
    "PodMonitor": _kind("monitoring.coreos.com/v1", _monitor("podMetricsEndpoints")),
    "ServiceMonitor": _kind("monitoring.coreos.com/v1", _monitor("endpoints")),
    "PrometheusRule": _kind(
        "monitoring.coreos.com/v1",
        closed(
            {
                "groups": non_empty(
                    closed(
                        {
                            "name": {"type": "string"},
                            "interval": {"type": "string"},
                            "rules": non_empty(_RULE),
                        },
                        "name",
                        "rules",
                    )
                )
            },
            "groups",
        ),
    ),
    "Certificate": _kind(
        "cert-manager.io/v1",
        closed(
            {
                "secretName": {"type": "string"},
                "commonName": {"type": "string"},
                "isCA": {"type": "boolean"},
                "duration": {"type": "string"},
                "renewBefore": {"type": "string"},
                "dnsNames": {"type": "array", "items": {"type": "string"}},
                "privateKey": {"type": "object"},
                "issuerRef": closed(
                    {
                        "name": {"type": "string"},
                        "kind": {"enum": ["Issuer", "ClusterIssuer"]},
                        "group": {"type": "string"},
                    },
                    "name",
                ),
            },
            "secretName",
            "issuerRef",
        ),
    ),
    "Issuer": _kind(
        "cert-manager.io/v1",
        {
            "type": "object",
            "additionalProperties": False,
            "minProperties": 1,
            "maxProperties": 1,
            "properties": {
                "selfSigned": {"type": "object"},
                "ca": {
                    "type": "object",
                    "required": ["secretName"],
                    "properties": {"secretName": {"type": "string"}},
                },
            },
        },
    ),
    "ClusterKopfPeering": _kind("kopf.dev/v1", None),
    "KopfPeering": _kind("kopf.dev/v1", None),
}
"""CRD-based kinds kubernetes-validate has no schema for, each with a structural schema."""


def _validate(item: Rendered, version: str) -> None:
    if item.kind in CUSTOM_KIND_SCHEMAS:
        jsonschema.validate(item.obj, CUSTOM_KIND_SCHEMAS[item.kind])
    else:
        kubernetes_validate.validate(item.obj, version, strict=True)


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_lint_is_clean(scenario: str) -> None:
    report = helm.lint(CHART, scenario_values(scenario), strict=True, namespace=NAMESPACE)
    assert report["errors"] == []
    problems = [m for m in report["messages"] if m["severity"] > 1]
    assert problems == []


@pytest.mark.parametrize("version", ["1.25", kubernetes_validate.latest_version()])
@pytest.mark.parametrize("scenario", SCENARIOS)
def test_every_object_is_valid(scenario: str, version: str) -> None:
    objects = rendered(scenario)
    assert objects
    for item in objects:
        try:
            _validate(item, version)
        except (kubernetes_validate.ValidationError, jsonschema.ValidationError) as exc:
            pytest.fail(f"{item.template}: {item.kind}/{item.name} invalid for {version}: {exc}")


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_objects_are_labelled_and_namespaced(scenario: str) -> None:
    for item in rendered(scenario):
        meta = item.obj["metadata"]
        assert meta["labels"]["app.kubernetes.io/name"] == "hangwatch", item.template
        assert meta["labels"]["app.kubernetes.io/instance"] == "hangwatch", item.template
        if item.kind in CLUSTER_SCOPED:
            assert "namespace" not in meta, item.template
        elif item.kind not in {"Role", "RoleBinding", "KopfPeering"}:
            assert meta["namespace"] == NAMESPACE, item.template


def test_crd_copy_is_identical() -> None:
    source = (ROOT / "crds" / "producerhealthpolicy.yaml").read_bytes()
    assert (CHART / "crds" / "producerhealthpolicy.yaml").read_bytes() == source
    assert sorted(p.name for p in (CHART / "crds").iterdir()) == ["producerhealthpolicy.yaml"]


def test_default_release_contents() -> None:
    objects = rendered("default")
    assert sorted(f"{o.kind}/{o.name}" for o in objects) == [
        "ClusterKopfPeering/hangwatch",
        "ClusterRole/hangwatch-operator",
        "ClusterRoleBinding/hangwatch-operator",
        "CustomResourceDefinition/clusterkopfpeerings.kopf.dev",
        "CustomResourceDefinition/kopfpeerings.kopf.dev",
        "Deployment/hangwatch-operator",
        "MutatingWebhookConfiguration/hangwatch-sidecar-injector",
        "PodDisruptionBudget/hangwatch-operator",
        "Secret/hangwatch-webhook-tls",
        "Service/hangwatch-operator",
        "ServiceAccount/hangwatch-operator",
    ]
    peering = only(objects, "ClusterKopfPeering")
    assert peering["metadata"]["annotations"]["helm.sh/hook"] == "post-install,post-upgrade"
    for crd in (o.obj for o in objects if o.kind == "CustomResourceDefinition"):
        assert crd["metadata"]["annotations"]["helm.sh/resource-policy"] == "keep"
        assert crd["spec"]["group"] == "kopf.dev"


def _operator_container(scenario: str) -> dict[str, Any]:
    deployment = only(rendered(scenario), "Deployment")
    containers: list[dict[str, Any]] = deployment["spec"]["template"]["spec"]["containers"]
    assert [c["name"] for c in containers] == ["operator"]
    return containers[0]


def test_operator_is_hardened() -> None:
    deployment = only(rendered("default"), "Deployment")
    pod = deployment["spec"]["template"]["spec"]
    assert deployment["spec"]["replicas"] == 2
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    container = _operator_container("default")
    security = container["securityContext"]
    assert security["readOnlyRootFilesystem"] is True
    assert security["allowPrivilegeEscalation"] is False
    assert security["capabilities"] == {"drop": ["ALL"]}
    assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "health"}
    assert container["readinessProbe"]["tcpSocket"]["port"] == "webhook"
    assert container["resources"]["requests"] and container["resources"]["limits"]["memory"]
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert ports == {"webhook": 9443, "metrics": 9478, "health": 8080}
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env["HANGWATCH_OPERATOR_WEBHOOK_PORT"] == "9443"
    assert env["HANGWATCH_OPERATOR_WEBHOOK_CERT_FILE"] == "/etc/hangwatch/webhook-tls/tls.crt"
    assert env["HANGWATCH_OPERATOR_SIDECAR_IMAGE"] == "ghcr.io/hangwatch/hangwatch:0.1.0"
    assert "POD_ID" in env and "HANGWATCH_OPERATOR_OPERATOR_NAMESPACE" in env


@pytest.mark.parametrize(
    ("scenario", "args"),
    [
        ("default", ["--all-namespaces", "--peering", "hangwatch", "--metrics-port", "9478"]),
        ("peering-off", ["--all-namespaces", "--standalone", "--metrics-port", "9478"]),
        (
            "namespaced",
            [
                "--namespace",
                "analytics",
                "--namespace",
                "streaming",
                "--peering",
                "hangwatch",
                "--metrics-port",
                "9478",
            ],
        ),
    ],
)
def test_operator_command(scenario: str, args: list[str]) -> None:
    container = _operator_container(scenario)
    assert container["command"] == ["hangwatch"]
    liveness = ["--liveness", "http://0.0.0.0:8080/healthz"]
    assert container["args"] == ["operator", *args, *liveness]


def test_dry_run_flag() -> None:
    values = {"operator": {"dryRun": True}}
    deployment = only(render(values), "Deployment")
    assert "--dry-run" in deployment["spec"]["template"]["spec"]["containers"][0]["args"]


def test_peering_scenarios() -> None:
    assert not {"ClusterKopfPeering", "KopfPeering", "CustomResourceDefinition"} & kinds(
        rendered("peering-off")
    )
    assert "PodDisruptionBudget" not in kinds(rendered("peering-off"))
    namespaced = rendered("namespaced")
    peerings = sorted(o.obj["metadata"]["namespace"] for o in namespaced if o.kind == "KopfPeering")
    assert peerings == ["analytics", "streaming"]
    assert "ClusterKopfPeering" not in kinds(namespaced)


def test_cert_manager_scenario() -> None:
    objects = rendered("cert-manager")
    assert "Secret" not in kinds(objects)
    serving = only(objects, "Certificate", "hangwatch-webhook")
    assert serving["spec"]["secretName"] == "hangwatch-webhook-tls"
    assert "hangwatch-operator.hangwatch-system.svc" in serving["spec"]["dnsNames"]
    assert serving["spec"]["issuerRef"] == {"name": "hangwatch-webhook-ca", "kind": "Issuer"}
    assert only(objects, "Certificate", "hangwatch-webhook-ca")["spec"]["isCA"] is True
    webhook = only(objects, "MutatingWebhookConfiguration")
    assert webhook["metadata"]["annotations"] == {
        "cert-manager.io/inject-ca-from": "hangwatch-system/hangwatch-webhook"
    }
    assert "caBundle" not in webhook["webhooks"][0]["clientConfig"]


def test_notes_tell_what_to_do_next() -> None:
    notes = render_raw({})["hangwatch/templates/NOTES.txt"]
    assert "rollout status deployment/hangwatch-operator" in notes
    assert "kind: ProducerHealthPolicy" in notes
    assert "monitoring.grafana.dashboards.enabled=true" in notes
    labelled = render_raw(scenario_values("node-cordoning"))["hangwatch/templates/NOTES.txt"]
    assert "kubectl label namespace <spark-namespace> hangwatch.dev/injection=enabled" in labelled
    monitored = render_raw(scenario_values("monitoring"))["hangwatch/templates/NOTES.txt"]
    assert "ConfigMap hangwatch-dashboard-hangwatch in hangwatch-system" in monitored
    assert "grafana_dashboard=1" in monitored
