"""`hangwatch check`'s judgement of each policy and its pods: the policy valid and
selecting running pods that carry the sidecar, the webhook's answer to a dry-run pod,
the namespace's Pod Security level against what the policy asks, and the sidecars
answering `/status`. Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from hangwatch.pod_security import LOST, NOT_JUDGED_ENV, format_not_judged
from hangwatch_operator.injection import (
    INJECTED_ANNOTATION,
    MODE_ANNOTATION,
    POLICY_LABEL,
    features_left_out,
)
from hangwatch_operator.install_model import (
    DryRun,
    Result,
    Status,
    Survey,
    first_three,
    injected,
    operator_settings,
    parsed_policies,
    selects,
    sidecar_of,
)
from hangwatch_operator.pod_security import injection_violations, level_of, policy_needs
from hangwatch_operator.policies import (
    PRODUCER_LABEL,
    PRODUCER_LABEL_VALUE,
    Policy,
    Role,
    pod_role,
    stale_after_seconds,
)
from hangwatch_operator.sidecar_status import SidecarReport, StatusFormatError, parse_status


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
    bare = [p for p in chosen if not injected(p)]
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
    if not injected(dry.pod):
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
    sidecar = sidecar_of(pod) or {}
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


def _sidecar_reports(survey: Survey) -> list[tuple[str, SidecarReport | None, str | None]]:
    """Each answering pod (`namespace/pod`), its sidecar's parsed /status (None when
    unusable) and why it is unusable."""
    policies = {
        (p.namespace, p.name): p for _, p in parsed_policies(survey) if isinstance(p, Policy)
    }
    found: list[tuple[str, SidecarReport | None, str | None]] = []
    for key, answer in sorted(survey.answers.items()):
        namespace, pod = key.split("/", 1)
        pods = {
            str((p.get("metadata") or {}).get("name")): p for p in survey.pods.get(namespace, [])
        }
        labels = ((pods.get(pod) or {}).get("metadata") or {}).get("labels") or {}
        policy = policies.get((namespace, str(labels.get(POLICY_LABEL))))
        stale = stale_after_seconds(policy) if policy else 60.0
        problem, report = answer.error, None
        if answer.body is not None:
            try:
                report = parse_status(answer.body, now=survey.now, stale_after_seconds=stale)
            except StatusFormatError as exc:
                problem = f"unusable /status: {exc}"
        found.append((key, None if problem else report, problem))
    return found


def check_sidecars(survey: Survey) -> Result:
    name = "sidecars"
    silent = [f"{key}: {problem}" for key, _, problem in _sidecar_reports(survey) if problem]
    answered = len(survey.answers) - len(silent)
    if not survey.answers:
        return Result(name, Status.SKIP, "no running injected pod to ask")
    if silent:
        shown = first_three(silent)
        return Result(
            name,
            Status.FAIL,
            f"{len(silent)} of {len(survey.answers)} sidecars do not answer /status: {shown}",
            "kubectl logs POD -c hangwatch-sidecar; the operator cannot judge these pods",
        )
    return Result(name, Status.PASS, f"{answered} sidecars answer /status")


def check_client_releases(survey: Survey) -> Result:
    """The pods' Kafka client releases with a published hang, as their sidecars saw them:
    advice (a warning), never a failure."""
    name = "client-releases"
    reports = [(key, report) for key, report, _ in _sidecar_reports(survey) if report]
    if not reports:
        return Result(name, Status.SKIP, "no sidecar answered /status")
    advised = sorted({(line, key) for key, report in reports for line in report.advisories})
    if not advised:
        return Result(
            name,
            Status.PASS,
            f"no client release with a published hang in {len(reports)} sidecars' pods",
        )
    by_line: dict[str, list[str]] = {}
    for line, key in advised:
        by_line.setdefault(line, []).append(key)
    shown = first_three(
        [f"{line}, in {', '.join(pods[:3])}{' ...' if len(pods) > 3 else ''}"
         for line, pods in by_line.items()]
    )  # fmt: skip
    return Result(
        name,
        Status.WARN,
        f"{len(by_line)} client release(s) with a published hang: {shown}",
        "advice only, nothing is restarted for it: upgrade to the fixed release (or watch "
        "the open report); /status advisories name where each release was seen",
    )
