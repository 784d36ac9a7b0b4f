"""The webhook's own copy of the policies, pure: lists and watch events in, policies out.

Covers `policy_store`: a list fills the store and makes it ready only once every scope
is listed; ADDED, MODIFIED and DELETED events keep `by_namespace` current and each
moves the scope's resourceVersion, as does a BOOKMARK (which changes nothing else);
a status update (same generation) is neither re-parsed nor reported; an invalid policy
is reported once per generation, left out, and taken in once a new generation is
valid; ERROR 410 (and reason Expired) asks for a relist, other ERROR events are errors,
unknown types and objects without a name are noted and skipped; a relist drops what
was deleted meanwhile and only within its own scope (one namespace of several); a
policy being deleted (deletionTimestamp, finalizers pending) injects no more; a
namespaced scope refuses objects of another namespace and `in_scope` filters a
cluster-wide one; notes read as one log line each. `backoff_seconds` starts at 0.25-0.5 s,
doubles, never exceeds 30 s, for any failure count and any jitter (NaN included).
`policy_watch.watch_plan`: cluster-wide with no namespaces, one scope per named
namespace, a filtered cluster-wide watch for kopf patterns (kopf's own matching).

Hypothesis: any sequence of creations, spec changes (valid or not), status updates,
deletions, bookmarks and relists leaves the store holding exactly the valid policies
a plain model holds, at the last resourceVersion; `decode_event` never raises for any
bytes and `apply` never raises for any decoded event.
"""

from __future__ import annotations

import copy
import json
import math
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hangwatch_operator.policy_store import (
    BACKOFF_MAX_SECONDS,
    Note,
    NoteKind,
    PolicyStore,
    WatchEvent,
    backoff_seconds,
    decode_event,
)
from hangwatch_operator.policy_watch import WatchPlan, watch_plan
from tests.operator.webhook_server import POLICY_OF, inline_policy, stored

POLICY_BODY = POLICY_OF["spark-jobs"][0]
TOO_SMALL = {"resources": {"requests": {"memory": "256Mi"}, "limits": {"memory": "128Mi"}}}


def body(
    namespace: str,
    name: str,
    *,
    generation: int = 1,
    uid: str | None = None,
    valid: bool = True,
    version: str = "",
) -> dict[str, Any]:
    """A policy as the API server sends it (defaults applied, uid, generation, version)."""
    spec: dict[str, Any] = {} if valid else {"sidecar": TOO_SMALL}
    policy = stored(inline_policy(namespace, name, **spec))
    meta = policy["metadata"]
    meta["generation"] = generation
    meta["uid"] = uid or f"uid-{namespace}-{name}"
    if version:
        meta["resourceVersion"] = version
    return policy


def event(kind: str, obj: dict[str, Any]) -> WatchEvent:
    return WatchEvent(kind, obj)


def names(store: PolicyStore) -> dict[str, list[str]]:
    return {ns: sorted(p.name for p in policies) for ns, policies in store.by_namespace.items()}


def kinds(notes: list[Note] | tuple[Note, ...]) -> list[tuple[NoteKind, str]]:
    return [(note.kind, note.policy) for note in notes]


def test_a_list_fills_the_store_and_readiness_waits_for_every_scope() -> None:
    store = PolicyStore(["a", "b"])
    assert not store.ready and store.resource_version("a") is None
    notes = store.listed("a", [body("a", "one"), body("a", "two")], "10")
    assert kinds(notes) == [(NoteKind.LOADED, "a/one"), (NoteKind.LOADED, "a/two")]
    assert not store.ready and store.listed_once("a") and not store.listed_once("b")
    store.listed("b", [], "11")
    assert store.ready
    assert names(store) == {"a": ["one", "two"]}
    assert (store.resource_version("a"), store.resource_version("b")) == ("10", "11")
    with pytest.raises(KeyError):
        store.listed("c", [], "1")
    with pytest.raises(ValueError, match="at least one scope"):
        PolicyStore([])


