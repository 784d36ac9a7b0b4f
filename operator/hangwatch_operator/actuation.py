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

Node changes are read-modify-write with the node's `resourceVersion` as a precondition
(retried on a conflict): the taint list is replaced as a whole, and another
controller's taint added in between must survive.
"""

from __future__ import annotations

import asyncio
import dataclasses
import random
from collections.abc import Callable, Mapping
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


async def cordon(api: KubeApi, node: str, policy_key: str, now: float) -> str:
    def change(body: dict[str, Any]) -> tuple[dict[str, Any] | None, str]:
        annotations = (body.get("metadata") or {}).get("annotations") or {}
        spec = body.get("spec") or {}
        if spec.get("unschedulable") and annotations.get(CORDONED_BY_ANNOTATION) != policy_key:
            return None, "node was already unschedulable (not by hangwatch): left as it is"
        taints = _other_taints(spec)
        ours = {CORDONED_BY_ANNOTATION: policy_key, CORDONED_AT_ANNOTATION: format_time(now)}
        patch: dict[str, Any] = {
            "metadata": {"labels": {CORDONED_LABEL: "true"}, "annotations": ours},
            "spec": {"unschedulable": True, "taints": [*taints, dict(NETWORK_FAULT_TAINT)]},
        }
        return patch, f"node cordoned and tainted {NETWORK_FAULT_TAINT['key']}=true:NoSchedule"

    return await _patch_node_guarded(api, node, change)


async def uncordon(api: KubeApi, node: str, policy_key: str) -> str:
    def change(body: dict[str, Any]) -> tuple[dict[str, Any] | None, str]:
        annotations = (body.get("metadata") or {}).get("annotations") or {}
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
        return patch, "node uncordoned and untainted"

    return await _patch_node_guarded(api, node, change)


async def _patch_node_guarded(
    api: KubeApi,
    node: str,
    change: Callable[[dict[str, Any]], tuple[dict[str, Any] | None, str]],
) -> str:
    """Read the node, patch it only if it is unchanged since (resourceVersion), retry on
    a conflict. A merge patch replaces the whole taint list, so without the precondition
    a taint another controller adds between our read and our write would be lost."""
    for attempt in range(NODE_PATCH_ATTEMPTS):
        if attempt:  # a busy node: let the other writer finish, jittered
            await asyncio.sleep(random.uniform(0.0, NODE_PATCH_BACKOFF_SECONDS * attempt))
        body = await api.get_node(node)
        patch, note = change(body)
        if patch is None:
            return note
        version = (body.get("metadata") or {}).get("resourceVersion")
        if version:
            patch["metadata"]["resourceVersion"] = version
        try:
            await api.patch_node(node, patch)
        except KubeApiError as exc:
            if exc.status == CONFLICT:
                continue
            raise
        return note
    raise KubeApiError(
        CONFLICT, f"node {node} kept changing under us ({NODE_PATCH_ATTEMPTS} attempts)"
    )
