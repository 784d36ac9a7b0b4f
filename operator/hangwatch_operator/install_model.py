"""The install as `hangwatch check` reads it, and the report's lines.

`Survey` is everything `install_survey` read from one cluster (the objects the API
server returned and the outcome of each live probe it made); the functions below derive
what both the survey and the checks need from it (the operator's settings as its
Deployment sets them, the injection webhook and its caBundle, the parsed policies, the
pods a policy selects and their sidecars, the pull secrets they name). A check's
outcome is a `Result` of a `Status`. Pure: no I/O.
"""

from __future__ import annotations

import base64
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from cryptography import x509

from hangwatch_operator.injection import SIDECAR_CONTAINER
from hangwatch_operator.policies import (
    GROUP,
    PLURAL,
    PRODUCER_LABEL,
    PRODUCER_LABEL_VALUE,
    SPARK_ROLE_LABEL,
    InvalidPolicyError,
    Policy,
    Role,
    parse_policy,
    pod_role,
)
from hangwatch_operator.settings import OperatorSettings
from hangwatch_operator.webhook_configuration import WEBHOOK_NAME

CRD_NAME = f"{PLURAL}.{GROUP}"
VERSION_LABEL = "app.kubernetes.io/version"
"""On the CRD file: the chart's appVersion (charts/hangwatch/crds, crds/)."""
CHART_NAME = "hangwatch"
OPERATOR_COMPONENT = "app.kubernetes.io/component=operator"
TLS_VOLUME = "webhook-tls"
"""The operator Deployment's volume holding the webhook's serving certificate."""
SIDECAR_IMAGE_ENV = "HANGWATCH_OPERATOR_SIDECAR_IMAGE"
MONITORING_CRDS: dict[str, str] = {
    "sidecarPodMonitor": "podmonitors.monitoring.coreos.com",
    "operatorServiceMonitor": "servicemonitors.monitoring.coreos.com",
    "prometheusRule": "prometheusrules.monitoring.coreos.com",
}
"""`monitoring.<key>.enabled` in the chart's values -> the Prometheus Operator CRD it needs."""
PULL_ERRORS = frozenset({"ErrImagePull", "ImagePullBackOff", "InvalidImageName"})


class Status(StrEnum):
    PASS = "pass"
    WARN = "warn"
    FAIL = "fail"
    SKIP = "skip"


MARKS = {Status.PASS: "\u221a", Status.WARN: "\u203c", Status.FAIL: "\u00d7", Status.SKIP: "-"}
"""The marks of `linkerd check`: square root (pass), double exclamation (warn), times (fail)."""


@dataclass(frozen=True)
class Result:
    """One line of the report: a check, its outcome, what was seen and what to do."""

    check: str
    status: Status
    detail: str
    hint: str = ""

    def as_json(self) -> dict[str, str]:
        return {"check": self.check, "status": self.status.value, "detail": self.detail} | (
            {"hint": self.hint} if self.hint else {}
        )


@dataclass(frozen=True)
class Presented:
    """The webhook's TLS endpoint as the survey reached it (the Service's address)."""

    address: str
    leaf_der: bytes | None = None
    """The serving certificate the endpoint presented (None: no handshake at all)."""
    verified: bool = False
    """A handshake verifying against the configuration's caBundle and the Service's
    DNS name succeeded (what the API server does)."""
    error: str = ""


@dataclass(frozen=True)
class DryRun:
    """A server-side dry run of an executor pod a policy selects (None: refused)."""

    pod: Mapping[str, Any] | None
    error: str = ""
    status: int = 0


@dataclass(frozen=True)
class Answer:
    """A sidecar's /status through the API server's pod proxy."""

    body: bytes | None
    error: str = ""


@dataclass
class Survey:
    """Everything `hangwatch check` read from one cluster (`install_survey` fills it)."""

    namespace: str
    """Where the chart is installed."""
    server_version: str = ""
    crd: Mapping[str, Any] | None = None
    release: Mapping[str, Any] | None = None
    """The decoded Helm release (`decode_release`), None if none was found."""
    release_problem: str = ""
    deployment: Mapping[str, Any] | None = None
    webhook_configurations: list[Mapping[str, Any]] = field(default_factory=list)
    services: dict[str, Mapping[str, Any]] = field(default_factory=dict)
    """Services of the install namespace by name."""
    tls_secret: Mapping[str, Any] | None = None
    presented: Presented | None = None
    policies: list[Mapping[str, Any]] = field(default_factory=list)
    policies_problem: str = ""
    pods: dict[str, list[Mapping[str, Any]]] = field(default_factory=dict)
    """Spark pods (`spark-role` label) and opted-in producer pods of each policy namespace."""
    namespaces: dict[str, Mapping[str, Any]] = field(default_factory=dict)
    dry_runs: dict[str, DryRun] = field(default_factory=dict)
    """`<namespace>/<policy>` -> the dry run of an executor pod it selects."""
    answers: dict[str, Answer] = field(default_factory=dict)
    """`<namespace>/<pod>` -> its sidecar's answer."""
    crds_present: frozenset[str] = frozenset()
    """Names of the Prometheus Operator CRDs the API server serves."""
    monitoring_objects: dict[str, int] = field(default_factory=dict)
    """Per served Prometheus Operator CRD: how many objects labelled as hangwatch's exist."""
    secrets_present: dict[str, bool] = field(default_factory=dict)
    """`<namespace>/<name>` -> whether that Secret exists (pull secrets)."""
    service_accounts: dict[str, Mapping[str, Any]] = field(default_factory=dict)
    """`<namespace>/<name>` -> ServiceAccount (executors' pull secrets come from them too)."""
    now: float = 0.0


