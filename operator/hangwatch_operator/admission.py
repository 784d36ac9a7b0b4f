"""The injection webhook's wire format and decision, pure: AdmissionReview bytes in and out.

Used by `webhook`, which serves it on kopf's HTTPS server. `read_review` turns a
request body into a `Review` (the pod, its namespace, the uid and API version to
echo) or a `Malformed` naming the problem; `admit` decides for one pod and the
policies of its namespace, returning the JSON Patch operations `injection` computes
(never a diff of the whole pod); `response_body` encodes the answer as an
AdmissionReview for `admission.k8s.io/v1` or `v1beta1`, whichever the request used.

Everything fails open: a malformed review, a pod with a field of the wrong type, a
conflict or a bug all end in `allowed: true` without a patch, with a warning the
API server passes on to the client, so hangwatch is never the reason a pod does not
start. A policy feature the namespace's enforced Pod Security level forbids
(`hangwatch.pod_security`) is left out of the injection, named in a warning and in
`Admission.left_out` (the webhook records an Event): the injected pod is admitted
wherever the uninjected one is. `Result` holds the bounded label values of
`hangwatch_operator_webhook_requests_total`. Problem details name the field and
what was expected, never a value from the pod (values may be secrets).
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from hangwatch import pod_security
from hangwatch.pod_security import Feature, Level
from hangwatch_operator.injection import (
    InjectionConflictError,
    build_sidecar_patch,
    features_left_out,
    forced_native_note,
    policy_features,
    resolve_injection_mode,
)
from hangwatch_operator.policies import Policy, matching_policy
from hangwatch_operator.settings import InjectionMode, OperatorSettings

ADMISSION_V1 = "admission.k8s.io/v1"
ADMISSION_VERSIONS = frozenset({ADMISSION_V1, "admission.k8s.io/v1beta1"})
MAX_REVIEW_BYTES = 4 * 1024 * 1024
"""Largest request body read: a pod is at most ~1.5 MiB in etcd; more is not a review."""
WARNING_PREFIX = "hangwatch: sidecar not injected: "
INTERNAL_ERROR = f"{WARNING_PREFIX}internal error"


class Result(StrEnum):
    """What became of one admission request (the `result` label of the counter)."""

    INJECTED = "injected"
    SKIPPED = "skipped"
    ERROR = "error"
    MALFORMED = "malformed"


@dataclass(frozen=True)
class Review:
    """The parts of a well-formed pod AdmissionReview the webhook needs."""

    api_version: str
    uid: str
    namespace: str
    """The object's namespace, else the request's (CREATE may omit it in the object)."""
    pod: Mapping[str, Any]
    operation: str
    dry_run: bool = False
    """`request.dryRun`: nothing may be written because of it (the webhook declares
    `sideEffects: None`), so a feature left out is logged, not posted as an Event."""

    @property
    def pod_name(self) -> str:
        """`namespace/name` (or `generateName*`) for log lines."""
        meta = self.pod.get("metadata") or {}
        name = meta.get("name") or f"{meta.get('generateName') or ''}*"
        return f"{self.namespace}/{name}"


@dataclass(frozen=True)
class Malformed:
    """A request body that is not a readable pod AdmissionReview."""

    problem: str
    """One line naming the field and what was expected (no values from the request)."""
    api_version: str = ADMISSION_V1
    uid: str = ""


@dataclass(frozen=True)
class Admission:
    """The webhook's answer for one pod."""

    result: Result
    ops: Sequence[dict[str, Any]] = ()
    warnings: Sequence[str] = ()
    policy: str = ""
    mode: InjectionMode | None = None
    error: Exception | None = field(default=None, compare=False)
    left_out: tuple[Feature, ...] = ()
    """Features of the policy the namespace's Pod Security level forbids (not injected)."""
    level: Level | None = None
    """The level that forbade them."""
    dry_run: bool = False
    """The request was a dry run (no Event may be posted for it)."""


class _Shape(ValueError):
    """A field of the request does not have the type Kubernetes gives it."""


