"""`hangwatch check`'s judgement: what was read from a cluster in, one result per check out.

Fed by `install_survey` with a `Survey`: the objects the API server returned (the CRD,
the Helm release, the operator's Deployment, the webhook configuration, Service and
Secret, the policies, the Spark pods, the namespaces) and the outcome of each live
probe it made (a TLS handshake with the webhook, a server-side dry run of an executor
pod per policy, each injected pod's `/status` through the API server's pod proxy).
Each `check_*` function turns part of it into `Result`s; `run_checks` runs them all
in the order a reader follows (the API, the CRD, the operator, the webhook, each
policy, the sidecars, monitoring, images). Pure: no I/O.

How "the CRD at the chart's version" is told: the CRD file carries the label
`app.kubernetes.io/version` (the chart's appVersion, a test keeps them equal), and the
Helm release records the chart it installed, CRD file included. Helm installs `crds/`
once and never upgrades it, so after a `helm upgrade` the served CRD can be older than
the chart: the label says which release's CRD is served, and the served schema is
compared with the release's own copy field by field (which also catches a CRD edited
by hand or applied from another version).
"""

from __future__ import annotations

import base64
import datetime
import gzip
import json
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

import yaml
from cryptography import x509
from cryptography.exceptions import InvalidSignature

from hangwatch.pod_security import LOST, NOT_JUDGED_ENV, format_not_judged
from hangwatch_operator.injection import (
    INJECTED_ANNOTATION,
    MODE_ANNOTATION,
    POLICY_LABEL,
    SIDECAR_CONTAINER,
    features_left_out,
)
from hangwatch_operator.pod_security import (
    injection_violations,
    level_of,
    policy_needs,
)
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
    stale_after_seconds,
)
from hangwatch_operator.settings import OperatorSettings
from hangwatch_operator.sidecar_status import StatusFormatError, parse_status
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


# ----------------------------------------------------------------------- Helm release


def decode_release(data: str) -> dict[str, Any]:
    """A Helm release from its Secret's `release` value (base64 of base64 of gzipped JSON,
    or of plain JSON); `ValueError` names what is wrong."""
    try:
        raw = base64.b64decode(base64.b64decode(data, validate=True), validate=True)
        if raw[:2] == b"\x1f\x8b":
            raw = gzip.decompress(raw)
        release = json.loads(raw)
    except (ValueError, OSError, EOFError) as exc:
        raise ValueError(f"not a Helm release record: {exc}") from None
    if not isinstance(release, dict) or not isinstance(release.get("chart"), dict):
        raise ValueError("not a Helm release record: no chart")
    return release


def release_values(release: Mapping[str, Any]) -> dict[str, Any]:
    """The values the release was rendered with: the chart's defaults under the user's."""
    chart = release.get("chart") or {}
    return merge_values(chart.get("values") or {}, release.get("config") or {})


def merge_values(base: Mapping[str, Any], extra: Mapping[str, Any]) -> dict[str, Any]:
    """Helm's merge of values: `extra`'s keys over `base`'s, maps merged key by key."""
    out = dict(base)
    for key, value in extra.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = merge_values(out[key], value)
        else:
            out[key] = value
    return out


def release_crd(release: Mapping[str, Any]) -> dict[str, Any] | None:
    """The release's own copy of the ProducerHealthPolicy CRD (the chart's `crds/` file)."""
    for item in (release.get("chart") or {}).get("files") or []:
        if not str(item.get("name", "")).startswith("crds/"):
            continue
        try:
            text = base64.b64decode(item.get("data") or "").decode()
            docs = list(yaml.safe_load_all(text))
        except (ValueError, yaml.YAMLError):
            continue
        for doc in docs:
            if isinstance(doc, dict) and (doc.get("metadata") or {}).get("name") == CRD_NAME:
                return doc
    return None


def _chart_meta(release: Mapping[str, Any]) -> Mapping[str, Any]:
    return (release.get("chart") or {}).get("metadata") or {}


# ------------------------------------------------------------------------------ CRD