def worst(results: Iterable[Result]) -> Status:
    statuses = {r.status for r in results}
    for status in (Status.FAIL, Status.WARN):
        if status in statuses:
            return status
    return Status.PASS


def first_three(findings: list[str]) -> str:
    """The first three findings, `; `-joined, with ` ...` when there are more."""
    return "; ".join(findings[:3]) + (" ..." if len(findings) > 3 else "")


# ---------------------------------------------------------------- the operator


def operator_settings(deployment: Mapping[str, Any] | None) -> OperatorSettings:
    """What the webhook injects with (the sidecar image, its port) as the Deployment
    sets it; the defaults where it does not."""
    env = {
        e.get("name"): e.get("value")
        for c in pod_spec(deployment).get("containers") or []
        for e in c.get("env") or []
        if "value" in e
    }
    image = env.get(SIDECAR_IMAGE_ENV)
    port = str(env.get("HANGWATCH_OPERATOR_SIDECAR_PORT") or "")
    settings = OperatorSettings()
    return OperatorSettings(
        sidecar_image=str(image) if image else settings.sidecar_image,
        sidecar_port=int(port) if port.isdigit() and 0 < int(port) < 65536 else 9477,
    )


def pod_spec(deployment: Mapping[str, Any] | None) -> Mapping[str, Any]:
    """The pod template's spec of a Deployment (empty without one)."""
    return ((((deployment or {}).get("spec") or {}).get("template") or {}).get("spec")) or {}


# ------------------------------------------------------------------ the webhook


def our_webhook(survey: Survey) -> tuple[Mapping[str, Any], Mapping[str, Any]] | None:
    """(configuration, webhook entry) of the injection webhook, if configured."""
    for configuration in survey.webhook_configurations:
        for hook in configuration.get("webhooks") or []:
            if hook.get("name") == WEBHOOK_NAME:
                return configuration, hook
    return None


def ca_bundle(hook: Mapping[str, Any]) -> list[x509.Certificate]:
    """The CA certificates of a webhook's caBundle (`ValueError` if none)."""
    data = (hook.get("clientConfig") or {}).get("caBundle") or ""
    return x509.load_pem_x509_certificates(base64.b64decode(data))


def service_hostname(hook: Mapping[str, Any]) -> str:
    """The DNS name the API server verifies the webhook's certificate for."""
    service = (hook.get("clientConfig") or {}).get("service") or {}
    return f"{service.get('name')}.{service.get('namespace')}.svc"


# ------------------------------------------------------- policies, pods, sidecars


def parsed_policies(survey: Survey) -> list[tuple[Mapping[str, Any], Policy | str]]:
    """Each policy body with its parsed `Policy`, or why it is invalid."""
    out: list[tuple[Mapping[str, Any], Policy | str]] = []
    for body in survey.policies:
        try:
            out.append((body, parse_policy(body)))
        except InvalidPolicyError as exc:
            out.append((body, str(exc)))
    return out


def sidecar_of(pod: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The pod's injected sidecar container (native or legacy), None without one."""
    spec = pod.get("spec") or {}
    containers = [*(spec.get("initContainers") or []), *(spec.get("containers") or [])]
    return next((c for c in containers if c.get("name") == SIDECAR_CONTAINER), None)


def injected(pod: Mapping[str, Any]) -> bool:
    """Whether the pod carries hangwatch's sidecar."""
    return sidecar_of(pod) is not None


def selects(policy: Policy, pod: Mapping[str, Any]) -> bool:
    """Whether `policy` covers `pod` (its role and its selector)."""
    labels = (pod.get("metadata") or {}).get("labels") or {}
    return pod_role(labels) in {r.value for r in policy.roles} and (policy.selector.matches(labels))


def labels_for(policy: Policy) -> dict[str, str]:
    """Labels of a pod that `policy` selects (for the dry run): an executor's when the
    policy covers executors, else a driver's, else an opted-in producer pod's."""
    if Role.EXECUTOR in policy.roles or Role.DRIVER in policy.roles:
        role = Role.EXECUTOR if Role.EXECUTOR in policy.roles else Role.DRIVER
        labels = {SPARK_ROLE_LABEL: role.value, **policy.selector.match_labels}
    else:
        labels = {PRODUCER_LABEL: PRODUCER_LABEL_VALUE, **policy.selector.match_labels}
    for requirement in policy.selector.match_expressions:
        if requirement.operator == "In":
            labels[requirement.key] = requirement.values[0]
        elif requirement.operator == "Exists":
            labels.setdefault(requirement.key, "hangwatch-check")
        elif requirement.key != SPARK_ROLE_LABEL:  # NotIn, DoesNotExist: leave it out
            labels.pop(requirement.key, None)
    return labels


def _pull_secrets(survey: Survey, namespace: str, spec: Mapping[str, Any]) -> list[str]:
    names = [str(s.get("name")) for s in spec.get("imagePullSecrets") or []]
    account = (
        survey.service_accounts.get(f"{namespace}/{spec.get('serviceAccountName') or 'default'}")
        or {}
    )
    names += [str(s.get("name")) for s in account.get("imagePullSecrets") or []]
    return names


def pull_secret_names(survey: Survey) -> set[str]:
    """`<namespace>/<secret>` of every pull secret the injected pods and the operator
    name (the sidecar is pulled with its pod's secrets and ServiceAccount's)."""
    wanted = {
        f"{survey.namespace}/{n}"
        for n in _pull_secrets(survey, survey.namespace, pod_spec(survey.deployment))
    }
    for namespace, pods in survey.pods.items():
        for pod in pods:
            if injected(pod):
                wanted |= {
                    f"{namespace}/{n}"
                    for n in _pull_secrets(survey, namespace, pod.get("spec") or {})
                }
    return wanted
