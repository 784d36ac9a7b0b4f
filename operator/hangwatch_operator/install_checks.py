"""`hangwatch check`'s judgement: what was read from a cluster in, one result per check out.

Fed by `install_survey` with a `Survey`: the objects the API server returned (the CRD,
the Helm release, the operator's Deployment, the webhook configuration, Service and
Secret, the policies, the Spark pods, the namespaces) and the outcome of each live
probe it made (a TLS handshake with the webhook, a server-side dry run of an executor
pod per policy, each injected pod's `/status` through the API server's pod proxy).
Each `check_*` function turns part of it into `Result`s; `run_checks` runs them all
in the order a reader follows (the API, the CRD, the operator, the webhook, each
policy, the sidecars, monitoring, images). The checks of what the install is made of
are here; those of each policy and its pods are `policy_checks`; the survey's model
`install_model`, the Helm record `helm_release`, the certificate chain
`certificate_chain`. Pure: no I/O.

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
from collections.abc import Mapping
from typing import Any

from cryptography import x509

from hangwatch_operator.certificate_chain import verify_chain
from hangwatch_operator.helm_release import chart_meta, release_crd, release_values
from hangwatch_operator.injection import SIDECAR_CONTAINER
from hangwatch_operator.install_model import (
    CHART_NAME,
    CRD_NAME,
    MONITORING_CRDS,
    OPERATOR_COMPONENT,
    PULL_ERRORS,
    VERSION_LABEL,
    Result,
    Status,
    Survey,
    ca_bundle,
    first_three,
    operator_settings,
    our_webhook,
    parsed_policies,
    pull_secret_names,
    service_hostname,
)
from hangwatch_operator.policies import Policy
from hangwatch_operator.policy_checks import (
    check_client_releases,
    check_pod_security,
    check_policies,
    check_sidecars,
)
from hangwatch_operator.webhook_configuration import WEBHOOK_NAME

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
    meta = chart_meta(survey.release)
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
        shown = first_three(differences)
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
    meta, release = chart_meta(survey.release), survey.release
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
            "helm install hangwatch oci://REGISTRY/charts/hangwatch -n NAMESPACE (README: Install)",
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


# -------------------------------------------------------------------------- webhook


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
        check_client_releases(survey),
        check_monitoring(survey),
        check_images(survey),
    ]
    return results
