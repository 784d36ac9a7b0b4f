"""The webhook's own copy of the ProducerHealthPolicies, pure: lists and watch events in,
the valid policies of each namespace out.

Fed by `policy_watch`, which lists and watches the policies with the Kubernetes client
at start-up, outside kopf's handlers: kopf peering pauses every handler and freezes
every index of a standby replica, yet every replica serves admission, so the policies
the webhook decides with must come from a source peering does not pause. Read by
`webhook.Injector` through `PolicyStore.by_namespace` (namespace -> its valid policies).

A store follows one or more *scopes*: a namespace, or `None` for all namespaces (then
`in_scope` keeps only the namespaces the operator serves). Each scope has its own
`resourceVersion` (opaque: stored and sent back, never compared). `listed` replaces a
scope's content with a complete list; `apply` applies one watch event in order:
ADDED and MODIFIED store the object (one being deleted, with a deletionTimestamp
while finalizers run, is dropped: pods injected for it would go unwatched), DELETED
drops it, BOOKMARK only moves the
`resourceVersion`, ERROR 410 (Gone) says the version is too old and the scope must be
listed again. Until every scope has been listed once the store is not `ready`.

Each policy is parsed once per generation: the remediation daemon writes a policy's
status every round, which changes its resourceVersion but not its generation, and an
event with the uid and generation the store holds changes nothing. Invalid specs are
remembered and reported once per generation. What
happened is returned as `Note`s for the caller to log; nothing here does I/O.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from hangwatch_operator.policies import InvalidPolicyError, Policy, parse_policy

GONE = 410
"""HTTP status of a watch or list whose resourceVersion is too old: list again."""
BACKOFF_FIRST_SECONDS = 0.5
"""Wait after the first failure in a row (then doubled per failure)."""
BACKOFF_MAX_SECONDS = 30.0
"""Longest wait between tries: a policy created during an outage is picked up at most
this long after the API server answers again."""

Scope = str | None
"""A namespace, or None: every namespace (filtered by the store's `in_scope`)."""


class NoteKind(StrEnum):
    LOADED = "loaded"
    """A policy this store did not hold (new, or first seen by a list)."""
    CHANGED = "changed"
    """A policy whose spec changed (another generation or uid)."""
    REMOVED = "removed"
    """A policy that was deleted (or is missing from a new list)."""
    INVALID = "invalid"
    """A policy whose spec is invalid: its pods are not injected."""
    BAD_OBJECT = "bad_object"
    """An object or event that is not a readable policy (left out)."""


@dataclass(frozen=True)
class Note:
    """Something a list or event changed, for the caller's log."""

    kind: NoteKind
    policy: str
    """`namespace/name`, or where the bad object came from."""
    generation: int | None = None
    problem: str = ""
    resource: str = "policy"
    """What kind of object a BAD_OBJECT note is about (`pod_store` uses this note too)."""

    @property
    def warning(self) -> bool:
        return self.kind in (NoteKind.INVALID, NoteKind.BAD_OBJECT)

    def message(self) -> str:
        generation = "" if self.generation is None else f" (generation {self.generation})"
        if self.kind is NoteKind.INVALID:
            return (
                f"Invalid ProducerHealthPolicy {self.policy}{generation}: {self.problem}; "
                "its pods are not injected."
            )
        if self.kind is NoteKind.BAD_OBJECT:
            return f"Ignored a {self.resource} object or event ({self.policy}): {self.problem}."
        verb = {
            NoteKind.LOADED: "loaded",
            NoteKind.CHANGED: "changed",
            NoteKind.REMOVED: "removed",
        }[self.kind]
        return f"Policy {self.policy}{generation} {verb} for injection."


@dataclass(frozen=True)
class WatchEvent:
    """One line of a watch stream: its type and object (a policy, or a Status)."""

    type: str
    object: Mapping[str, Any]


@dataclass(frozen=True)
class Applied:
    """What applying one watch event means for the watch."""

    notes: tuple[Note, ...] = ()
    gone: bool = False
    """The scope's resourceVersion is too old (410): list again."""
    error: str = ""
    """An ERROR event other than 410: back off, then watch again."""


@dataclass(frozen=True)
class _Entry:
    uid: str | None
    generation: int | None
    parsed: Policy | InvalidPolicyError


def decode_event(line: bytes) -> WatchEvent | str:
    """One line of a watch stream as an event, or what makes it unreadable (never raises)."""
    try:
        document = json.loads(line)
    except (ValueError, RecursionError):
        return "a watch line that is not JSON"
    if not isinstance(document, dict):
        return "a watch line that is not a JSON object"
    kind, obj = document.get("type"), document.get("object")
    if not isinstance(kind, str) or not isinstance(obj, dict):
        return "a watch event without a type or an object"
    return WatchEvent(kind, obj)


def backoff_seconds(failures: int, jitter: float) -> float:
    """Seconds to wait after `failures` failures in a row: 0.5 s doubled per failure, at
    most 30 s, times a factor from 0.5 to 1 (`jitter` in [0, 1]) so that replicas
    restarted together do not retry in step."""
    exponent = min(max(failures, 1) - 1, 16)
    base = min(BACKOFF_MAX_SECONDS, BACKOFF_FIRST_SECONDS * 2.0**exponent)
    factor = jitter if 0.0 <= jitter <= 1.0 else 1.0  # NaN too
    return base * (0.5 + 0.5 * factor)


class Scopes:
    """The bookkeeping every store of a list and watch shares (`PolicyStore`,
    `pod_store.PodStore`): its scopes, each one's resourceVersion, which are listed."""

    resource = "object"
    """What the store holds, for notes about objects it could not read."""

    def __init__(self, scopes: Iterable[Scope], in_scope: Callable[[str], bool] | None) -> None:
        self.scopes: tuple[Scope, ...] = tuple(dict.fromkeys(scopes))
        if not self.scopes:
            raise ValueError(f"a {self.resource} store needs at least one scope")
        self._in_scope = in_scope or (lambda _namespace: True)
        self._versions: dict[Scope, str | None] = dict.fromkeys(self.scopes)
        self._listed: set[Scope] = set()

    @property
    def ready(self) -> bool:
        """Every scope has been listed at least once."""
        return len(self._listed) == len(self.scopes)

    def listed_once(self, scope: Scope) -> bool:
        return scope in self._listed

    def resource_version(self, scope: Scope) -> str | None:
        """Where a watch of `scope` resumes (None: not listed yet)."""
        return self._versions[scope]

    def _check(self, scope: Scope) -> None:
        if scope not in self._versions:
            raise KeyError(f"not a scope of this store: {scope!r}")

    def _done_listing(self, scope: Scope, resource_version: str) -> None:
        self._versions[scope] = resource_version
        self._listed.add(scope)

    def apply(self, scope: Scope, event: WatchEvent) -> Applied:
        """Apply one watch event of `scope` (events arrive in order): ERROR 410 asks for a
        relist, another ERROR is an error, ADDED, MODIFIED and DELETED go to `_changed`,
        and every event with a resourceVersion (BOOKMARK too) moves the scope on to it."""
        self._check(scope)
        kind, obj = event.type, event.object
        if kind == "ERROR":
            code = obj.get("code")
            if code == GONE or obj.get("reason") in ("Expired", "Gone"):
                return Applied(gone=True)
            message = obj.get("message")
            detail = message if isinstance(message, str) else "no message"
            return Applied(error=f"watch error {code}: {detail[:200]}")
        if kind not in ("ADDED", "MODIFIED", "DELETED", "BOOKMARK"):
            return Applied((self._bad(scope, f"event type {kind[:40]!r}"),))
        notes = [] if kind == "BOOKMARK" else self._changed(scope, kind, obj)
        meta = obj.get("metadata")
        version = meta.get("resourceVersion") if isinstance(meta, dict) else None
        if isinstance(version, str) and version:
            self._versions[scope] = version
        return Applied(tuple(notes))

    def _changed(self, scope: Scope, kind: str, obj: Mapping[str, Any]) -> list[Note]:
        """Apply an ADDED, MODIFIED or DELETED event's object; what to note."""
        raise NotImplementedError

    def _bad(self, scope: Scope, problem: str) -> Note:
        return Note(
            NoteKind.BAD_OBJECT, describe_scope(scope), problem=problem, resource=self.resource
        )


class PolicyStore(Scopes):
    """The policies of `scopes`, kept current by lists and watch events (see module)."""

    resource = "policy"

    def __init__(
        self,
        scopes: Iterable[Scope],
        in_scope: Callable[[str], bool] | None = None,
    ) -> None:
        super().__init__(scopes, in_scope)
        self._entries: dict[str, dict[str, _Entry]] = {}
        self._valid: dict[str, tuple[Policy, ...]] = {}

    @property
    def by_namespace(self) -> Mapping[str, tuple[Policy, ...]]:
        """namespace -> its valid policies; a live view, updated in place."""
        return self._valid

    def valid_count(self) -> int:
        return sum(len(policies) for policies in self._valid.values())

    def listed(self, scope: Scope, items: Iterable[Any], resource_version: str) -> list[Note]:
        """Replace everything `scope` holds with a complete list taken at `resource_version`."""
        self._check(scope)
        notes: list[Note] = []
        fresh: dict[str, dict[str, Mapping[str, Any]]] = {}
        for item in items:
            key = self._key(scope, item, notes)
            if key is not None:
                fresh.setdefault(key[0], {})[key[1]] = item
        held = self._entries if scope is None else {scope: self._entries.get(scope, {})}
        for namespace, entries in list(held.items()):
            for name in list(entries):
                if name not in fresh.get(namespace, {}):
                    notes.extend(self._remove(namespace, name))
        for namespace, objects in fresh.items():
            for name, body in objects.items():
                notes.extend(self._store(namespace, name, body))
        self._done_listing(scope, resource_version)
        return notes

    def _changed(self, scope: Scope, kind: str, obj: Mapping[str, Any]) -> list[Note]:
        notes: list[Note] = []
        key = self._key(scope, obj, notes)
        if key is not None:
            namespace, name = key
            if kind == "DELETED":
                notes.extend(self._remove(namespace, name))
            else:
                notes.extend(self._store(namespace, name, obj))
        return notes

    def _key(self, scope: Scope, obj: Any, notes: list[Note]) -> tuple[str, str] | None:
        """(namespace, name) of a policy object of `scope`, or None (noted if unreadable)."""
        meta = obj.get("metadata") if isinstance(obj, dict) else None
        namespace = meta.get("namespace") if isinstance(meta, dict) else None
        name = meta.get("name") if isinstance(meta, dict) else None
        if not isinstance(namespace, str) or not namespace or not isinstance(name, str) or not name:
            notes.append(self._bad(scope, "no metadata.namespace and metadata.name"))
            return None
        if scope is not None and namespace != scope:
            notes.append(self._bad(scope, "another namespace"))
            return None
        if not self._in_scope(namespace):
            return None
        return namespace, name

    def _store(self, namespace: str, name: str, body: Mapping[str, Any]) -> list[Note]:
        meta = body["metadata"]
        if meta.get("deletionTimestamp"):  # being deleted: new pods would go unwatched
            return self._remove(namespace, name)
        uid = meta.get("uid") if isinstance(meta.get("uid"), str) else None
        raw_generation = meta.get("generation")
        generation = raw_generation if isinstance(raw_generation, int) else None
        entries = self._entries.setdefault(namespace, {})
        previous = entries.get(name)
        if (
            previous is not None
            and generation is not None
            and (previous.uid, previous.generation) == (uid, generation)
        ):
            return []  # a status update: the spec this store parsed is unchanged
        try:
            parsed: Policy | InvalidPolicyError = parse_policy(body)
        except InvalidPolicyError as exc:
            parsed = exc
        except Exception as exc:  # noqa: BLE001 - one unreadable object must not stop the watch
            parsed = InvalidPolicyError(f"unreadable spec ({type(exc).__name__})")
        entries[name] = _Entry(uid, generation, parsed)
        self._refresh(namespace)
        policy = f"{namespace}/{name}"
        if isinstance(parsed, InvalidPolicyError):
            return [Note(NoteKind.INVALID, policy, generation, str(parsed))]
        kind = NoteKind.LOADED if previous is None else NoteKind.CHANGED
        return [Note(kind, policy, generation)]

    def _remove(self, namespace: str, name: str) -> list[Note]:
        entries = self._entries.get(namespace, {})
        if entries.pop(name, None) is None:
            return []
        if not entries:
            self._entries.pop(namespace, None)
        self._refresh(namespace)
        return [Note(NoteKind.REMOVED, f"{namespace}/{name}")]

    def _refresh(self, namespace: str) -> None:
        valid = tuple(
            entry.parsed
            for entry in self._entries.get(namespace, {}).values()
            if isinstance(entry.parsed, Policy)
        )
        if valid:
            self._valid[namespace] = valid
        else:
            self._valid.pop(namespace, None)


def describe_scope(scope: Scope) -> str:
    """`all namespaces` or `namespace NAME`, for log lines."""
    return "all namespaces" if scope is None else f"namespace {scope}"
