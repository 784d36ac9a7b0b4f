"""What a policy asks of a pod against a namespace's Pod Security level, as a pure rule.

Pod Security admission runs after the mutating webhooks, on the injected pod: a sidecar
that needs what the namespace's enforced level forbids makes the whole executor pod
inadmissible. `injection_violations` says, for a policy and a level, what the sidecar
the webhook would inject (`injection.sidecar_container`, the one definition of it)
breaks, in the API server's own words; `hangwatch check` reports it per policy
namespace, and the webhook can ask the same question before injecting.

The rules are those of the Pod Security Standards (Kubernetes' `pod-security-admission`
policy checks, `latest`) that concern what a container's and a pod's security settings
can add: privileged, added capabilities, privilege escalation, non-root, seccomp,
host namespaces. Volume types are not judged: the injection adds only an emptyDir,
allowed at every level. `level_of` reads a namespace's enforced level from its labels.
Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

from hangwatch.pod_security import ENFORCE_LABEL, Feature, Level, enforced_level
from hangwatch_operator.injection import sidecar_container
from hangwatch_operator.policies import Policy
from hangwatch_operator.settings import InjectionMode, OperatorSettings

BASELINE_CAPABILITIES = frozenset(
    {
        "AUDIT_WRITE",
        "CHOWN",
        "DAC_OVERRIDE",
        "FOWNER",
        "FSETID",
        "KILL",
        "MKNOD",
        "NET_BIND_SERVICE",
        "SETFCAP",
        "SETGID",
        "SETPCAP",
        "SETUID",
        "SYS_CHROOT",
    }
)
"""Capabilities the baseline level lets a container add (the container runtime's defaults)."""
RESTRICTED_CAPABILITIES = frozenset({"NET_BIND_SERVICE"})
"""The only capability the restricted level lets a container add (after dropping ALL)."""
SECCOMP_ALLOWED = frozenset({"RuntimeDefault", "Localhost"})


def level_of(labels: Mapping[str, str]) -> tuple[Level, str]:
    """The enforced level of a namespace with these labels (`hangwatch.pod_security`'s
    rule, the webhook's), and how it was told.

    No label: the API server's default (`privileged` unless its AdmissionConfiguration
    says otherwise, which the API does not show). A value Pod Security does not know is
    enforced as `restricted` (the admission controller's own rule)."""
    level = enforced_level(labels, Level.PRIVILEGED)
    value = labels.get(ENFORCE_LABEL)
    if value is None:
        return level, "no enforce label: the cluster's default (privileged unless set)"
    if level.value == value:
        return level, f"{ENFORCE_LABEL}={value}"
    return level, f"{ENFORCE_LABEL}={value!r} is not a level: enforced as restricted"


def container_violations(
    container: Mapping[str, Any], level: Level, pod_security: Mapping[str, Any] | None = None
) -> list[str]:
    """What `container` (with the pod's `securityContext`) breaks at `level`, as the
    API server words it; empty when admitted."""
    if level is Level.PRIVILEGED:
        return []
    name = container.get("name", "?")
    security: Mapping[str, Any] = container.get("securityContext") or {}
    pod: Mapping[str, Any] = pod_security or {}
    capabilities: Mapping[str, Any] = security.get("capabilities") or {}
    added = [str(c) for c in capabilities.get("add") or []]
    problems = []
    if security.get("privileged") is True:
        problems.append(f"privileged (container {name} must not set securityContext.privileged)")
    allowed = BASELINE_CAPABILITIES if level is Level.BASELINE else RESTRICTED_CAPABILITIES
    extra = [c for c in added if c not in allowed]
    if extra:
        problems.append(
            f"non-default capabilities (container {name} must not include "
            f"{', '.join(extra)} in securityContext.capabilities.add)"
        )
    seccomp = (security.get("seccompProfile") or pod.get("seccompProfile") or {}).get("type")
    if seccomp == "Unconfined":
        problems.append(f"seccompProfile (container {name} must not set it to Unconfined)")
    if level is Level.BASELINE:
        return problems
    if security.get("allowPrivilegeEscalation") is not False:
        problems.append(
            f"allowPrivilegeEscalation != false (container {name} must set "
            "securityContext.allowPrivilegeEscalation=false)"
        )
    if "ALL" not in [str(c) for c in capabilities.get("drop") or []]:
        problems.append(
            f"unrestricted capabilities (container {name} must set "
            'securityContext.capabilities.drop=["ALL"])'
        )
    run_as_non_root = security.get("runAsNonRoot", pod.get("runAsNonRoot"))
    if run_as_non_root is not True:
        problems.append(f"runAsNonRoot != true (container {name} must set runAsNonRoot=true)")
    if security.get("runAsUser", pod.get("runAsUser")) == 0:
        problems.append(f"runAsUser=0 (container {name} must not run as root)")
    if seccomp not in SECCOMP_ALLOWED:
        problems.append(
            f"seccompProfile (container {name} must set securityContext.seccompProfile.type "
            'to "RuntimeDefault" or "Localhost")'
        )
    return problems


def injection_violations(
    policy: Policy,
    settings: OperatorSettings,
    level: Level,
    left_out: Collection[Feature] = (),
) -> list[str]:
    """What the sidecar injected for `policy` without the features `left_out` breaks at
    `level` (empty: admitted). The injection's pod-level changes (a shared process
    namespace, an emptyDir) are allowed at every level, and the injection mode changes
    no security setting."""
    sidecar = sidecar_container(policy, settings, InjectionMode.NATIVE, left_out)
    return container_violations(sidecar, level)


def policy_needs(policy: Policy) -> str:
    """The privileges `policy` asks the sidecar for, in a few words (for a report)."""
    if policy.process_view.enabled:
        return "processView (SYS_PTRACE, allowPrivilegeEscalation for py-spy)"
    return "no added privilege"
