"""Carry out decisions against the Kubernetes API: delete, decommission, cordon, uncordon.

Fed by `remediation` with the decisions `decide` let through (outcome `acted`);
returns each one with a `note` saying what happened, or with outcome `failed` and
the error. Never raises for a single decision: one failed call must not stop the rest
of the round or the reporting of it.

- `restart`: delete the pod (uid precondition, so a namesake is never hit) with
  `restart_grace_seconds`; Spark's driver sees the executor lost and asks for a new one.
- `decommission`: Spark graceful decommission. With `spark.decommission.enabled=true`
  Spark gives every executor container a preStop hook running
  `spark.kubernetes.decommission.script` (default `/opt/decom.sh`, shipped in Spark's
  images), which sends SIGPWR to the executor JVM and waits for it to exit: the
  executor stops taking tasks, migrates its blocks if `spark.storage.decommission.*`
  allow it, and leaves; the driver replaces it without counting a failure. Deleting
  the pod with its own grace period (`spark.kubernetes.executor.terminationGracePeriodSeconds`)
  is what runs that hook. A pod without the hook fails the decision (never a silent
  plain restart).
- `cordonNode`: mark the node unschedulable, add the `hangwatch.dev/network-fault`
  NoSchedule taint, the `hangwatch.dev/cordoned=true` label and the
  `hangwatch.dev/cordoned-by`/`-at` annotations. A node
  someone else made unschedulable is left alone (hangwatch must not later uncordon it).
- `uncordonNode`: undo exactly that, only on a node annotated by this policy.

Another controller's node change made between our read and our write must survive.
A cordon is a merge patch of our marks (unschedulable, label, annotations: maps merge
key by key) and a JSON patch appending our taint to the list the API server holds
(`cordon_patch`): neither needs a precondition, so a node another controller rewrites
every few milliseconds is still cordoned at once (only a node with no taint list yet
takes the read's `resourceVersion` as a precondition for the list's first write). An
uncordon is a merge patch replacing the taint list, with the read's `resourceVersion` as
a precondition, retried on a conflict.
"""

from __future__ import annotations

import asyncio
import dataclasses
import random
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from hangwatch_operator.decisions import Decision
from hangwatch_operator.kube_api import KubeApi, KubeApiError
from hangwatch_operator.operations import Operation, Outcome
from hangwatch_operator.watched import (
    CORDONED_AT_ANNOTATION,
    CORDONED_BY_ANNOTATION,
    CORDONED_LABEL,
    NETWORK_FAULT_TAINT,
    format_time,
)

NOT_FOUND = 404
CONFLICT = 409
NODE_PATCH_ATTEMPTS = 5
"""Read-modify-write rounds of a node patch before giving up (the next poll round retries)."""
NODE_PATCH_BACKOFF_SECONDS = 0.05
"""Upper bound of the random pause before the n-th retry, times n (at most 0.5 s in all)."""


class DecommissionUnavailableError(Exception):
    """The executor has no decommission preStop hook (spark.decommission.enabled is off)."""


async def carry_out(
    decision: Decision, api: KubeApi, *, policy_key: str, restart_grace_seconds: int, now: float
) -> Decision:
    """The decision after acting on it: `note` filled, or outcome `failed`."""
    if decision.outcome is not Outcome.ACTED or decision.operation is Operation.ALERT:
        return decision
    try:
        note = await _act(decision, api, policy_key, restart_grace_seconds, now)
    except (KubeApiError, DecommissionUnavailableError) as exc:
        return dataclasses.replace(decision, outcome=Outcome.FAILED, note=str(exc))
    return dataclasses.replace(decision, note=note)


async def _act(
    decision: Decision, api: KubeApi, policy_key: str, grace_seconds: int, now: float
) -> str:
    pod = decision.pod
    if decision.operation is Operation.RESTART and pod is not None:
        return await _delete(api, pod.namespace, pod.name, pod.uid, grace_seconds)
    if decision.operation is Operation.DECOMMISSION and pod is not None:
        if not pod.decommission_hook:
            raise DecommissionUnavailableError(
                "the executor container has no decommission preStop hook; set "
                "spark.decommission.enabled=true (Spark then adds /opt/decom.sh)"
            )
        note = await _delete(api, pod.namespace, pod.name, pod.uid, None)
        return f"{note}; the preStop hook decommissions the executor (SIGPWR)"
    if decision.operation is Operation.CORDON_NODE and decision.node:
        return await cordon(api, decision.node, policy_key, now)
    if decision.operation is Operation.UNCORDON_NODE and decision.node:
        return await uncordon(api, decision.node, policy_key)
    raise KubeApiError(0, f"nothing to {decision.operation} on {decision.target}")


async def _delete(
    api: KubeApi, namespace: str, name: str, uid: str, grace_seconds: int | None
) -> str:
    try:
        await api.delete_pod(namespace, name, uid, grace_seconds)
    except KubeApiError as exc:
        if exc.status == NOT_FOUND:
            return "pod already gone"
        raise
    grace = "its own" if grace_seconds is None else f"a {grace_seconds} s"
    return f"pod deleted with {grace} grace period"


