"""Pod Security Standards as hangwatch needs them: a namespace's enforced level, and
which of a policy's features that level forbids. Pure: no I/O.

Used by the operator's webhook (`hangwatch_operator.admission`: inject without a
forbidden feature and say so), by the sidecar (`/status` names what its pod cannot
judge, from `NOT_JUDGED_ENV`, which the webhook sets) and by anything that checks an
install. One definition of each: the label, the levels, the feature table, the wire
form of the not-judged list.

Pod Security admission runs after the mutating webhooks, on the injected pod: a
sidecar the namespace's level forbids makes the whole pod inadmissible (the webhook's
`failurePolicy: Ignore` does not help, the webhook answered). What each level allows
(the Kubernetes Pod Security Standards):

- privileged: anything.
- baseline: no host namespaces, no privileged containers, added capabilities only
  from the default runtime set (AUDIT_WRITE, CHOWN, DAC_OVERRIDE, FOWNER, FSETID,
  KILL, MKNOD, NET_BIND_SERVICE, SETFCAP, SETGID, SETPCAP, SETUID, SYS_CHROOT): so no
  SYS_PTRACE. `shareProcessNamespace` is allowed at every level.
- restricted: baseline, plus `allowPrivilegeEscalation: false`, `runAsNonRoot`,
  `capabilities.drop: [ALL]` (adding only NET_BIND_SERVICE), a RuntimeDefault or
  Localhost seccomp profile, a limited set of volume types (emptyDir is one).

hangwatch's default sidecar passes restricted (`hangwatch_operator.injection`); the
only feature that needs more is the Python process view (py-spy needs SYS_PTRACE and,
through its file capability, privilege escalation on exec): privileged only.

The enforced level comes from the namespace's `pod-security.kubernetes.io/enforce`
label, or the cluster's default when absent. Label values are untrusted text: exactly
`privileged`, `baseline` or `restricted` count, anything else is read the way Pod
Security admission reads it (an invalid level enforces restricted), so an unreadable
label never makes hangwatch add what the namespace refuses.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from enum import StrEnum

ENFORCE_LABEL = "pod-security.kubernetes.io/enforce"
"""The Namespace label Pod Security admission enforces."""
NOT_JUDGED_ENV = "HANGWATCH_NOT_JUDGED"
"""The sidecar's variable naming the features its pod's level removed (comma-separated
`Feature` values, in the order of `Feature`), set by the webhook; absent or empty: none."""


class Level(StrEnum):
    """A Pod Security Standard level, from least to most restrictive."""

    PRIVILEGED = "privileged"
    BASELINE = "baseline"
    RESTRICTED = "restricted"

    @property
    def rank(self) -> int:
        return _RANK[self]


_RANK = {Level.PRIVILEGED: 0, Level.BASELINE: 1, Level.RESTRICTED: 2}


class Feature(StrEnum):
    """A policy feature whose injection needs more than the restricted level allows."""

    PROCESS_VIEW = "process_view"
    """`spec.processView`: the sidecar's py-spy reads the executor's Python stacks."""


NEEDS: Mapping[Feature, Level] = {Feature.PROCESS_VIEW: Level.PRIVILEGED}
"""Feature -> the most restrictive level that still admits what its injection adds.
The process view adds SYS_PTRACE (baseline refuses every capability outside the default
runtime set) and `allowPrivilegeEscalation: true` (restricted refuses it)."""

WHY: Mapping[Feature, str] = {
    Feature.PROCESS_VIEW: "the sidecar's py-spy needs SYS_PTRACE, which baseline and "
    "restricted refuse",
}
"""Feature -> why a level forbids it (for warnings and Events)."""

LOST: Mapping[Feature, str] = {
    Feature.PROCESS_VIEW: "the executor's Python thread stacks: a silent Python producer "
    "stays producer_silent (alert only), never producer_hung",
}
"""Feature -> the evidence, and so the judgement, a pod without it cannot have."""


def parse_level(value: object) -> Level | None:
    """The level `value` names exactly, else None (case and spaces count, as in the API)."""
    if not isinstance(value, str):
        return None
    try:
        return Level(value)
    except ValueError:
        return None


def enforced_level(labels: object, default: Level) -> Level:
    """The level Pod Security admission enforces in a namespace with `labels`.

    No enforce label: `default` (the cluster's). A label that names no level: restricted,
    as Pod Security admission evaluates an invalid level. Labels that are not a mapping
    of strings are read as absent.
    """
    if not isinstance(labels, Mapping) or ENFORCE_LABEL not in labels:
        return default
    return parse_level(labels[ENFORCE_LABEL]) or Level.RESTRICTED


def allows(level: Level, feature: Feature) -> bool:
    """Whether a pod in a namespace enforcing `level` is admitted with `feature` injected."""
    return level.rank <= NEEDS[feature].rank


def forbidden(features: Iterable[Feature], level: Level) -> tuple[Feature, ...]:
    """The `features` that `level` refuses, in `Feature` order, each once."""
    wanted = set(features)
    return tuple(f for f in Feature if f in wanted and not allows(level, f))


def format_not_judged(features: Iterable[Feature]) -> str:
    """The value of `NOT_JUDGED_ENV` for `features`."""
    wanted = set(features)
    return ",".join(f.value for f in Feature if f in wanted)


def parse_not_judged(text: str | None) -> tuple[Feature, ...]:
    """The features `NOT_JUDGED_ENV` names; unknown entries are skipped (a newer operator)."""
    names = {part.strip() for part in (text or "").split(",")}
    return tuple(f for f in Feature if f.value in names)


def warning(feature: Feature, level: Level, namespace: str) -> str:
    """One line for the AdmissionReview warning and the Event."""
    return (
        f"hangwatch: {feature.value} left out: namespace {namespace} enforces Pod Security "
        f"{level.value} and {WHY[feature]}; not judged in this pod: {LOST[feature]}"
    )