def read_review(data: bytes | None) -> Review | Malformed:
    """The review in `data`, or what makes it malformed (never raises).

    `None` stands for a body longer than `MAX_REVIEW_BYTES`, which is not read.
    """
    if data is None or len(data) > MAX_REVIEW_BYTES:
        return Malformed(f"request body larger than {MAX_REVIEW_BYTES} bytes")
    try:
        document = json.loads(data)
    except (ValueError, RecursionError):  # also invalid UTF-8 and absurd nesting
        return Malformed("request body is not JSON")
    return review_from(document)


def review_from(document: Any) -> Review | Malformed:
    """The review in a parsed request body, or what makes it malformed (never raises)."""
    if not isinstance(document, dict):
        return Malformed("request body is not a JSON object")
    api_version = document.get("apiVersion")
    known = isinstance(api_version, str) and api_version in ADMISSION_VERSIONS
    version = str(api_version) if known else ADMISSION_V1
    request = document.get("request")
    uid = request.get("uid") if isinstance(request, dict) else None
    echo = uid if isinstance(uid, str) else ""
    try:
        if not known:
            raise _Shape("apiVersion is not admission.k8s.io/v1 or v1beta1")
        if document.get("kind") != "AdmissionReview":
            raise _Shape("kind is not AdmissionReview")
        if not isinstance(request, dict):
            raise _Shape("request is not an object")
        if not isinstance(uid, str) or not uid:
            raise _Shape("request.uid is not a non-empty string")
        return _review(version, uid, request)
    except _Shape as problem:
        return Malformed(str(problem), version, echo)


def covering_policy(review: Review | Malformed, policies: Iterable[Policy]) -> Policy | None:
    """The policy `admit` would inject for, if any (never raises)."""
    if not isinstance(review, Review) or review.operation != "CREATE":
        return None
    try:
        return matching_policy(review.pod, policies)
    except Exception:  # noqa: BLE001 - `admit` reports it
        return None


def needs_level(review: Review | Malformed, policies: Iterable[Policy]) -> bool:
    """Whether `admit` needs the namespace's enforced level: a covering policy asks for a
    feature some level forbids (so the lookup is only made for such policies)."""
    policy = covering_policy(review, policies)
    return policy is not None and bool(policy_features(policy))


def admit(
    review: Review,
    policies: Iterable[Policy],
    settings: OperatorSettings,
    server_minor: int | None,
    level: Level = Level.RESTRICTED,
) -> Admission:
    """Inject the sidecar if a policy covers the pod, without the features `level` (the
    namespace's enforced Pod Security level; restricted when unknown) forbids; fail open
    whatever happens."""
    if review.operation != "CREATE":
        return Admission(Result.SKIPPED)
    policy: Policy | None = None
    try:
        policy = matching_policy(review.pod, policies)
        if policy is None:
            return Admission(Result.SKIPPED)
        mode = resolve_injection_mode(policy.sidecar.injection_mode, settings, server_minor)
        left_out = features_left_out(policy, level)
        ops = build_sidecar_patch(review.pod, policy, settings, mode, left_out)
    except InjectionConflictError as exc:
        name = policy.name if policy is not None else ""
        return Admission(Result.SKIPPED, warnings=(WARNING_PREFIX + str(exc),), policy=name)
    except Exception as exc:  # noqa: BLE001 - fail open: the caller logs `error`
        warning = f"{INTERNAL_ERROR} ({type(exc).__name__})"
        return Admission(Result.ERROR, warnings=(warning,), error=exc)
    if not ops:
        return Admission(Result.SKIPPED, policy=policy.name, mode=mode)
    notes = tuple(pod_security.warning(f, level, review.namespace) for f in left_out)
    if note := forced_native_note(policy.sidecar.injection_mode, settings, server_minor):
        notes = (f"hangwatch: {note}", *notes)
    return Admission(
        Result.INJECTED,
        ops,
        warnings=notes,
        policy=policy.name,
        mode=mode,
        left_out=left_out,
        level=level if left_out else None,
        dry_run=review.dry_run,
    )


def malformed(problem: Malformed) -> Admission:
    """The answer to a malformed request: allowed, unchanged, with the problem named."""
    return Admission(
        Result.MALFORMED, warnings=(f"{WARNING_PREFIX}malformed request ({problem.problem})",)
    )


