"""The operator's own copy of the pods the webhook labelled, pure: lists and watch events
in, each policy's watched pods out, in O(1) per event.

Fed by `pod_watch` (a list, then a watch, of the pods carrying `hangwatch.dev/policy`,
selected by the API server), read by the remediation daemon in `handlers` through
`pods(namespace, policy)`. It replaces a kopf index: kopf runs a worker per object and,
until every object of an indexed kind is indexed, makes each worker wait on one shared
toggle set that every other worker notifies, so its start-up grows with the square of
the pods (at 5,000 pods the operator did not get through its first list in 120 s).

Only what `watched.watched_pod` keeps of a body is held (a small frozen record per
pod), and only for pods that run or are being deleted (as the kopf index kept them).
Scopes, `resourceVersion`s, `ready`, ERROR 410 and bookmarks follow `policy_store`'s
rules; a pod is keyed by its uid, so a namesake is another pod, and a pod whose label
names another policy moves there. Nothing here does I/O.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from hangwatch_operator.policy_store import Note, Scope, Scopes
from hangwatch_operator.watched import WatchedPod, watched_pod

PolicyKey = tuple[str, str]
"""(namespace, policy name)."""


class PodStore(Scopes):
    """The labelled pods of `scopes`, by policy, kept current by lists and watch events."""

    resource = "pod"

    def __init__(
        self,
        scopes: Iterable[Scope],
        default_port: int,
        in_scope: Callable[[str], bool] | None = None,
    ) -> None:
        super().__init__(scopes, in_scope)
        self.default_port = default_port
        self._by_policy: dict[PolicyKey, dict[str, WatchedPod]] = {}
        self._where: dict[str, PolicyKey] = {}

    def pods(self, namespace: str, policy: str) -> list[WatchedPod]:
        """The pods labelled for `policy` in `namespace` that run or are being deleted."""
        return list(self._by_policy.get((namespace, policy), {}).values())

    def __len__(self) -> int:
        return len(self._where)

    def listed(self, scope: Scope, items: Iterable[Any], resource_version: str) -> list[Note]:
        """Replace what `scope` holds with a complete list taken at `resource_version`."""
        self._check(scope)
        notes: list[Note] = []
        seen: set[str] = set()
        for item in items:
            pod = self._read(scope, item, notes)
            if pod is not None:
                seen.add(pod.uid)
                self._store(pod)
        gone = [
            uid
            for uid, (namespace, _) in self._where.items()
            if uid not in seen and (scope is None or namespace == scope)
        ]
        for uid in gone:
            self._remove(uid)
        self._done_listing(scope, resource_version)
        return notes

    def _changed(self, scope: Scope, kind: str, obj: Mapping[str, Any]) -> list[Note]:
        notes: list[Note] = []
        pod = self._read(scope, obj, notes)
        if pod is not None and kind == "DELETED":
            self._remove(pod.uid)
        elif pod is not None:
            self._store(pod)
        return notes

    def _read(self, scope: Scope, obj: Any, notes: list[Note]) -> WatchedPod | None:
        meta = obj.get("metadata") if isinstance(obj, Mapping) else None
        if not isinstance(meta, Mapping):
            notes.append(self._bad(scope, "no metadata"))
            return None
        namespace, name, uid = meta.get("namespace"), meta.get("name"), meta.get("uid")
        if not all(isinstance(v, str) and v for v in (namespace, name, uid)):
            notes.append(self._bad(scope, "no metadata.namespace, name and uid"))
            return None
        assert isinstance(namespace, str)
        if scope is not None and namespace != scope:
            notes.append(self._bad(scope, "another namespace"))
            return None
        if not self._in_scope(namespace):
            return None
        try:
            return watched_pod(obj, self.default_port)
        except (AttributeError, TypeError, ValueError) as exc:  # a body that is not a pod's
            notes.append(self._bad(scope, f"{namespace}/{name}: unreadable ({type(exc).__name__})"))
            return None

    def _store(self, pod: WatchedPod) -> None:
        if not pod.policy or not (pod.running or pod.terminating):
            self._remove(pod.uid)
            return
        key = (pod.namespace, pod.policy)
        before = self._where.get(pod.uid)
        if before is not None and before != key:
            self._remove(pod.uid)
        self._by_policy.setdefault(key, {})[pod.uid] = pod
        self._where[pod.uid] = key

    def _remove(self, uid: str) -> None:
        key = self._where.pop(uid, None)
        if key is None:
            return
        pods = self._by_policy.get(key, {})
        pods.pop(uid, None)
        if not pods:
            self._by_policy.pop(key, None)
