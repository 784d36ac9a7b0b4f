"""`hangwatch check`'s pure judgement (`install_checks`, `policy_checks`, `pod_security`,
`certificate_chain`), one check at a time.

Covers, each with a good and a broken survey: the CRD (absent, labelled with another
version than the release's chart, a schema that differs from the release's own copy);
the Helm release record (decoded from its Secret's value, garbage refused with
ValueError only); the operator Deployment's readiness; the webhook configuration and its
caBundle against the serving certificate (presented or from the Secret: another CA,
another DNS name, expired; a chain through an intermediate, a leaf for clients only, an
intermediate that is no CA, an expired root); each policy (invalid, no executor running,
none selected, selected but not injected, and the dry run's outcome); the Pod Security
level against what a policy asks (the rule itself at every level, and per namespace);
the sidecars' /status answers; the monitoring CRDs the chart's values need; pull secrets
and pull errors. Properties: any namespace labels give a level; any policy body and any
pod labels give results, never an exception; any Secret value decodes or is refused.
"""

from __future__ import annotations

import base64
import copy
import datetime
import gzip
import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from hangwatch.wire import status
from hangwatch_operator import policy_checks
from hangwatch_operator.certificate_chain import verify_chain
from hangwatch_operator.certificates import generate_webhook_certificates
from hangwatch_operator.helm_release import decode_release
from hangwatch_operator.injection import features_left_out
from hangwatch_operator.install_checks import (
    check_crd,
    check_images,
    check_monitoring,
    check_operator,
    check_webhook_certificate,
    check_webhook_configuration,
    run_checks,
)
from hangwatch_operator.install_model import (
    VERSION_LABEL,
    Answer,
    DryRun,
    Presented,
    Status,
    Survey,
    labels_for,
)
from hangwatch_operator.pod_security import (
    ENFORCE_LABEL,
    Level,
    container_violations,
    injection_violations,
    level_of,
)
from hangwatch_operator.policies import parse_policy
from hangwatch_operator.policy_checks import (
    check_client_releases,
    check_pod_security,
    check_policies,
    check_sidecars,
)
from hangwatch_operator.settings import OperatorSettings
from hangwatch_operator.webhook_configuration import build_webhook_configuration

ROOT = Path(__file__).resolve().parents[2]
NS = "hangwatch-system"
JOBS = "spark-jobs"
NOW = datetime.datetime.now(datetime.UTC).timestamp()
CRD = yaml.safe_load((ROOT / "crds" / "producerhealthpolicy.yaml").read_text())
CHART = yaml.safe_load((ROOT / "charts" / "hangwatch" / "Chart.yaml").read_text())
SERVICE = "hangwatch-operator"
HOST = f"{SERVICE}.{NS}.svc"
CERTS = generate_webhook_certificates([HOST])


def policy_body(name: str = "writers", **spec: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": JOBS},
        "spec": {
            "selector": {"matchLabels": {"team": "payments"}},
            "kafka": {"bootstrapServers": ["kafka-0:9092"]},
            **spec,
        },
    }


def executor(
    name: str,
    *,
    injected: bool = True,
    phase: str = "Running",
    labels: dict[str, str] | None = None,
) -> Any:
    containers = [{"name": "spark-kubernetes-executor"}]
    init = [{"name": "hangwatch-sidecar", "ports": [{"name": "hangwatch"}]}] if injected else []
    pod_labels = {"spark-role": "executor", "team": "payments", **(labels or {})}
    if injected:
        pod_labels["hangwatch.dev/policy"] = "writers"
    return {
        "metadata": {"name": name, "namespace": JOBS, "labels": pod_labels},
        "spec": {"containers": containers, "initContainers": init},
        "status": {"phase": phase},
    }


def release(version: str = "0.1.0", **values: Any) -> dict[str, Any]:
    crd_file = (ROOT / "charts" / "hangwatch" / "crds" / "producerhealthpolicy.yaml").read_bytes()
    return {
        "name": "hangwatch",
        "version": 1,
        "info": {"status": "deployed"},
        "chart": {
            "metadata": {"name": "hangwatch", "version": version, "appVersion": version},
            "values": {"monitoring": {"sidecarPodMonitor": {"enabled": False}}},
            "files": [
                {
                    "name": "crds/producerhealthpolicy.yaml",
                    "data": base64.b64encode(crd_file).decode(),
                }
            ],
        },
        "config": values,
    }