def test_events_keep_the_store_current_and_move_the_resource_version() -> None:
    store = PolicyStore([None])
    store.listed(None, [body("a", "one")], "5")
    applied = store.apply(None, event("ADDED", body("b", "two", version="6")))
    assert kinds(applied.notes) == [(NoteKind.LOADED, "b/two")]
    assert names(store) == {"a": ["one"], "b": ["two"]} and store.resource_version(None) == "6"
    changed = store.apply(None, event("MODIFIED", body("b", "two", generation=2, version="7")))
    assert kinds(changed.notes) == [(NoteKind.CHANGED, "b/two")]
    assert changed.notes[0].message() == "Policy b/two (generation 2) changed for injection."
    bookmark = store.apply(None, event("BOOKMARK", {"metadata": {"resourceVersion": "9"}}))
    assert bookmark.notes == () and store.resource_version(None) == "9"
    deleted = store.apply(None, event("DELETED", body("a", "one", version="10")))
    assert kinds(deleted.notes) == [(NoteKind.REMOVED, "a/one")]
    assert deleted.notes[0].message() == "Policy a/one removed for injection."
    assert names(store) == {"b": ["two"]} and store.resource_version(None) == "10"
    assert store.apply(None, event("DELETED", body("a", "one"))).notes == ()  # gone already
    assert store.valid_count() == 1


def test_a_status_update_is_neither_parsed_again_nor_reported() -> None:
    store = PolicyStore([None])
    store.listed(None, [body("a", "one")], "1")
    (before,) = store.by_namespace["a"]
    update = body("a", "one", version="2")
    update["status"] = {"watched": 3}
    assert store.apply(None, event("MODIFIED", update)).notes == ()
    (after,) = store.by_namespace["a"]
    assert after is before and store.resource_version(None) == "2"


def test_an_invalid_policy_is_reported_once_per_generation_and_left_out() -> None:
    store = PolicyStore([None])
    first = store.apply(None, event("ADDED", body("a", "bad", valid=False)))
    (note,) = first.notes
    assert note.kind is NoteKind.INVALID and note.warning
    assert note.message() == (
        "Invalid ProducerHealthPolicy a/bad (generation 1): spec.sidecar.resources.requests."
        "memory (256Mi) exceeds the limit (128Mi); its pods are not injected."
    )
    assert names(store) == {}
    status_only = body("a", "bad", valid=False)
    status_only["status"] = {"conditions": []}
    assert store.apply(None, event("MODIFIED", status_only)).notes == ()
    fixed = store.apply(None, event("MODIFIED", body("a", "bad", generation=2)))
    assert kinds(fixed.notes) == [(NoteKind.CHANGED, "a/bad")]
    assert names(store) == {"a": ["bad"]}


def test_an_unreadable_spec_is_an_invalid_policy_not_a_stopped_watch() -> None:
    store = PolicyStore([None])
    broken = body("a", "odd")
    broken["spec"] = ["not", "an", "object"]
    (note,) = store.apply(None, event("ADDED", broken)).notes
    assert note.kind is NoteKind.INVALID and names(store) == {}


def test_error_events_ask_for_a_relist_on_410_and_are_errors_otherwise() -> None:
    store = PolicyStore([None])
    store.listed(None, [], "1")
    gone = {"kind": "Status", "code": 410, "reason": "Expired", "message": "too old"}
    assert store.apply(None, event("ERROR", gone)).gone
    assert store.apply(None, event("ERROR", {"reason": "Expired"})).gone
    failed = store.apply(None, event("ERROR", {"code": 500, "message": "etcd is sad"}))
    assert not failed.gone and failed.error == "watch error 500: etcd is sad"
    assert store.apply(None, event("ERROR", {"code": 503})).error == "watch error 503: no message"
    assert store.resource_version(None) == "1"