def response_body(api_version: str, uid: str, admission: Admission) -> bytes:
    """The AdmissionReview answering a request of `api_version` with `uid` (always allowed)."""
    response: dict[str, Any] = {"uid": uid, "allowed": True}
    if admission.warnings:
        response["warnings"] = list(admission.warnings)
    if admission.ops:
        patch = json.dumps(list(admission.ops), separators=(",", ":")).encode()
        response["patchType"] = "JSONPatch"
        response["patch"] = base64.b64encode(patch).decode("ascii")
    answer = {"apiVersion": api_version, "kind": "AdmissionReview", "response": response}
    return json.dumps(answer, separators=(",", ":")).encode()


def _review(api_version: str, uid: str, request: Mapping[str, Any]) -> Review:
    operation = request.get("operation", "CREATE")
    if not isinstance(operation, str):
        raise _Shape("request.operation is not a string")
    resource = request.get("resource")
    if resource is not None and not (
        isinstance(resource, dict)
        and resource.get("group", "") == ""
        and resource.get("resource") == "pods"
    ):
        raise _Shape("request.resource is not core pods")
    pod = request.get("object")
    if not isinstance(pod, dict):
        raise _Shape("request.object is not an object")
    request_namespace = _optional(request, "namespace", str, "request")
    _check_pod(pod)
    namespace = pod["metadata"].get("namespace") or request_namespace or ""
    return Review(api_version, uid, namespace, pod, operation, request.get("dryRun") is True)


def _check_pod(pod: Mapping[str, Any]) -> None:
    """Every field of the pod that matching and injection read has its Kubernetes type."""
    kind = _optional(pod, "kind", str, "object")
    if kind not in (None, "Pod"):
        raise _Shape("object.kind is not Pod")
    meta = _required(pod, "metadata", dict, "object")
    for key in ("name", "generateName", "namespace"):
        _optional(meta, key, str, "metadata")
    for key in ("labels", "annotations"):
        values = _optional(meta, key, dict, "metadata") or {}
        if not all(isinstance(v, str) for v in values.values()):
            raise _Shape(f"metadata.{key} has a value that is not a string")
    spec = _required(pod, "spec", dict, "object")
    _optional(spec, "hostPID", bool, "spec")
    for index, volume in enumerate(_objects(spec, "volumes", "spec")):
        _optional(volume, "name", str, f"spec.volumes[{index}]")
    for key in ("initContainers", "containers"):
        for index, container in enumerate(_objects(spec, key, "spec")):
            _check_container(container, f"spec.{key}[{index}]")


def _check_container(container: Mapping[str, Any], where: str) -> None:
    _optional(container, "name", str, where)
    for index, env in enumerate(_objects(container, "env", where)):
        _optional(env, "name", str, f"{where}.env[{index}]")
    for index, port in enumerate(_objects(container, "ports", where)):
        _optional(port, "containerPort", int, f"{where}.ports[{index}]")
    _objects(container, "volumeMounts", where)


def _objects(parent: Mapping[str, Any], key: str, where: str) -> list[Mapping[str, Any]]:
    """`parent[key]` as a list of objects ([] when absent or null)."""
    items = _optional(parent, key, list, where) or []
    if not all(isinstance(item, dict) for item in items):
        raise _Shape(f"{where}.{key} has an item that is not an object")
    return items


def _optional(parent: Mapping[str, Any], key: str, kind: type, where: str) -> Any:
    """`parent[key]` if absent, null or of type `kind` (JSON true is not an integer)."""
    value = parent.get(key)
    if value is not None and not _is(value, kind):
        raise _Shape(f"{where}.{key} is not {_TYPE_NAMES[kind]}")
    return value


def _required(parent: Mapping[str, Any], key: str, kind: type, where: str) -> Any:
    value = parent.get(key)
    if not _is(value, kind):
        raise _Shape(f"{where}.{key} is not {_TYPE_NAMES[kind]}")
    return value


def _is(value: Any, kind: type) -> bool:
    return isinstance(value, kind) and not (kind is int and isinstance(value, bool))


_TYPE_NAMES = {
    dict: "an object",
    list: "a list",
    str: "a string",
    bool: "a boolean",
    int: "an integer",
}