def served_crd() -> dict[str, Any]:
    crd: dict[str, Any] = copy.deepcopy(CRD)
    crd["status"] = {"conditions": [{"type": "Established", "status": "True"}]}
    return crd


def good_survey() -> Survey:
    configuration = build_webhook_configuration(
        OperatorSettings(operator_namespace=NS), ca_bundle=CERTS.ca_pem, service_name=SERVICE
    )
    return Survey(
        namespace=NS,
        server_version="v1.37.2",
        crd=served_crd(),
        release=release(),
        deployment={
            "metadata": {"name": "hangwatch-operator"},
            "spec": {"replicas": 2},
            "status": {"readyReplicas": 2},
        },
        webhook_configurations=[configuration],
        services={SERVICE: {"spec": {"clusterIP": "10.0.0.1", "ports": [{"port": 443}]}}},
        tls_secret={
            "metadata": {"name": "hangwatch-webhook-tls"},
            "data": {"tls.crt": base64.b64encode(CERTS.cert_pem).decode()},
        },
        policies=[policy_body(processView={"enabled": False})],
        pods={JOBS: [executor("exec-1"), executor("exec-2")]},
        namespaces={JOBS: {"metadata": {"labels": {ENFORCE_LABEL: "restricted"}}}},
        answers={f"{JOBS}/exec-1": Answer(_status_body(NOW - 1))},
        now=NOW,
    )


def _status_body(evaluated: float, advisories: tuple[status.Advisory, ...] = ()) -> bytes:
    doc = status.StatusDocument(
        verdict="healthy",
        sidecar=status.SidecarInfo(evaluated_ts=evaluated),
        advisories=list(advisories),
    )
    return status.encode(doc)


def by_status(results: Any) -> list[Status]:
    return [r.status for r in results]


def test_a_good_install_passes_every_check() -> None:
    results = run_checks(good_survey())
    failed = [r for r in results if r.status is not Status.PASS]
    assert not failed, failed
    names = [r.check for r in results]
    assert names[:6] == [
        "kubernetes-api",
        "helm-release",
        "crd",
        "operator",
        "webhook-configuration",
        "webhook-certificate",
    ]
    assert f"pod-security {JOBS}" in names and "sidecars" in names


def test_the_crd_file_is_labelled_with_the_charts_app_version() -> None:
    assert CRD["metadata"]["labels"][VERSION_LABEL] == CHART["appVersion"]


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (lambda s: setattr(s, "crd", None), "is not served"),
        (lambda s: s.crd["status"].update(conditions=[]), "not Established"),
        (lambda s: s.crd["metadata"]["labels"].update({VERSION_LABEL: "0.0.9"}), "0.0.9"),
        (lambda s: setattr(s, "release", release("0.2.0")), "chart 0.2.0"),
        (
            lambda s: s.crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"][
                "spec"
            ]["properties"].pop("processView"),
            "processView missing",
        ),
    ],
)
def test_the_crd_fails_when_absent_or_not_the_charts(change: Any, expected: str) -> None:
    survey = good_survey()
    change(survey)
    result = check_crd(survey)
    assert result.status is Status.FAIL, result
    assert expected in result.detail
    assert result.hint


def test_without_a_release_the_crd_is_a_warning() -> None:
    survey = good_survey()
    survey.release = None
    assert check_crd(survey).status is Status.WARN


def test_a_release_record_decodes_from_its_secret_value() -> None:
    record = release()
    value = base64.b64encode(base64.b64encode(gzip.compress(json.dumps(record).encode()))).decode()
    assert decode_release(value) == record


@given(st.text(max_size=200) | st.binary(max_size=200).map(lambda b: base64.b64encode(b).decode()))
def test_any_secret_value_decodes_or_is_refused_with_value_error(value: str) -> None:
    try:
        decoded = decode_release(value)
    except ValueError:
        return
    assert isinstance(decoded["chart"], dict)


@pytest.mark.parametrize(
    ("deployment", "expected"),
    [
        (None, Status.FAIL),
        ({"metadata": {"name": "op"}, "spec": {"replicas": 2}, "status": {}}, Status.FAIL),
        (
            {"metadata": {"name": "op"}, "spec": {"replicas": 2}, "status": {"readyReplicas": 1}},
            Status.WARN,
        ),
    ],
)
def test_the_operator_must_be_ready(deployment: Any, expected: Status) -> None:
    survey = good_survey()
    survey.deployment = deployment
    assert check_operator(survey).status is expected