def test_unknown_events_and_objects_without_a_name_are_noted_and_skipped() -> None:
    store = PolicyStore([None])
    store.listed(None, [{"metadata": {"name": "x"}}, "not an object"], "1")
    (note,) = store.apply(None, event("RENAMED", body("a", "one"))).notes
    assert note.kind is NoteKind.BAD_OBJECT and "'RENAMED'" in note.message()
    (note,) = store.apply(None, event("ADDED", {"metadata": {"namespace": "a"}})).notes
    assert note.message() == (
        "Ignored a policy object or event (all namespaces): no metadata.namespace and "
        "metadata.name."
    )
    assert names(store) == {}


def test_a_relist_drops_what_was_deleted_meanwhile_only_in_its_own_scope() -> None:
    store = PolicyStore(["a", "b"])
    store.listed("a", [body("a", "one"), body("a", "two")], "1")
    store.listed("b", [body("b", "three")], "2")
    notes = store.listed("a", [body("a", "two"), body("a", "four")], "7")
    assert sorted(kinds(notes)) == [(NoteKind.LOADED, "a/four"), (NoteKind.REMOVED, "a/one")]
    assert names(store) == {"a": ["four", "two"], "b": ["three"]}
    assert store.resource_version("a") == "7" and store.resource_version("b") == "2"


def test_a_namespace_scope_refuses_other_namespaces_and_in_scope_filters() -> None:
    store = PolicyStore(["a"])
    notes = store.listed("a", [body("b", "intruder")], "1")
    assert [note.problem for note in notes] == ["another namespace"] and names(store) == {}
    filtered = PolicyStore([None], in_scope=lambda namespace: namespace.startswith("team-"))
    filtered.listed(None, [body("team-x", "one"), body("other", "two")], "1")
    assert filtered.apply(None, event("ADDED", body("other", "three"))).notes == ()
    assert names(filtered) == {"team-x": ["one"]}


def test_a_policy_being_deleted_injects_no_more() -> None:
    store = PolicyStore([None])
    store.listed(None, [body("a", "one")], "1")
    finalizing = body("a", "one", version="2")
    finalizing["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    assert kinds(store.apply(None, event("MODIFIED", finalizing)).notes) == [
        (NoteKind.REMOVED, "a/one")
    ]
    assert names(store) == {}
    assert store.apply(None, event("DELETED", finalizing)).notes == ()
    assert kinds(store.listed(None, [finalizing], "3")) == []


def test_a_recreated_policy_with_a_new_uid_is_a_change() -> None:
    store = PolicyStore([None])
    store.listed(None, [body("a", "one", uid="old")], "1")
    notes = store.listed(None, [body("a", "one", uid="new")], "2")
    assert kinds(notes) == [(NoteKind.CHANGED, "a/one")]


# --- backoff and the watch plan --------------------------------------------------------


def test_backoff_doubles_from_half_a_second_up_to_thirty() -> None:
    assert [backoff_seconds(n, 1.0) for n in range(1, 9)] == [0.5, 1, 2, 4, 8, 16, 30, 30]
    assert backoff_seconds(1, 0.0) == 0.25 and backoff_seconds(0, 1.0) == 0.5


@given(
    failures=st.integers(min_value=-(2**64), max_value=2**64),
    jitter=st.floats(allow_nan=True, allow_infinity=True),
)
def test_backoff_is_bounded_for_any_count_and_jitter(failures: int, jitter: float) -> None:
    wait = backoff_seconds(failures, jitter)
    assert math.isfinite(wait) and 0.25 <= wait <= BACKOFF_MAX_SECONDS
    assert backoff_seconds(failures + 1, jitter) >= wait


def test_the_watch_plan_follows_the_operators_namespaces() -> None:
    assert watch_plan([]) == WatchPlan((None,))
    assert watch_plan(["b", "a", "a"]) == WatchPlan(("a", "b"))
    patterns = watch_plan(["team-*,!team-test", "ops"])
    assert patterns.scopes == (None,)
    assert [ns for ns in ["team-x", "team-test", "ops", "other"] if patterns.in_scope(ns)] == [
        "team-x",
        "ops",
    ]
    assert WatchPlan((None,)).describe() == "all namespaces"
    assert WatchPlan(("a", "b")).describe() == "namespaces a, b"


