"""Cordon and uncordon never lose another controller's concurrent node change.

Covers `actuation.cordon` / `actuation.uncordon` against an in-memory API server that
implements what a real one does for a JSON merge patch: the taint list is replaced as a
whole, and a `metadata.resourceVersion` in the patch is a precondition (409 Conflict
when the node changed since). Another controller adds taints between hangwatch's read
and its write, once or on several attempts in a row (hypothesis): its taints survive,
hangwatch's taint is there exactly once; a node that changes on every attempt fails the
decision with 409 instead of overwriting; an API error other than a conflict is raised
at once. tests/kube proves the same against kube-apiserver.
"""

from __future__ import annotations

import asyncio
import copy
from typing import Any

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
    """One node; `race(n)` makes another controller add a taint after each of the next n
    reads (before hangwatch's write)."""

    def __init__(self, taints: list[dict[str, str]] | None = None) -> None:
        self.node: dict[str, Any] = {
            "metadata": {"name": "node-a", "resourceVersion": "1", "annotations": {}},
            "spec": {"taints": list(taints or [])},
        }
        self.pending = 0
        self.added: list[dict[str, str]] = []
        self.patches = 0

    def race(self, times: int) -> None:
        self.pending = times

    def _bump(self) -> None:
        meta = self.node["metadata"]
        meta["resourceVersion"] = str(int(meta["resourceVersion"]) + 1)

    async def get_node(self, name: str) -> dict[str, Any]:
        body = copy.deepcopy(self.node)
        if self.pending:
            self.pending -= 1
            taint = {"key": f"other.example/t{len(self.added)}", "effect": "NoSchedule"}
            self.added.append(taint)
            self.node["spec"]["taints"] = [*self.node["spec"].get("taints", []), taint]
            self._bump()
        return body

    async def patch_node(self, name: str, patch: dict[str, Any]) -> dict[str, Any]:
        self.patches += 1
        wanted = (patch.get("metadata") or {}).get("resourceVersion")
        if wanted is not None and wanted != self.node["metadata"]["resourceVersion"]:
            raise KubeApiError(409, "the object has been modified")
        patch = copy.deepcopy(patch)
        patch.get("metadata", {}).pop("resourceVersion", None)
        self.node = merge(self.node, patch)
        self._bump()
        return copy.deepcopy(self.node)


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


@settings(max_examples=40, deadline=None)
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


def test_a_node_changing_on_every_attempt_fails_instead_of_overwriting() -> None:
    api = RacingApi()
    api.race(NODE_PATCH_ATTEMPTS)
    with pytest.raises(KubeApiError) as raised:
        _run(cordon(api, "node-a", POLICY, 0.0))  # type: ignore[arg-type]
    assert raised.value.status == 409
    assert api.patches == NODE_PATCH_ATTEMPTS
    assert NETWORK_FAULT_TAINT["key"] not in _taint_keys(api)
    assert len(api.added) == NODE_PATCH_ATTEMPTS


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
    for name in ("get_node", "patch_node"):
        assert callable(getattr(KubeApi, name)) and callable(getattr(RacingApi, name))