def schema_differences(served: Any, packaged: Any, path: str = "") -> list[str]:
    """Where the served schema differs from the packaged one (`path: served vs packaged`),
    ignoring descriptions."""
    if isinstance(served, Mapping) and isinstance(packaged, Mapping):
        out: list[str] = []
        for key in sorted(set(served) | set(packaged)):
            if key == "description":
                continue
            where = f"{path}.{key}" if path else key
            if key not in served:
                out.append(f"{where} missing")
            elif key not in packaged:
                out.append(f"{where} not in the chart's CRD")
            else:
                out += schema_differences(served[key], packaged[key], where)
        return out
    if isinstance(served, list) and isinstance(packaged, list) and len(served) == len(packaged):
        return [
            d
            for i, (a, b) in enumerate(zip(served, packaged, strict=True))
            for d in schema_differences(a, b, f"{path}[{i}]")
        ]
    return [] if served == packaged else [f"{path} differs"]


def _first_three(findings: list[str]) -> str:
    """The first three findings, `; `-joined, with ` ...` when there are more."""
    return "; ".join(findings[:3]) + (" ..." if len(findings) > 3 else "")


def _versions(crd: Mapping[str, Any]) -> dict[str, Any]:
    return {
        str(v.get("name")): {k: v.get(k) for k in ("served", "storage", "schema", "subresources")}
        for v in (crd.get("spec") or {}).get("versions") or []
    }


def check_crd(survey: Survey) -> Result:
    name = "crd"
    crd = survey.crd
    if crd is None:
        return Result(
            name,
            Status.FAIL,
            f"{CRD_NAME} is not served",
            "install the chart (its crds/ installs it) or kubectl apply -f crds/",
        )
    conditions = {
        c.get("type"): c.get("status") for c in (crd.get("status") or {}).get("conditions") or []
    }
    if conditions.get("Established") != "True":
        return Result(name, Status.FAIL, f"{CRD_NAME} is not Established", "kubectl describe crd")
    labelled = ((crd.get("metadata") or {}).get("labels") or {}).get(VERSION_LABEL)
    if survey.release is None:
        return Result(
            name,
            Status.WARN,
            f"{CRD_NAME} served (label {VERSION_LABEL}={labelled or 'absent'}); no Helm "
            "release to compare it with",
            f"install with Helm in namespace {survey.namespace}, or compare with crds/",
        )
    meta = _chart_meta(survey.release)
    wanted = str(meta.get("appVersion") or meta.get("version") or "")
    packaged = release_crd(survey.release)
    differences: list[str] = []
    if packaged is not None:
        served_v, packaged_v = _versions(crd), _versions(packaged)
        differences = schema_differences(served_v, packaged_v)
    hint = (
        "Helm installs crds/ once and never upgrades it: kubectl apply --server-side -f "
        "charts/hangwatch/crds/ of the installed chart version"
    )
    if labelled != wanted:
        return Result(
            name,
            Status.FAIL,
            f"{CRD_NAME} is labelled {VERSION_LABEL}={labelled or 'absent'}, the release "
            f"installed chart {meta.get('version')} (appVersion {wanted})",
            hint,
        )
    if differences:
        shown = _first_three(differences)
        return Result(
            name,
            Status.FAIL,
            f"{CRD_NAME} {wanted}: the served schema differs from the chart's ({shown})",
            hint,
        )
    compared = "schema equal to the chart's" if packaged is not None else "no CRD in the release"
    return Result(name, Status.PASS, f"{CRD_NAME} at {wanted} ({compared})")


def check_release(survey: Survey) -> Result:
    if survey.release is None:
        return Result(
            "helm-release",
            Status.WARN,
            survey.release_problem
            or f"no Helm release of chart {CHART_NAME} in {survey.namespace}",
            "pass --namespace of the install; without the release, monitoring is judged "
            "from the objects present",
        )
    meta, release = _chart_meta(survey.release), survey.release
    info = release.get("info") or {}
    state = str(info.get("status") or "?")
    detail = (
        f"release {release.get('name')} revision {release.get('version')}: chart "
        f"{meta.get('name')}-{meta.get('version')}, {state}"
    )
    if state != "deployed":
        return Result("helm-release", Status.FAIL, detail, f"helm history {release.get('name')}")
    return Result("helm-release", Status.PASS, detail)


# ------------------------------------------------------------------------- operator