def _other_taints(spec: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The node's taints other than hangwatch's own."""
    return [t for t in spec.get("taints") or () if t.get("key") != NETWORK_FAULT_TAINT["key"]]


@dataclasses.dataclass(frozen=True)
class CordonPatch:
    """A cordon in two writes, neither of which can lose another controller's change."""

    marks: dict[str, Any]
    """Merge patch: unschedulable, our label and annotations (maps merge key by key)."""
    taint: list[dict[str, Any]] | None
    """JSON patch (RFC 6902) adding our taint, or None when the node has it already."""


def cordon_patch(
    body: Mapping[str, Any], policy_key: str, now: float
) -> tuple[CordonPatch | None, str]:
    """How to cordon the node as read in `body`, or None and why it is left alone.

    The marks go first, so a cordon cut short leaves a node annotated as ours (which the
    uncordon and the next cordon recognise), never an anonymous taint. Our taint is
    appended to the taint list as the API server holds it when it applies the patch:
    no precondition, so a node another controller rewrites every few milliseconds is
    cordoned at the first attempt. Only a node with no taint list yet (the patch must
    write the whole list) takes the read's `resourceVersion` as a precondition (409
    when it changed since: read again)."""
    metadata = body.get("metadata") or {}
    annotations = metadata.get("annotations") or {}
    spec = body.get("spec") or {}
    if spec.get("unschedulable") and annotations.get(CORDONED_BY_ANNOTATION) != policy_key:
        return None, "node was already unschedulable (not by hangwatch): left as it is"
    marks: dict[str, Any] = {
        "metadata": {
            "labels": {CORDONED_LABEL: "true"},
            "annotations": {
                CORDONED_BY_ANNOTATION: policy_key,
                CORDONED_AT_ANNOTATION: format_time(now),
            },
        },
        "spec": {"unschedulable": True},
    }
    taints = spec.get("taints")
    taint: list[dict[str, Any]] | None = None
    if not any(t.get("key") == NETWORK_FAULT_TAINT["key"] for t in taints or ()):
        if isinstance(taints, list):
            taint = [{"op": "add", "path": "/spec/taints/-", "value": dict(NETWORK_FAULT_TAINT)}]
        else:
            taint = [{"op": "add", "path": "/spec/taints", "value": [dict(NETWORK_FAULT_TAINT)]}]
            if metadata.get("resourceVersion"):
                taint.insert(
                    0,
                    {
                        "op": "replace",
                        "path": "/metadata/resourceVersion",
                        "value": metadata["resourceVersion"],
                    },
                )
    note = f"node cordoned and tainted {NETWORK_FAULT_TAINT['key']}=true:NoSchedule"
    return CordonPatch(marks, taint), note


async def cordon(api: KubeApi, node: str, policy_key: str, now: float) -> str:
    async def send(name: str, patch: CordonPatch) -> None:
        await api.patch_node(name, patch.marks)
        if patch.taint is not None:
            await api.json_patch_node(name, patch.taint)

    return await _patch_node_guarded(
        api, node, lambda body: cordon_patch(body, policy_key, now), send
    )


async def uncordon(api: KubeApi, node: str, policy_key: str) -> str:
    def change(body: dict[str, Any]) -> tuple[dict[str, Any] | None, str]:
        metadata = body.get("metadata") or {}
        annotations = metadata.get("annotations") or {}
        if annotations.get(CORDONED_BY_ANNOTATION) != policy_key:
            return None, "node is not cordoned by this policy: left as it is"
        spec = body.get("spec") or {}
        taints = _other_taints(spec)
        patch: dict[str, Any] = {
            "metadata": {
                "labels": {CORDONED_LABEL: None},
                "annotations": {CORDONED_BY_ANNOTATION: None, CORDONED_AT_ANNOTATION: None},
            },
            "spec": {"unschedulable": None, "taints": taints or None},
        }
        # a merge patch replaces the taint list whole: the read's version is a precondition
        if metadata.get("resourceVersion"):
            patch["metadata"]["resourceVersion"] = metadata["resourceVersion"]
        return patch, "node uncordoned and untainted"

    return await _patch_node_guarded(api, node, change, api.patch_node)


async def _patch_node_guarded(
    api: KubeApi,
    node: str,
    change: Callable[[dict[str, Any]], tuple[Any | None, str]],
    send: Callable[[str, Any], Awaitable[Any]],
) -> str:
    """Read the node, send the change made from what was read, retry on a conflict (a
    change whose precondition, the read's resourceVersion, no longer holds)."""
    for attempt in range(NODE_PATCH_ATTEMPTS):
        if attempt:  # a busy node: let the other writer finish, jittered
            await asyncio.sleep(random.uniform(0.0, NODE_PATCH_BACKOFF_SECONDS * attempt))
        body = await api.get_node(node)
        patch, note = change(body)
        if patch is None:
            return note
        try:
            await send(node, patch)
        except KubeApiError as exc:
            if exc.status == CONFLICT:
                continue
            raise
        return note
    raise KubeApiError(
        CONFLICT, f"node {node} kept changing under us ({NODE_PATCH_ATTEMPTS} attempts)"
    )