# --- properties --------------------------------------------------------------------------

NAMESPACES = ("a", "b")
NAMES = ("one", "two", "three")
steps = st.lists(
    st.one_of(
        st.tuples(
            st.just("put"), st.sampled_from(NAMESPACES), st.sampled_from(NAMES), st.booleans()
        ),
        st.tuples(st.just("status"), st.sampled_from(NAMESPACES), st.sampled_from(NAMES)),
        st.tuples(st.just("delete"), st.sampled_from(NAMESPACES), st.sampled_from(NAMES)),
        st.tuples(st.just("bookmark")),
        st.tuples(st.just("relist")),
    ),
    max_size=30,
)


@settings(max_examples=60)
@given(steps=steps)
def test_any_sequence_of_events_leaves_exactly_the_valid_policies(
    steps: list[tuple[Any, ...]],
) -> None:
    store = PolicyStore([None])
    store.listed(None, [], "0")
    model: dict[tuple[str, str], tuple[dict[str, Any], bool]] = {}
    generations: dict[tuple[str, str], int] = {}
    recreations: dict[tuple[str, str], int] = {}
    for number, step in enumerate(steps, start=1):
        version = str(number)
        key = (step[1], step[2]) if len(step) > 2 else ("", "")
        if step[0] == "put":
            valid = step[3]
            kind = "MODIFIED" if key in model else "ADDED"
            generations[key] = generations.get(key, 0) + 1
            uid = f"{key[0]}-{key[1]}-{recreations.get(key, 0)}"
            policy = body(*key, generation=generations[key], uid=uid, valid=valid, version=version)
            model[key] = (policy, valid)
            store.apply(None, event(kind, policy))
        elif step[0] == "status" and key in model:
            updated = copy.deepcopy(model[key][0])
            updated["metadata"]["resourceVersion"] = version
            updated["status"] = {"watched": number}
            assert store.apply(None, event("MODIFIED", updated)).notes == ()
        elif step[0] == "delete" and key in model:
            gone = copy.deepcopy(model.pop(key)[0])
            gone["metadata"]["resourceVersion"] = version  # a deletion is a new version
            recreations[key] = recreations.get(key, 0) + 1
            store.apply(None, event("DELETED", gone))
        elif step[0] == "bookmark":
            store.apply(None, event("BOOKMARK", {"metadata": {"resourceVersion": version}}))
        elif step[0] == "relist":
            store.listed(None, [policy for policy, _ in model.values()], version)
        else:
            continue
        expected: dict[str, list[str]] = {}
        for (namespace, name), (_, valid) in sorted(model.items()):
            if valid:
                expected.setdefault(namespace, []).append(name)
        assert names(store) == expected
        assert store.resource_version(None) == version


@settings(max_examples=300)
@given(line=st.binary(max_size=300))
def test_decode_event_never_raises_on_any_bytes(line: bytes) -> None:
    decoded = decode_event(line)
    assert isinstance(decoded, WatchEvent | str)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner),
    max_leaves=12,
)


@settings(max_examples=300)
@given(
    kind=st.sampled_from(["ADDED", "MODIFIED", "DELETED", "BOOKMARK", "ERROR", "X"]),
    obj=st.dictionaries(
        st.sampled_from(["metadata", "spec", "code", "message", "reason"]), json_values
    ),
)
def test_apply_never_raises_on_any_event(kind: str, obj: dict[str, Any]) -> None:
    store = PolicyStore([None])
    store.listed(None, [], "1")
    decoded = decode_event(json.dumps({"type": kind, "object": obj}).encode())
    assert isinstance(decoded, WatchEvent)
    applied = store.apply(None, decoded)
    assert all(isinstance(note.message(), str) for note in applied.notes)
