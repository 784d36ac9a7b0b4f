"""The operator's own copy of the labelled pods, pure: lists and watch events in, each
policy's watched pods out.

Covers `pod_store.PodStore`: a list fills the store (only pods that run or are being
deleted, as the kopf index it replaces kept them) and makes it ready once every scope
is listed; ADDED, MODIFIED and DELETED events keep `pods(namespace, policy)` current
and move the resourceVersion, as does a BOOKMARK; a pod that stops running leaves, one
whose label names another policy moves there; a relist drops what was deleted meanwhile,
only within its own scope; ERROR 410 asks for a relist, other ERRORs are errors; a
namespaced scope refuses pods of another namespace; objects without a namespace, name
or uid are noted as pods, not policies.

Hypothesis: any sequence of creations, changes of phase, policy or deletion, deletions,
bookmarks and relists leaves the store holding exactly the pods a plain model holds;
`apply` never raises for any decoded event.
"""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from hangwatch_operator.injection import POLICY_LABEL
from hangwatch_operator.pod_store import PodStore
from hangwatch_operator.policy_store import NoteKind, WatchEvent

PORT = 9470


def pod(
    name: str,
    *,
    namespace: str = "jobs",
    policy: str = "writers",
    phase: str = "Running",
    deleting: bool = False,
    version: str = "",
    uid: str | None = None,
) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "namespace": namespace,
        "name": name,
        "uid": uid or f"uid-{namespace}-{name}",
        "labels": {POLICY_LABEL: policy, "spark-role": "executor"},
    }
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    if version:
        meta["resourceVersion"] = version
    return {"metadata": meta, "spec": {"containers": []}, "status": {"phase": phase}}


def held(store: PodStore, namespace: str = "jobs", policy: str = "writers") -> list[str]:
    return sorted(p.name for p in store.pods(namespace, policy))


def test_a_list_fills_the_store_with_running_and_terminating_pods_and_makes_it_ready() -> None:
    store = PodStore(["jobs", "etl"], PORT)
    items = [pod("a"), pod("b", phase="Pending"), pod("c", deleting=True), pod("d", phase="Failed")]
    assert store.listed("jobs", items, "10") == []
    assert held(store) == ["a", "c"]
    assert not store.ready
    store.listed("etl", [], "11")
    assert store.ready
    assert store.resource_version("jobs") == "10"
    assert store.pods("jobs", "writers")[0].port == PORT


def test_events_keep_each_policy_current_and_move_the_resource_version() -> None:
    store = PodStore([None], PORT)
    store.listed(None, [pod("a")], "1")
    store.apply(None, WatchEvent("ADDED", pod("b", version="2")))
    assert held(store) == ["a", "b"]
    store.apply(None, WatchEvent("MODIFIED", pod("b", policy="readers", version="3")))
    assert held(store) == ["a"] and held(store, policy="readers") == ["b"]
    store.apply(None, WatchEvent("MODIFIED", pod("a", phase="Succeeded", version="4")))
    assert held(store) == []
    store.apply(None, WatchEvent("DELETED", pod("b", policy="readers", version="5")))
    assert held(store, policy="readers") == [] and len(store) == 0
    store.apply(None, WatchEvent("BOOKMARK", {"metadata": {"resourceVersion": "6"}}))
    assert store.resource_version(None) == "6"


def test_a_relist_drops_pods_deleted_meanwhile_only_in_its_own_scope() -> None:
    store = PodStore(["jobs", "etl"], PORT)
    store.listed("jobs", [pod("a"), pod("b")], "1")
    store.listed("etl", [pod("x", namespace="etl")], "2")
    store.listed("jobs", [pod("b")], "3")
    assert held(store) == ["b"]
    assert held(store, "etl") == ["x"]


def test_errors_gone_and_foreign_objects() -> None:
    store = PodStore(["jobs"], PORT)
    store.listed("jobs", [], "1")
    assert store.apply("jobs", WatchEvent("ERROR", {"code": 410})).gone
    assert "500" in store.apply("jobs", WatchEvent("ERROR", {"code": 500})).error
    other = store.apply("jobs", WatchEvent("ADDED", pod("a", namespace="etl")))
    nameless = store.apply("jobs", WatchEvent("ADDED", {"metadata": {"namespace": "jobs"}}))
    for applied in (other, nameless):
        assert [n.kind for n in applied.notes] == [NoteKind.BAD_OBJECT]
        assert "Ignored a pod object" in applied.notes[0].message()
    assert len(store) == 0


NAMES = st.sampled_from(["a", "b", "c", "d"])
POLICIES = st.sampled_from(["writers", "readers", ""])
PHASES = st.sampled_from(["Running", "Pending", "Succeeded"])
STEPS = st.lists(
    st.one_of(
        st.tuples(st.just("upsert"), NAMES, POLICIES, PHASES, st.booleans()),
        st.tuples(st.just("delete"), NAMES),
        st.tuples(st.just("bookmark")),
        st.tuples(st.just("relist")),
    ),
    max_size=40,
)


@settings(max_examples=200)
@given(STEPS)
def test_any_sequence_of_events_leaves_what_a_plain_model_holds(steps: list[Any]) -> None:
    store = PodStore([None], PORT)
    store.listed(None, [], "0")
    cluster: dict[str, dict[str, Any]] = {}
    for number, step in enumerate(steps, start=1):
        version = str(number)
        if step[0] == "upsert":
            _, name, policy, phase, deleting = step
            body = pod(name, policy=policy, phase=phase, deleting=deleting, version=version)
            kind = "MODIFIED" if name in cluster else "ADDED"
            cluster[name] = body
            store.apply(None, WatchEvent(kind, body))
        elif step[0] == "delete" and step[1] in cluster:
            store.apply(None, WatchEvent("DELETED", cluster.pop(step[1])))
        elif step[0] == "bookmark":
            store.apply(None, WatchEvent("BOOKMARK", {"metadata": {"resourceVersion": version}}))
        elif step[0] == "relist":
            store.listed(None, list(cluster.values()), version)
    expected: dict[str, list[str]] = {}
    for name, body in cluster.items():
        labels, status = body["metadata"]["labels"], body["status"]
        watched = status["phase"] == "Running" or "deletionTimestamp" in body["metadata"]
        if labels[POLICY_LABEL] and watched:
            expected.setdefault(labels[POLICY_LABEL], []).append(name)
    for policy in ("writers", "readers"):
        assert held(store, policy=policy) == sorted(expected.get(policy, []))
    assert len(store) == sum(len(v) for v in expected.values())


@settings(max_examples=300)
@given(
    st.text(max_size=10),
    st.dictionaries(
        st.sampled_from(["metadata", "spec", "status", "code", "reason"]),
        st.recursive(
            st.none() | st.integers() | st.text(max_size=5),
            lambda inner: (
                st.lists(inner, max_size=3)
                | st.dictionaries(st.sampled_from(["namespace", "name", "uid", "labels"]), inner)
            ),
            max_leaves=8,
        ),
    ),
)
def test_apply_never_raises_for_any_event(kind: str, obj: dict[str, Any]) -> None:
    store = PodStore([None], PORT)
    store.listed(None, [], "0")
    store.apply(None, WatchEvent(kind, obj))