def test_a_webhook_configuration_pointing_elsewhere_or_without_ca_fails() -> None:
    survey = good_survey()
    survey.services = {}
    assert check_webhook_configuration(survey).status is Status.FAIL
    survey = good_survey()
    hook = survey.webhook_configurations[0]["webhooks"][0]
    hook["clientConfig"]["caBundle"] = base64.b64encode(b"not a certificate").decode()
    assert check_webhook_configuration(survey).status is Status.FAIL
    survey.webhook_configurations = []
    assert "no MutatingWebhookConfiguration" in check_webhook_configuration(survey).detail


def test_a_serving_certificate_of_another_ca_fails_naming_both() -> None:
    other = generate_webhook_certificates([HOST])
    survey = good_survey()
    survey.tls_secret = {
        "metadata": {"name": "s"},
        "data": {"tls.crt": base64.b64encode(other.cert_pem).decode()},
    }
    result = check_webhook_certificate(survey)
    assert result.status is Status.FAIL
    assert "not by a CA of the caBundle" in result.detail


def test_the_presented_certificate_decides_when_the_webhook_was_reached() -> None:
    from cryptography import x509
    from cryptography.hazmat.primitives.serialization import Encoding

    other = generate_webhook_certificates([HOST])
    der = x509.load_pem_x509_certificate(other.cert_pem).public_bytes(Encoding.DER)
    survey = good_survey()
    survey.presented = Presented("10.0.0.1:443", der, verified=False, error="verify failed")
    result = check_webhook_certificate(survey)
    assert result.status is Status.FAIL and "presents at 10.0.0.1:443" in result.detail
    survey.presented = Presented("10.0.0.1:443", der, verified=True)
    assert check_webhook_certificate(survey).status is Status.PASS


def test_a_certificate_for_another_name_or_expired_does_not_verify() -> None:
    from cryptography import x509

    leaf = x509.load_pem_x509_certificate(CERTS.cert_pem)
    cas = [x509.load_pem_x509_certificate(CERTS.ca_pem)]
    now = datetime.datetime.now(datetime.UTC)
    assert verify_chain(leaf, [], cas, HOST, now) == ""
    assert "not other.svc" in verify_chain(leaf, [], cas, "other.svc", now)
    later = now + datetime.timedelta(days=4000)
    assert "valid" in verify_chain(leaf, [], cas, HOST, later)


