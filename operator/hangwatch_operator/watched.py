"""What the operator knows about a watched pod and a node it cordoned, from their bodies.

Fed by the kopf indexes in `handlers` (every pod carrying the `hangwatch.dev/policy`
label the webhook sets, every node carrying hangwatch's cordon annotation). The
values are small frozen records, so an index of thousands of executors stays cheap
and the pure functions downstream (`correlation`, `decisions`) never see raw bodies.

The label only says which pods to list. `injection_problem` decides which of them a
policy watches: the pods its webhook injected, as far as a pod's spec can show it —
the `hangwatch.dev/injected` annotation naming the policy, and a `hangwatch-sidecar`
container running `hangwatch sidecar` from the sidecar image's repository against
the policy's bootstrap list, serving the port named `hangwatch` itself. Labels and
annotations are the pod creator's to write, so the container is what counts; it
cannot show what the pod's owner does around it (docs/threat-model.md).
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from hangwatch_operator.injection import (
    BOOTSTRAP_FLAG,
    INJECTED_ANNOTATION,
    POLICY_LABEL,
    PORT_NAME,
    SIDECAR_COMMAND,
    SIDECAR_CONTAINER,
)
from hangwatch_operator.policies import Policy, Role, pod_role

APPLICATION_LABEL = "spark-app-selector"
"""Set by Spark on every pod of an application: the application id (`spark-...`)."""
EXECUTOR_ID_LABEL = "spark-exec-id"
CORDONED_LABEL = "hangwatch.dev/cordoned"
"""Label (`"true"`) on a node hangwatch cordoned, so the operator can watch just those
nodes with a server-side label selector (a big cluster's nodes are heavy objects)."""
CORDONED_BY_ANNOTATION = "hangwatch.dev/cordoned-by"
"""On a node hangwatch cordoned: `<namespace>/<policy>`. Only such nodes are uncordoned."""
CORDONED_AT_ANNOTATION = "hangwatch.dev/cordoned-at"
"""On a node hangwatch cordoned: when (RFC 3339, UTC)."""
NETWORK_FAULT_TAINT = {
    "key": "hangwatch.dev/network-fault",
    "value": "true",
    "effect": "NoSchedule",
}
"""Keeps replacement executors off a node whose pods cannot reach Kafka."""
DECOMMISSION_MARKER = "decom"
"""Part of the preStop command that marks Spark's decommission script
(`spark.kubernetes.decommission.script`, default `/opt/decom.sh`)."""


@dataclass(frozen=True)
class SidecarContainer:
    """A pod's `hangwatch-sidecar` container, as far as the operator checks it."""

    image: str
    command: tuple[str, ...]
    bootstrap: tuple[str, ...]
    """The entries of its `--bootstrap` argument (empty when it has none)."""
    port: int | None
    """Its own container port named `hangwatch`."""


@dataclass(frozen=True)
class WatchedPod:
    """One pod the operator polls: identity, placement and where its sidecar listens."""

    namespace: str
    name: str
    uid: str
    policy: str
    role: str
    node: str | None = None
    ip: str | None = None
    port: int | None = None
    application_id: str | None = None
    executor_id: str | None = None
    running: bool = True
    terminating: bool = False
    decommission_hook: bool = False
    """The Spark container has a preStop exec hook (Spark adds /opt/decom.sh when
    `spark.decommission.enabled=true`): deleting the pod decommissions the executor."""
    injected_for: str | None = None
    """The policy named by the pod's `hangwatch.dev/injected` annotation."""
    sidecar: SidecarContainer | None = None
    owner: str | None = None
    """`<Kind>/<name>` of the pod's controlling owner (`ownerReferences` with
    `controller: true`), None for a bare pod."""

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def limit_group(self) -> str | None:
        """What the per-hour action limit counts together: a Spark pod's application, a
        `producer` pod's controlling owner (Spark labels no application on it)."""
        if self.role == Role.PRODUCER:
            return self.owner
        return self.application_id

    @property
    def replaceable(self) -> bool:
        """Whether deleting the pod brings a new one: Spark's driver replaces its
        executors; a `producer` pod needs a controlling owner (a bare pod is just gone)."""
        return self.role != Role.PRODUCER or self.owner is not None

    @property
    def pollable(self) -> bool:
        """Running, not being deleted, and its sidecar has an address."""
        return self.running and not self.terminating and bool(self.ip) and self.port is not None


@dataclass(frozen=True)
class CordonedNode:
    """A node hangwatch cordoned: which policy did it and when (unix seconds)."""

    name: str
    policy_key: str
    since: float | None


def watched_pod(body: Mapping[str, Any], default_port: int) -> WatchedPod:
    """A `WatchedPod` from a pod body; the sidecar port is the sidecar container's port
    named `hangwatch` (the webhook adds it), else `default_port`."""
    meta = body.get("metadata") or {}
    spec = body.get("spec") or {}
    status = body.get("status") or {}
    labels: Mapping[str, str] = meta.get("labels") or {}
    annotations: Mapping[str, str] = meta.get("annotations") or {}
    containers = [*(spec.get("initContainers") or ()), *(spec.get("containers") or ())]
    sidecar = _sidecar_container(containers)
    return WatchedPod(
        namespace=str(meta.get("namespace") or ""),
        name=str(meta.get("name") or ""),
        uid=str(meta.get("uid") or ""),
        policy=labels.get(POLICY_LABEL, ""),
        role=pod_role(labels) or "",
        node=spec.get("nodeName") or None,
        ip=status.get("podIP") or None,
        port=sidecar.port if sidecar is not None and sidecar.port else default_port,
        application_id=labels.get(APPLICATION_LABEL),
        executor_id=labels.get(EXECUTOR_ID_LABEL),
        running=status.get("phase") == "Running",
        terminating=bool(meta.get("deletionTimestamp")),
        decommission_hook=any(_has_decommission_hook(c) for c in spec.get("containers") or ()),
        injected_for=annotations.get(INJECTED_ANNOTATION),
        sidecar=sidecar,
        owner=_controller(meta.get("ownerReferences")),
    )


def injection_problem(pod: WatchedPod, policy: Policy, sidecar_image: str) -> str | None:
    """Why `policy` does not watch `pod`, or None when it does (see the module docstring).

    `sidecar_image` is the operator's default sidecar image; its repository is accepted
    beside the one of the policy's own `spec.sidecar.image`, whatever the tag.
    """
    if pod.injected_for != policy.name:
        return f"annotation {INJECTED_ANNOTATION} does not name policy {policy.name}"
    if pod.role not in {role.value for role in policy.roles}:
        return f"role {pod.role!r} is not one of the policy's roles"
    sidecar = pod.sidecar
    if sidecar is None:
        return f"no {SIDECAR_CONTAINER} container"
    if sidecar.command != SIDECAR_COMMAND:
        return f"{SIDECAR_CONTAINER} does not run {' '.join(SIDECAR_COMMAND)}"
    allowed = {image_repository(i) for i in (sidecar_image, policy.sidecar.image) if i}
    if image_repository(sidecar.image) not in allowed:
        return f"{SIDECAR_CONTAINER} image is not from {' or '.join(sorted(allowed))}"
    if sidecar.bootstrap != policy.kafka.bootstrap_servers:
        return f"{SIDECAR_CONTAINER} probes another bootstrap list than the policy's"
    if sidecar.port is None:
        return f"{SIDECAR_CONTAINER} declares no port named {PORT_NAME}"
    return None


def image_repository(image: str) -> str:
    """`registry:5000/team/app:1.2@sha256:...` -> `registry:5000/team/app`."""
    name = image.split("@", 1)[0]
    slash = name.rfind("/")
    colon = name.rfind(":")
    return name[:colon] if colon > slash else name


def cordoned_node(body: Mapping[str, Any]) -> CordonedNode | None:
    """The node's hangwatch cordon, or None if hangwatch did not cordon it."""
    meta = body.get("metadata") or {}
    annotations: Mapping[str, str] = meta.get("annotations") or {}
    owner = annotations.get(CORDONED_BY_ANNOTATION)
    if not owner:
        return None
    return CordonedNode(
        str(meta.get("name") or ""), owner, parse_time(annotations.get(CORDONED_AT_ANNOTATION))
    )


def format_time(unix_seconds: float) -> str:
    """RFC 3339 in UTC with a `Z`, as Kubernetes writes times."""
    moment = datetime.datetime.fromtimestamp(unix_seconds, datetime.UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_time(text: object) -> float | None:
    """Unix seconds from an RFC 3339 time, or None when absent or malformed."""
    if not isinstance(text, str) or not text:
        return None
    try:
        moment = datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=datetime.UTC)
    return moment.timestamp()


def _sidecar_container(containers: list[Mapping[str, Any]]) -> SidecarContainer | None:
    found = [c for c in containers if c.get("name") == SIDECAR_CONTAINER]
    if len(found) != 1:
        return None
    container = found[0]
    args = [str(a) for a in container.get("args") or ()]
    flag = args.index(BOOTSTRAP_FLAG) if BOOTSTRAP_FLAG in args else -1
    bootstrap = args[flag + 1].split(",") if 0 <= flag < len(args) - 1 else []
    ports = [
        int(p["containerPort"])
        for p in container.get("ports") or ()
        if p.get("name") == PORT_NAME and isinstance(p.get("containerPort"), int)
    ]
    return SidecarContainer(
        image=str(container.get("image") or ""),
        command=tuple(str(c) for c in container.get("command") or ()),
        bootstrap=tuple(bootstrap),
        port=ports[0] if ports else None,
    )


def _controller(references: object) -> str | None:
    """`<Kind>/<name>` of the owner reference with `controller: true`, if any."""
    for ref in references if isinstance(references, list) else ():
        if isinstance(ref, Mapping) and ref.get("controller") is True:
            kind, name = ref.get("kind"), ref.get("name")
            if isinstance(kind, str) and isinstance(name, str) and kind and name:
                return f"{kind}/{name}"
    return None


def _has_decommission_hook(container: Mapping[str, Any]) -> bool:
    pre_stop = ((container.get("lifecycle") or {}).get("preStop") or {}).get("exec") or {}
    command = pre_stop.get("command") or []
    return bool(command) and any(DECOMMISSION_MARKER in str(part) for part in command)
