"""Cordon and uncordon never lose another controller's concurrent node change.

Covers `actuation.cordon` / `actuation.uncordon` against an in-memory API server that
implements what a real one does for a JSON merge patch (the taint list is replaced as a
whole) and a JSON patch (applied to the node as it is then, by the `jsonpatch` library),
with a `metadata.resourceVersion` in the patched node as a precondition (409 Conflict
when the node changed since). Another controller adds taints between hangwatch's read
and its write, once or on several attempts in a row (hypothesis): its taints survive,
hangwatch's taint is there exactly once; a cordon needs no precondition where the node
has a taint list, so a node that changes on every attempt is cordoned at the first; one
with no taint list that changes on every attempt fails the decision with 409 instead of
overwriting, annotated as cordoned by us (the marks go first); an API error other than a conflict
is raised at once. tests/kube proves the same against kube-apiserver.
"""

from __future__ import annotations

import asyncio
import copy
from typing import Any

import jsonpatch
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hangwatch_operator.actuation import NODE_PATCH_ATTEMPTS, cordon, uncordon
from hangwatch_operator.kube_api import KubeApi, KubeApiError
from hangwatch_operator.watched import CORDONED_BY_ANNOTATION, NETWORK_FAULT_TAINT

POLICY = "jobs/writers"


def merge(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge(result.get(key), value)
    return result


class RacingApi:
    """One node; `race(n)` makes another controller add a taint (or, with `label=True`,
    a label) after each of the next n reads (before hangwatch's write). `taints=None`:
    the node has no taint list."""

    def __init__(self, taints: list[dict[str, str]] | None = None) -> None:
        self.node: dict[str, Any] = {
            "metadata": {
                "name": "node-a",
                "resourceVersion": "1",
                "labels": {"kubernetes.io/hostname": "node-a"},
                "annotations": {},
            },
            "spec": {} if taints is None else {"taints": list(taints)},
        }
        self.pending = 0
        self.label = False
        self.added: list[dict[str, str]] = []
        self.patches = 0
        self.json_patches = 0

    def race(self, times: int, label: bool = False) -> None:
        self.pending, self.label = times, label

    def _bump(self) -> None:
        meta = self.node["metadata"]
        meta["resourceVersion"] = str(int(meta["resourceVersion"]) + 1)

    async def get_node(self, name: str) -> dict[str, Any]:
        body = copy.deepcopy(self.node)
        if self.pending:
            self.pending -= 1
            if self.label:
                self.node["metadata"]["labels"][f"other.example/l{self.pending}"] = "x"
            else:
                taint = {"key": f"other.example/t{len(self.added)}", "effect": "NoSchedule"}
                self.added.append(taint)
                self.node["spec"]["taints"] = [*self.node["spec"].get("taints", []), taint]
            self._bump()
        return body

    def _store(self, patched: dict[str, Any]) -> dict[str, Any]:
        if patched["metadata"]["resourceVersion"] != self.node["metadata"]["resourceVersion"]:
            raise KubeApiError(409, "the object has been modified")
        self.node = patched
        self._bump()
        return copy.deepcopy(self.node)

    async def json_patch_node(self, name: str, operations: list[dict[str, Any]]) -> dict[str, Any]:
        self.patches += 1
        self.json_patches += 1
        patched: dict[str, Any] = jsonpatch.apply_patch(self.node, operations)
        return self._store(patched)

    async def patch_node(self, name: str, patch: dict[str, Any]) -> dict[str, Any]:
        self.patches += 1
        return self._store(merge(self.node, patch))


def _taint_keys(api: RacingApi) -> list[str]:
    return [t["key"] for t in api.node["spec"].get("taints") or ()]


def _run(coroutine: Any) -> Any:
    return asyncio.run(coroutine)


def test_a_taint_added_between_read_and_write_survives_cordon() -> None:
    api = RacingApi([{"key": "existing", "effect": "NoExecute"}])
    api.race(1)
    note = _run(cordon(api, "node-a", POLICY, 0.0))  # type: ignore[arg-type]
    assert "cordoned" in note
    assert _taint_keys(api) == ["existing", "other.example/t0", NETWORK_FAULT_TAINT["key"]]
    assert api.node["spec"]["unschedulable"] is True
    assert api.node["metadata"]["annotations"][CORDONED_BY_ANNOTATION] == POLICY


@settings(max_examples=40)
@given(races=st.integers(0, NODE_PATCH_ATTEMPTS - 1), before=st.integers(0, 3))
def test_concurrent_taints_survive_cordon_then_uncordon(races: int, before: int) -> None:
    existing = [{"key": f"pre/{i}", "effect": "NoSchedule"} for i in range(before)]
    api = RacingApi(existing)
    api.race(races)
    _run(cordon(api, "node-a", POLICY, 0.0))  # type: ignore[arg-type]
    others = [t["key"] for t in [*existing, *api.added]]
    assert _taint_keys(api) == [*others, NETWORK_FAULT_TAINT["key"]]
    api.race(races)
    _run(uncordon(api, "node-a", POLICY))  # type: ignore[arg-type]
    assert _taint_keys(api) == [t["key"] for t in [*existing, *api.added]]
    assert "unschedulable" not in api.node["spec"]


def test_a_node_changing_on_every_attempt_is_cordoned_at_the_first() -> None:
    api = RacingApi([{"key": "existing", "effect": "NoExecute"}])
    api.race(NODE_PATCH_ATTEMPTS)
    _run(cordon(api, "node-a", POLICY, 0.0))  # type: ignore[arg-type]
    assert api.json_patches == 1
    assert _taint_keys(api) == ["existing", "other.example/t0", NETWORK_FAULT_TAINT["key"]]


def test_a_node_without_taints_that_gets_one_between_read_and_write_keeps_it() -> None:
    api = RacingApi(None)
    api.race(1)
    _run(cordon(api, "node-a", POLICY, 0.0))  # type: ignore[arg-type]
    assert api.json_patches == 2  # the whole-list write conflicted, the append did not
    assert _taint_keys(api) == ["other.example/t0", NETWORK_FAULT_TAINT["key"]]


def test_a_node_changing_on_every_attempt_fails_instead_of_overwriting() -> None:
    api = RacingApi(None)  # no taint list: the cordon must write the whole field
    api.race(NODE_PATCH_ATTEMPTS, label=True)
    with pytest.raises(KubeApiError) as raised:
        _run(cordon(api, "node-a", POLICY, 0.0))  # type: ignore[arg-type]
    assert raised.value.status == 409
    assert api.json_patches == NODE_PATCH_ATTEMPTS
    assert "taints" not in api.node["spec"]
    assert len(api.node["metadata"]["labels"]) == 2 + NODE_PATCH_ATTEMPTS  # ours kept theirs
    # cut short after the marks: a node annotated as ours (uncordon knows it), no taint
    assert api.node["metadata"]["annotations"][CORDONED_BY_ANNOTATION] == POLICY


def test_other_api_errors_are_not_retried() -> None:
    class Forbidden(RacingApi):
        async def patch_node(self, name: str, patch: dict[str, Any]) -> dict[str, Any]:
            self.patches += 1
            raise KubeApiError(403, "forbidden")

    api = Forbidden()
    with pytest.raises(KubeApiError):
        _run(cordon(api, "node-a", POLICY, 0.0))  # type: ignore[arg-type]
    assert api.patches == 1


def test_the_racing_api_mirrors_the_kube_api_methods_it_stands_in_for() -> None:
    for name in ("get_node", "patch_node", "json_patch_node"):
        assert callable(getattr(KubeApi, name)) and callable(getattr(RacingApi, name))