def _issued(
    subject: str,
    issuer: tuple[str, Any] | None = None,
    *,
    ca: bool = False,
    usages: list[Any] | None = None,
    days: int = 30,
) -> tuple[Any, Any]:
    """A certificate for `subject` (a CA with `ca`, else a leaf for HOST with the
    extendedKeyUsage `usages`, none if None) signed by `issuer` (name, key), or by itself."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    signer_name, signer_key = issuer or (subject, key)
    start = datetime.datetime.now(datetime.UTC) - datetime.timedelta(hours=1)
    builder = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)]))
        .issuer_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, signer_name)]))
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(start)
        .not_valid_after(start + datetime.timedelta(days=days))
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
    )
    if not ca:
        builder = builder.add_extension(
            x509.SubjectAlternativeName([x509.DNSName(HOST)]), critical=False
        )
    if usages is not None:
        builder = builder.add_extension(x509.ExtendedKeyUsage(usages), critical=False)
    return builder.sign(signer_key, hashes.SHA256()), key


def test_the_chain_is_judged_as_the_api_server_does() -> None:
    """Through an intermediate CA, with or without an extendedKeyUsage, the serving
    certificate verifies; without the intermediate, under another root, for clients
    only, below a certificate that is no CA, or under a root that has expired it does
    not, each named."""
    from cryptography.x509.oid import ExtendedKeyUsageOID

    now = datetime.datetime.now(datetime.UTC)
    root, root_key = _issued("root", ca=True)
    middle, middle_key = _issued("middle", ("root", root_key), ca=True)
    for usages in (None, [ExtendedKeyUsageOID.SERVER_AUTH]):
        leaf, _ = _issued(HOST, ("middle", middle_key), usages=usages)
        assert verify_chain(leaf, [middle], [root], HOST, now) == ""
        assert "not by a CA of the caBundle" in verify_chain(leaf, [], [root], HOST, now)
    client_only, _ = _issued(HOST, ("middle", middle_key), usages=[ExtendedKeyUsageOID.CLIENT_AUTH])
    assert "server authentication" in verify_chain(client_only, [middle], [root], HOST, now)
    other, _ = _issued("other", ca=True)
    assert "by CN=root, not by a CA of the caBundle (CN=other)" in verify_chain(
        client_only, [middle], [other], HOST, now
    )
    not_a_ca, not_a_ca_key = _issued("not-a-ca", ("root", root_key))
    below, _ = _issued(HOST, ("not-a-ca", not_a_ca_key))
    assert "is refused: " in verify_chain(below, [not_a_ca], [root], HOST, now)
    short_root, short_key = _issued("short", ca=True, days=2)
    leaf, _ = _issued(HOST, ("short", short_key))
    later = now + datetime.timedelta(days=10)
    assert "CN=short valid" in verify_chain(leaf, [], [short_root], HOST, later)


def test_policies_invalid_idle_unselecting_and_uninjected() -> None:
    survey = good_survey()
    survey.policies = [policy_body(detection={"stallSeconds": 1})]
    [result] = check_policies(survey)
    assert result.status is Status.FAIL and "invalid" in result.detail

    survey = good_survey()
    survey.pods = {JOBS: [executor("e", phase="Pending")]}
    assert by_status(check_policies(survey))[0] is Status.WARN

    survey = good_survey()
    survey.pods = {JOBS: [executor("e", labels={"team": "other"})]}
    result = next(iter(check_policies(survey)))
    assert result.status is Status.FAIL and "selects none of the 1" in result.detail

    survey = good_survey()
    survey.pods = {JOBS: [executor("e"), executor("bare", injected=False)]}
    result = next(iter(check_policies(survey)))
    assert result.status is Status.FAIL and "1 without the sidecar (bare)" in result.detail


def _producer(name: str, *, injected: bool = True) -> Any:
    """A pod of a producer service that opted in (no `spark-role`)."""
    pod = executor(name, injected=injected, labels={"hangwatch.dev/producer": "true"})
    del pod["metadata"]["labels"]["spark-role"]
    return pod


def test_a_producer_policy_is_checked_against_the_opted_in_producer_pods() -> None:
    """A policy with `roles: [producer]` counts the pods that opted in, not executors;
    an executor policy never counts a producer pod."""
    survey = good_survey()
    survey.policies = [policy_body(roles=["producer"])]
    survey.pods = {JOBS: [executor("e"), _producer("svc-1"), _producer("svc-2")]}
    result = next(iter(check_policies(survey)))
    assert result.status is Status.PASS, result
    assert result.detail == "valid, selects 2 running producer pods, all injected"

    survey.pods = {JOBS: [executor("e"), _producer("svc-1", injected=False)]}
    result = next(iter(check_policies(survey)))
    assert result.status is Status.FAIL and "1 without the sidecar (svc-1)" in result.detail

    survey.pods = {JOBS: [executor("e")]}
    result = next(iter(check_policies(survey)))
    assert result.status is Status.WARN and "no producer pod runs" in result.detail
    assert "hangwatch.dev/producer=true" in result.hint

    survey = good_survey()  # the executor policy
    survey.pods = {JOBS: [_producer("svc-1", injected=False)]}
    result = next(iter(check_policies(survey)))
    assert result.status is Status.WARN and "no executor pod runs" in result.detail


def test_the_dry_run_shows_whether_the_api_server_got_the_patch() -> None:
    survey = good_survey()
    injected = executor("dry")
    injected["metadata"]["annotations"] = {"hangwatch.dev/injection-mode": "native"}
    survey.dry_runs = {f"{JOBS}/writers": DryRun(injected)}
    assert by_status(check_policies(survey)) == [Status.PASS, Status.PASS]
    survey.dry_runs = {f"{JOBS}/writers": DryRun(executor("dry", injected=False))}
    assert by_status(check_policies(survey))[1] is Status.FAIL
    refused = DryRun(None, 'pods "x" is forbidden: violates PodSecurity "restricted:latest"', 403)
    survey.dry_runs = {f"{JOBS}/writers": refused}
    result = list(check_policies(survey))[1]
    assert result.status is Status.FAIL and "pod-security" in result.hint
    left_out = executor("dry")
    left_out["spec"]["initContainers"][0]["env"] = [
        {"name": "HANGWATCH_NOT_JUDGED", "value": "process_view"},
        {"name": "HANGWATCH_POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "x"}}},
    ]
    survey.dry_runs = {f"{JOBS}/writers": DryRun(left_out)}
    result = list(check_policies(survey))[1]
    assert result.status is Status.PASS, result
    assert "left out for Pod Security: process_view" in result.detail


def test_labels_for_a_dry_run_satisfy_the_selector() -> None:
    policy = parse_policy(
        policy_body(
            selector={
                "matchLabels": {"team": "payments"},
                "matchExpressions": [
                    {"key": "tier", "operator": "In", "values": ["gold", "silver"]},
                    {"key": "app", "operator": "Exists"},
                    {"key": "canary", "operator": "DoesNotExist"},
                ],
            }
        )
    )
    labels = labels_for(policy)
    assert policy.selector.matches(labels)
    assert labels["spark-role"] == "executor"


def _policy(process_view: bool) -> Any:
    return parse_policy(policy_body(processView={"enabled": process_view}))


def test_what_a_policy_asks_against_each_level() -> None:
    settings = OperatorSettings()
    with_view, without = _policy(True), _policy(False)
    assert injection_violations(with_view, settings, Level.PRIVILEGED) == []
    baseline = injection_violations(with_view, settings, Level.BASELINE)
    assert len(baseline) == 1 and "SYS_PTRACE" in baseline[0]
    restricted = " ".join(injection_violations(with_view, settings, Level.RESTRICTED))
    assert "SYS_PTRACE" in restricted and "allowPrivilegeEscalation" in restricted
    for level in Level:
        assert injection_violations(without, settings, level) == []


@pytest.mark.parametrize(
    ("security", "level", "words"),
    [
        ({"privileged": True}, Level.BASELINE, "privileged"),
        ({"capabilities": {"add": ["NET_ADMIN"]}}, Level.BASELINE, "NET_ADMIN"),
        ({"seccompProfile": {"type": "Unconfined"}}, Level.BASELINE, "Unconfined"),
        ({"runAsUser": 0, "runAsNonRoot": True}, Level.RESTRICTED, "runAsUser=0"),
        ({"allowPrivilegeEscalation": False}, Level.RESTRICTED, "runAsNonRoot"),
    ],
)
def test_container_rules_of_the_standards(security: Any, level: Level, words: str) -> None:
    problems = container_violations({"name": "c", "securityContext": security}, level)
    assert any(words in p for p in problems), problems


def test_a_namespace_whose_level_forbids_the_process_view_warns_it_is_left_out() -> None:
    """The webhook leaves out what the level forbids (the pods are admitted), so the
    check warns that the view is lost there rather than failing the install."""
    survey = good_survey()
    survey.policies = [policy_body(processView={"enabled": True})]
    for level, expected in (
        ("privileged", Status.PASS),
        ("baseline", Status.WARN),
        ("restricted", Status.WARN),
        ("nonsense", Status.WARN),
    ):
        survey.namespaces = {JOBS: {"metadata": {"labels": {ENFORCE_LABEL: level}}}}
        [result] = check_pod_security(survey)
        assert result.status is expected, result
        if expected is Status.WARN:
            assert "leaves out process_view" in result.detail, result
            assert "processView" in result.hint


def test_what_is_left_out_is_admitted_at_every_level() -> None:
    settings = OperatorSettings()
    for view in (True, False):
        policy = _policy(view)
        for level in Level:
            left_out = features_left_out(policy, level)
            assert injection_violations(policy, settings, level, left_out) == []
            assert bool(left_out) == (view and level is not Level.PRIVILEGED)


def test_a_sidecar_that_breaks_the_level_after_all_fails(monkeypatch: Any) -> None:
    """Should the injected sidecar still break the level (a rule out of step with the
    webhook's), the check fails and says so."""
    survey = good_survey()
    survey.namespaces = {JOBS: {"metadata": {"labels": {ENFORCE_LABEL: "baseline"}}}}
    monkeypatch.setattr(
        policy_checks, "injection_violations", lambda *a: ["privileged (container x)"]
    )
    [result] = check_pod_security(survey)
    assert result.status is Status.FAIL and "privileged" in result.detail


@given(st.dictionaries(st.text(max_size=60), st.text(max_size=30), max_size=5))
def test_any_namespace_labels_give_a_level(labels: dict[str, str]) -> None:
    level, told = level_of(labels)
    assert isinstance(level, Level) and told
    if ENFORCE_LABEL not in labels:
        assert level is Level.PRIVILEGED


def test_sidecars_that_do_not_answer_or_answer_stale_fail() -> None:
    survey = good_survey()
    survey.answers[f"{JOBS}/exec-2"] = Answer(None, "HTTP 503 no endpoints")
    result = check_sidecars(survey)
    assert result.status is Status.FAIL and "1 of 2" in result.detail
    survey.answers = {f"{JOBS}/exec-1": Answer(_status_body(NOW - 3600))}
    assert "old" in check_sidecars(survey).detail
    survey.answers = {}
    assert check_sidecars(survey).status is Status.SKIP


def test_client_releases_with_a_published_hang_are_a_warning_naming_pods_and_fix() -> None:
    """What the sidecars said in /status `advisories`: advice (warn), never a failure."""
    survey = good_survey()
    assert check_client_releases(survey).status is Status.PASS
    hang = status.Advisory(
        client="sarama",
        version="v1.37.2",
        hang="sarama#2377",
        report="https://github.com/IBM/sarama/issues/2377",
        fixed="1.38.0",
        what="an idempotent producer's batch is never answered after an election",
        seen_in=["process 7 (Go build information)"],
    )
    for pod in ("exec-1", "exec-2"):
        survey.answers[f"{JOBS}/{pod}"] = Answer(_status_body(NOW, (hang,)))
    result = check_client_releases(survey)
    assert result.status is Status.WARN, result
    assert "sarama v1.37.2 has a published hang: sarama#2377" in result.detail
    assert "fixed in 1.38.0" in result.detail and hang.report in result.detail
    assert f"{JOBS}/exec-1, {JOBS}/exec-2" in result.detail
    assert "nothing is restarted" in result.hint
    assert Status.FAIL not in by_status(run_checks(survey))
    survey.answers = {}
    assert check_client_releases(survey).status is Status.SKIP


def test_monitoring_on_without_the_prometheus_operator_crds_fails() -> None:
    survey = good_survey()
    survey.release = release(
        monitoring={"sidecarPodMonitor": {"enabled": True}, "prometheusRule": {"enabled": True}}
    )
    result = check_monitoring(survey)
    assert result.status is Status.FAIL
    assert "podmonitors.monitoring.coreos.com" in result.detail
    served = {"podmonitors.monitoring.coreos.com", "prometheusrules.monitoring.coreos.com"}
    survey.crds_present = frozenset(served)
    survey.monitoring_objects = {"podmonitors.monitoring.coreos.com": 1}
    result = check_monitoring(survey)
    assert (
        result.status is Status.FAIL and "no hangwatch object of prometheusrules" in result.detail
    )
    survey.monitoring_objects["prometheusrules.monitoring.coreos.com"] = 1
    assert check_monitoring(survey).status is Status.PASS
    survey.release = None
    assert check_monitoring(survey).status is Status.PASS
    survey.crds_present = frozenset()
    assert check_monitoring(survey).status is Status.WARN


def test_absent_pull_secrets_and_pull_errors_fail() -> None:
    survey = good_survey()
    survey.pods[JOBS][0]["spec"]["imagePullSecrets"] = [{"name": "regcred"}]
    result = check_images(survey)
    assert result.status is Status.FAIL and f"{JOBS}/regcred" in result.detail
    survey.secrets_present = {f"{JOBS}/regcred": True}
    assert check_images(survey).status is Status.PASS
    survey.pods[JOBS][1]["status"]["initContainerStatuses"] = [
        {
            "name": "hangwatch-sidecar",
            "state": {"waiting": {"reason": "ImagePullBackOff", "message": "401"}},
        }
    ]
    assert "ImagePullBackOff" in check_images(survey).detail


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=10),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=10), inner, max_size=3)
    ),
    max_leaves=10,
)


@settings(max_examples=60)
@given(
    spec=st.dictionaries(
        st.sampled_from(["selector", "roles", "kafka", "processView", "sidecar", "detection"]),
        _json,
        max_size=4,
    ),
    labels=st.dictionaries(st.text(max_size=20), st.text(max_size=20), max_size=4),
)
def test_any_policy_and_pod_labels_give_results(
    spec: dict[str, Any], labels: dict[str, str]
) -> None:
    survey = good_survey()
    survey.release = None  # the CRD comparison is not what varies here
    survey.policies = [{"metadata": {"name": "p", "namespace": JOBS}, "spec": spec}]
    survey.pods = {JOBS: [executor("e", labels=labels)]}
    survey.namespaces = {JOBS: {"metadata": {"labels": labels}}}
    results = run_checks(survey)
    assert all(r.status in Status for r in results)