def check_operator(survey: Survey) -> Result:
    deployment = survey.deployment
    if deployment is None:
        return Result(
            "operator",
            Status.FAIL,
            f"no operator Deployment ({OPERATOR_COMPONENT}) in {survey.namespace}",
            "helm install hangwatch charts/hangwatch -n NAMESPACE (README: Run it on a cluster)",
        )
    name = (deployment.get("metadata") or {}).get("name")
    wanted = int((deployment.get("spec") or {}).get("replicas", 1) or 0)
    ready = int((deployment.get("status") or {}).get("readyReplicas") or 0)
    detail = f"Deployment {name}: {ready}/{wanted} ready"
    hint = f"kubectl -n {survey.namespace} describe deployment {name}; kubectl logs"
    if ready == 0:
        return Result("operator", Status.FAIL, detail, hint)
    if ready < wanted:
        return Result("operator", Status.WARN, detail, hint)
    return Result("operator", Status.PASS, detail)


def operator_settings(deployment: Mapping[str, Any] | None) -> OperatorSettings:
    """What the webhook injects with (the sidecar image, its port) as the Deployment
    sets it; the defaults where it does not."""
    env = {
        e.get("name"): e.get("value")
        for c in _pod_spec(deployment).get("containers") or []
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


def _pod_spec(deployment: Mapping[str, Any] | None) -> Mapping[str, Any]:
    return ((((deployment or {}).get("spec") or {}).get("template") or {}).get("spec")) or {}


# -------------------------------------------------------------------------- webhook


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


def check_webhook_configuration(survey: Survey) -> Result:
    name = "webhook-configuration"
    found = our_webhook(survey)
    if found is None:
        return Result(
            name,
            Status.FAIL,
            f"no MutatingWebhookConfiguration has the webhook {WEBHOOK_NAME}",
            "the chart renders it; reinstall or check that nothing deleted it",
        )
    configuration, hook = found
    config_name = (configuration.get("metadata") or {}).get("name")
    service = (hook.get("clientConfig") or {}).get("service") or {}
    where = f"{service.get('namespace')}/{service.get('name')}:{service.get('port', 443)}"
    if service.get("namespace") != survey.namespace or service.get("name") not in survey.services:
        return Result(
            name,
            Status.FAIL,
            f"{config_name} calls Service {where}, which is not in {survey.namespace}",
            "pass --namespace of the install, or reinstall the chart",
        )
    ports = [
        p.get("port")
        for p in (survey.services[service["name"]].get("spec") or {}).get("ports") or []
    ]
    if service.get("port", 443) not in ports:
        return Result(
            name, Status.FAIL, f"{config_name} calls port {where}, the Service has {ports}"
        )
    try:
        cas = ca_bundle(hook)
    except ValueError as exc:
        return Result(
            name,
            Status.FAIL,
            f"{config_name}: caBundle holds no PEM certificate ({exc})",
            "the API server cannot verify the webhook: every executor runs without sidecar",
        )
    policy = hook.get("failurePolicy")
    return Result(
        name,
        Status.PASS,
        f"{config_name} -> {where}, failurePolicy {policy}, caBundle of {len(cas)} CA",
    )


def verify_chain(
    leaf: x509.Certificate,
    intermediates: Iterable[x509.Certificate],
    cas: Iterable[x509.Certificate],
    hostname: str,
    now: datetime.datetime,
) -> str:
    """Why `leaf` (with `intermediates`) would not verify against `cas` for `hostname`
    at `now`; empty when it would. Signatures, validity and the DNS name are checked;
    extensions only as far as the API server's Go verifier reads them."""
    problems = []
    for cert in (leaf, *intermediates):
        if not cert.not_valid_before_utc <= now <= cert.not_valid_after_utc:
            problems.append(
                f"{cert.subject.rfc4514_string()} valid {cert.not_valid_before_utc:%Y-%m-%d}"
                f"..{cert.not_valid_after_utc:%Y-%m-%d}"
            )
    try:
        names = leaf.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        dns = names.get_values_for_type(x509.DNSName)
    except x509.ExtensionNotFound:
        dns = []
    if hostname not in dns:
        problems.append(f"the certificate names {dns or 'no DNS name'}, not {hostname}")
    chain, pool, cas = [leaf], list(intermediates), list(cas)
    while True:
        issuer = next((c for c in cas if _signed_by(chain[-1], c)), None)
        if issuer is not None:
            break
        parent = next((c for c in pool if _signed_by(chain[-1], c)), None)
        if parent is None:
            held = ", ".join(c.subject.rfc4514_string() for c in cas) or "nothing"
            problems.append(
                f"issued by {chain[-1].issuer.rfc4514_string()}, not by a CA of the "
                f"caBundle ({held})"
            )
            break
        chain.append(parent)
        pool.remove(parent)
    return "; ".join(problems)


def _signed_by(cert: x509.Certificate, issuer: x509.Certificate) -> bool:
    try:
        cert.verify_directly_issued_by(issuer)
    except (ValueError, TypeError, InvalidSignature):
        return False
    return True


def service_hostname(hook: Mapping[str, Any]) -> str:
    """The DNS name the API server verifies the webhook's certificate for."""
    service = (hook.get("clientConfig") or {}).get("service") or {}
    return f"{service.get('name')}.{service.get('namespace')}.svc"


def check_webhook_certificate(survey: Survey) -> Result:
    name = "webhook-certificate"
    found = our_webhook(survey)
    try:
        cas = ca_bundle(found[1]) if found else []
    except ValueError:
        cas = []
    if found is None or not cas:
        return Result(name, Status.SKIP, "no webhook configuration with a caBundle to compare")
    hook = found[1]
    hostname = service_hostname(hook)
    now = datetime.datetime.fromtimestamp(survey.now, datetime.UTC)
    hint = (
        "the caBundle and the operator's certificate come from different issues: helm upgrade "
        "regenerates neither while the Secret exists; delete the Secret and upgrade, or fix "
        "the source (cert-manager's cainjector, webhook.existingSecret.caBundle)"
    )
    presented = survey.presented
    if presented is not None and presented.leaf_der is not None:
        leaf = x509.load_der_x509_certificate(presented.leaf_der)
        who = f"{leaf.subject.rfc4514_string()}, until {leaf.not_valid_after_utc:%Y-%m-%d}"
        if presented.verified:
            return Result(
                name,
                Status.PASS,
                f"the certificate the webhook presents at {presented.address} ({who}) "
                f"verifies against the caBundle for {hostname}",
            )
        why = verify_chain(leaf, [], cas, hostname, now) or presented.error
        return Result(
            name,
            Status.FAIL,
            f"the certificate the webhook presents at {presented.address} does not verify "
            f"against the caBundle: {why}",
            hint,
        )
    secret = survey.tls_secret
    if secret is None:
        reached = f" (not reachable here: {presented.error})" if presented else ""
        return Result(
            name,
            Status.WARN,
            f"neither the webhook{reached} nor its Secret could be read",
            "run from inside the cluster, or with permission to read Secrets in "
            f"{survey.namespace}",
        )
    data = secret.get("data") or {}
    try:
        chain = x509.load_pem_x509_certificates(base64.b64decode(data.get("tls.crt") or ""))
    except ValueError as exc:
        return Result(name, Status.FAIL, f"Secret tls.crt holds no certificate ({exc})", hint)
    why = verify_chain(chain[0], chain[1:], cas, hostname, now)
    source = f"Secret {(secret.get('metadata') or {}).get('name')} (the operator's)"
    unreached = f"; the webhook itself not reachable here: {presented.error}" if presented else ""
    if why:
        return Result(
            name,
            Status.FAIL,
            f"the serving certificate of {source} does not verify against the caBundle: {why}",
            hint,
        )
    return Result(
        name,
        Status.PASS,
        f"the serving certificate of {source} verifies against the caBundle for "
        f"{hostname}{unreached}",
    )


# ------------------------------------------------------------------------- policies


def parsed_policies(survey: Survey) -> list[tuple[Mapping[str, Any], Policy | str]]:
    """Each policy body with its parsed `Policy`, or why it is invalid."""
    out: list[tuple[Mapping[str, Any], Policy | str]] = []
    for body in survey.policies:
        try:
            out.append((body, parse_policy(body)))
        except InvalidPolicyError as exc:
            out.append((body, str(exc)))
    return out


def _key(body: Mapping[str, Any]) -> str:
    meta = body.get("metadata") or {}
    return f"{meta.get('namespace')}/{meta.get('name')}"


def _running(pods: Iterable[Mapping[str, Any]], roles: frozenset[Role]) -> list[Mapping[str, Any]]:
    """The running pods (not being deleted) whose role (`pod_role`) is one of `roles`."""
    wanted = {r.value for r in roles}
    return [
        p
        for p in pods
        if pod_role((p.get("metadata") or {}).get("labels") or {}) in wanted
        and (p.get("status") or {}).get("phase") == "Running"
        and not (p.get("metadata") or {}).get("deletionTimestamp")
    ]


def _kind(policy: Policy) -> str:
    """How lines name the pods `policy` covers: `executor`, `executor or producer`..."""
    return " or ".join(sorted(r.value for r in policy.roles))


def _sidecar(pod: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The pod's injected sidecar container (native or legacy), None without one."""
    spec = pod.get("spec") or {}
    containers = [*(spec.get("initContainers") or []), *(spec.get("containers") or [])]
    return next((c for c in containers if c.get("name") == SIDECAR_CONTAINER), None)


def _injected(pod: Mapping[str, Any]) -> bool:
    return _sidecar(pod) is not None


def selects(policy: Policy, pod: Mapping[str, Any]) -> bool:
    labels = (pod.get("metadata") or {}).get("labels") or {}
    return pod_role(labels) in {r.value for r in policy.roles} and (policy.selector.matches(labels))


def check_policies(survey: Survey) -> Iterator[Result]:
    if survey.policies_problem:
        yield Result("policies", Status.FAIL, survey.policies_problem, "kubectl get phpolicy -A")
        return
    if not survey.policies:
        yield Result(
            "policies",
            Status.WARN,
            "no ProducerHealthPolicy: nothing is injected or watched",
            "kubectl apply -f examples/policy-spark-executors.yaml (docs/operator-injection.md)",
        )
        return
    for body, policy in parsed_policies(survey):
        name = f"policy {_key(body)}"
        if isinstance(policy, str):
            yield Result(name, Status.FAIL, f"invalid: {policy}", "fix the field; kubectl edit")
            continue
        yield _policy_selection(survey, name, policy)
        dry = survey.dry_runs.get(f"{policy.namespace}/{policy.name}")
        if dry is not None:
            yield _dry_run_result(policy, dry)


def _policy_selection(survey: Survey, name: str, policy: Policy) -> Result:
    running = _running(survey.pods.get(policy.namespace, []), policy.roles)
    chosen = [p for p in running if selects(policy, p)]
    bare = [p for p in chosen if not _injected(p)]
    kind = _kind(policy)
    if not running:
        start = (
            "start a Spark job there"
            if Role.PRODUCER not in policy.roles
            else (
                f"start a Spark job or a producer whose pods carry {PRODUCER_LABEL}="
                f"{PRODUCER_LABEL_VALUE} there"
            )
        )
        return Result(
            name,
            Status.WARN,
            f"valid; no {kind} pod runs in {policy.namespace} now",
            f"{start}, then check again",
        )
    if not chosen:
        return Result(
            name,
            Status.FAIL,
            f"valid, but selects none of the {len(running)} running {kind} pods in "
            f"{policy.namespace}",
            "spec.selector must match the pods' labels (kubectl get pods --show-labels)",
        )
    if bare:
        names = ", ".join(str((p.get("metadata") or {}).get("name")) for p in bare[:3])
        return Result(
            name,
            Status.FAIL,
            f"selects {len(chosen)} running {kind} pods, {len(bare)} without the sidecar ({names})",
            "they started before the policy or the webhook was not called: see webhook-admission",
        )
    return Result(
        name, Status.PASS, f"valid, selects {len(chosen)} running {kind} pods, all injected"
    )


def _dry_run_result(policy: Policy, dry: DryRun) -> Result:
    name = f"webhook-admission {policy.namespace}/{policy.name}"
    if dry.pod is None:
        forbidden = "PodSecurity" in dry.error
        return Result(
            name,
            Status.FAIL,
            f"a dry-run executor pod was refused: {dry.error}",
            "see the pod-security line" if forbidden else "kubectl auth can-i create pods",
        )
    annotations = (dry.pod.get("metadata") or {}).get("annotations") or {}
    if not _injected(dry.pod):
        return Result(
            name,
            Status.FAIL,
            "a dry-run executor pod was admitted without the sidecar: the API server did not "
            "get a patch from the webhook (unreachable, TLS refused, or the operator has "
            "not read the policy)",
            "kubectl logs of the operator; kube-apiserver logs 'failed calling webhook'",
        )
    left_out = _sidecar_env(dry.pod).get(NOT_JUDGED_ENV)
    return Result(
        name,
        Status.PASS,
        f"the API server called the webhook: a dry-run executor pod got the sidecar "
        f"({annotations.get(MODE_ANNOTATION, '?')}, policy "
        f"{annotations.get(INJECTED_ANNOTATION, '?')}"
        f"{f'; left out for Pod Security: {left_out}' if left_out else ''})",
    )


def _sidecar_env(pod: Mapping[str, Any]) -> dict[str, str]:
    """The literal environment values of the pod's injected sidecar."""
    sidecar = _sidecar(pod) or {}
    return {
        str(e.get("name")): str(e["value"])
        for e in sidecar.get("env") or []
        if isinstance(e, Mapping) and "value" in e
    }


def check_pod_security(survey: Survey) -> Iterator[Result]:
    """Per policy namespace: the injected pod is admitted at the namespace's level (fail
    otherwise); a feature the webhook leaves out there, so that it is, is a warning."""
    settings = operator_settings(survey.deployment)
    by_namespace: dict[str, list[Policy]] = {}
    for _, policy in parsed_policies(survey):
        if isinstance(policy, Policy):
            by_namespace.setdefault(policy.namespace, []).append(policy)
    for namespace, policies in sorted(by_namespace.items()):
        labels = ((survey.namespaces.get(namespace) or {}).get("metadata") or {}).get(
            "labels"
        ) or {}
        level, told = level_of(labels)
        name = f"pod-security {namespace}"
        judged = [
            (p, left_out, injection_violations(p, settings, level, left_out))
            for p in policies
            for left_out in [features_left_out(p, level)]
        ]
        broken = [(p, v) for p, _, v in judged if v]
        if broken:
            policy, violations = broken[0]
            yield Result(
                name,
                Status.FAIL,
                f"enforces {level} ({told}); the sidecar injected for policy {policy.name} "
                f"breaks it: {'; '.join(violations)}",
                "report this: the webhook leaves out what a level forbids",
            )
            continue
        lost = [(p, f) for p, f, _ in judged if f]
        if lost:
            policy, features = lost[0]
            yield Result(
                name,
                Status.WARN,
                f"enforces {level} ({told}); policy {policy.name} asks for "
                f"{policy_needs(policy)}, which {level} forbids: the webhook leaves out "
                f"{format_not_judged(features)} and the pods are admitted without it "
                f"(not judged: {'; '.join(LOST[f] for f in features)})",
                "to keep it, run these executors in a namespace whose level allows it; "
                "else set spec.processView.enabled: false",
            )
            continue
        asked = sorted({policy_needs(p) for p in policies})
        yield Result(
            name, Status.PASS, f"enforces {level} ({told}); policies ask for {', '.join(asked)}"
        )


# ------------------------------------------------------------------------- sidecars


def check_sidecars(survey: Survey) -> Result:
    name = "sidecars"
    policies = {
        (p.namespace, p.name): p for _, p in parsed_policies(survey) if isinstance(p, Policy)
    }
    silent: list[str] = []
    answered = 0
    for key, answer in sorted(survey.answers.items()):
        namespace, pod = key.split("/", 1)
        pods = {
            str((p.get("metadata") or {}).get("name")): p for p in survey.pods.get(namespace, [])
        }
        labels = ((pods.get(pod) or {}).get("metadata") or {}).get("labels") or {}
        policy = policies.get((namespace, str(labels.get(POLICY_LABEL))))
        stale = stale_after_seconds(policy) if policy else 60.0
        problem = answer.error
        if answer.body is not None:
            try:
                parse_status(answer.body, now=survey.now, stale_after_seconds=stale)
            except StatusFormatError as exc:
                problem = f"unusable /status: {exc}"
        if problem:
            silent.append(f"{key}: {problem}")
        else:
            answered += 1
    if not survey.answers:
        return Result(name, Status.SKIP, "no running injected pod to ask")
    if silent:
        shown = _first_three(silent)
        return Result(
            name,
            Status.FAIL,
            f"{len(silent)} of {len(survey.answers)} sidecars do not answer /status: {shown}",
            "kubectl logs POD -c hangwatch-sidecar; the operator cannot judge these pods",
        )
    return Result(name, Status.PASS, f"{answered} sidecars answer /status")


# ----------------------------------------------------------------------- monitoring


def check_monitoring(survey: Survey) -> Result:
    name = "monitoring"
    present = {crd: n for crd, n in survey.monitoring_objects.items() if crd in survey.crds_present}
    found = ", ".join(f"{n} {crd.split('.', 1)[0]}" for crd, n in sorted(present.items()) if n)
    if survey.release is None:
        if found:
            return Result(name, Status.PASS, f"no Helm release; hangwatch's {found} present")
        return Result(
            name,
            Status.WARN,
            "no Helm release to tell whether the chart's monitoring is on, and no hangwatch "
            "PodMonitor, ServiceMonitor or PrometheusRule is present",
            "pass --namespace of the install",
        )
    monitoring = release_values(survey.release).get("monitoring") or {}
    enabled = {
        k: crd for k, crd in MONITORING_CRDS.items() if (monitoring.get(k) or {}).get("enabled")
    }
    if not enabled:
        return Result(name, Status.PASS, "the chart's Prometheus Operator objects are off")
    keys = f"monitoring.{', monitoring.'.join(sorted(enabled))}"
    missing = sorted({crd for crd in enabled.values() if crd not in survey.crds_present})
    if missing:
        return Result(
            name,
            Status.FAIL,
            f"{keys} on, but the API server does not serve {', '.join(missing)}: nothing "
            "scrapes hangwatch",
            "install the Prometheus Operator (its CRDs), then helm upgrade; or turn these off",
        )
    absent = sorted({crd for crd in enabled.values() if not present.get(crd)})
    if absent:
        return Result(
            name,
            Status.FAIL,
            f"{keys} on, CRDs served, but no hangwatch object of "
            f"{', '.join(a.split('.', 1)[0] for a in absent)} (deleted with a CRD?)",
            "helm upgrade (same values) renders them again",
        )
    return Result(name, Status.PASS, f"{keys} on, CRDs served, {found} present")


# --------------------------------------------------------------------------- images


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
        for n in _pull_secrets(survey, survey.namespace, _pod_spec(survey.deployment))
    }
    for namespace, pods in survey.pods.items():
        for pod in pods:
            if _injected(pod):
                wanted |= {
                    f"{namespace}/{n}"
                    for n in _pull_secrets(survey, namespace, pod.get("spec") or {})
                }
    return wanted


def check_images(survey: Survey) -> Result:
    name = "sidecar-image"
    image = operator_settings(survey.deployment).sidecar_image
    images = {image} | {
        p.sidecar.image
        for _, p in parsed_policies(survey)
        if isinstance(p, Policy) and p.sidecar.image
    }
    failing = []
    for namespace, pods in sorted(survey.pods.items()):
        for pod in pods:
            status = pod.get("status") or {}
            for state in [
                *(status.get("initContainerStatuses") or []),
                *(status.get("containerStatuses") or []),
            ]:
                waiting = (state.get("state") or {}).get("waiting") or {}
                if state.get("name") == SIDECAR_CONTAINER and waiting.get("reason") in PULL_ERRORS:
                    failing.append(
                        f"{namespace}/{(pod.get('metadata') or {}).get('name')}: "
                        f"{waiting.get('reason')} {str(waiting.get('message', ''))[:120]}"
                    )
    missing = sorted(k for k in pull_secret_names(survey) if not survey.secrets_present.get(k))
    if failing or missing:
        parts = []
        if failing:
            parts.append(f"sidecars cannot pull: {'; '.join(failing[:2])}")
        if missing:
            parts.append(f"pull secrets named but absent: {', '.join(missing)}")
        return Result(
            name,
            Status.FAIL,
            "; ".join(parts),
            "create the pull secret in each pod namespace (the sidecar is pulled with the "
            "executor pod's imagePullSecrets) or mirror the image",
        )
    named = len(pull_secret_names(survey))
    how = f"{named} pull secrets named, all present" if named else "no pull secret named"
    return Result(name, Status.PASS, f"{', '.join(sorted(images))}: {how}, no pull error")


# -------------------------------------------------------------------------------- all


def run_checks(survey: Survey) -> list[Result]:
    """Every check, in the order of the report."""
    results = [
        Result("kubernetes-api", Status.PASS, f"reachable, {survey.server_version}"),
        check_release(survey),
        check_crd(survey),
        check_operator(survey),
        check_webhook_configuration(survey),
        check_webhook_certificate(survey),
        *check_policies(survey),
        *check_pod_security(survey),
        check_sidecars(survey),
        check_monitoring(survey),
        check_images(survey),
    ]
    return results


def worst(results: Iterable[Result]) -> Status:
    statuses = {r.status for r in results}
    for status in (Status.FAIL, Status.WARN):
        if status in statuses:
            return status
    return Status.PASS


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
