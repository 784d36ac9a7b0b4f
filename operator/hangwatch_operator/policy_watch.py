"""The webhook's own list and watch of ProducerHealthPolicies, which kopf peering never pauses.

Started by `webhook.configure` at start-up as a plain asyncio task, outside kopf's
handlers: kopf pauses every handler and freezes every index of a replica that is not
leading, yet every replica serves admission (the webhook Service sends each its share),
so the policies the webhook decides with must not come from kopf. Each replica,
leader or standby, lists the policies and then follows them with a watch
(`KubeApi.list_policies`, `KubeApi.watch_policies`) into a `policy_store.PolicyStore`,
whose `by_namespace` the webhook's `Injector` reads.

One list and watch per scope (`watch_plan`): cluster-wide when the operator serves
every namespace; one per namespace when it serves named namespaces (the chart's
`operator.watch.namespaces`, whose Roles grant list and watch per namespace); with
kopf namespace patterns (globs, `!` exclusions), one cluster-wide watch filtered with
kopf's own pattern rules, which needs list and watch on policies cluster-wide.

The bookkeeping is Kubernetes' usual: a paginated list gives the resourceVersion the
watch starts from; every event and bookmark moves it on; a watch ends after a random
240-360 s (server-side timeout) and resumes from where it was; 410 Gone (as an ERROR
event or as the watch's status) lists again, keeping the old content until the new
list replaces it. Errors (no answer, 403, 500, a broken stream) are logged and retried
after a bounded, jittered backoff (`policy_store.backoff_seconds`: 0.5 s doubling to
30 s); the copy the webhook reads stays as it was meanwhile. `ready` is set once every
scope has been listed: the webhook does not listen before that, so a replica that has
not loaded the policies is not ready (the chart's readiness probe connects to the
webhook port) and never admits a pod without knowing its policy.

The loop is `ListWatch`, for any kind whose store follows these rules: `PolicyWatch` for
the webhook's policies, `pod_watch.PodWatch` for the pods remediation watches.

Metrics: `hangwatch_operator_webhook_policies` (valid policies this replica injects
for) and `hangwatch_operator_webhook_policy_watch_up` (0 while a list or watch fails).
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import logging
import random
import time
from collections.abc import AsyncGenerator, Callable, Coroutine, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

from kopf._cogs.structs.references import (
    NamespaceName,
    match_namespace,
    select_specific_namespaces,
)

from hangwatch_operator.kube_api import KubeApi, KubeApiError
from hangwatch_operator.operator_metrics import WEBHOOK_POLICIES, WEBHOOK_POLICY_WATCH_UP
from hangwatch_operator.policy_store import (
    GONE,
    Applied,
    Note,
    PolicyStore,
    Scope,
    WatchEvent,
    backoff_seconds,
    decode_event,
    describe_scope,
)

LIST_PAGE_SIZE = 500
"""Policies per list page: a page of 500 small objects is well under a megabyte."""
WATCH_TIMEOUT_SECONDS = (240, 360)
"""Server-side timeout of one watch, drawn per watch in this range (as client-go does), so
that replicas do not all reconnect at once."""
QUICK_END_SECONDS = 1.0
"""A watch that ends sooner without an event counts as a failure (backoff), not as a
normal end: a server that closes every watch at once must not be hammered."""

log = logging.getLogger(__name__)


class WatchEnd(enum.Enum):
    """How one watch ended."""

    GONE = "gone"
    """Its resourceVersion is too old: list again."""
    EVENTS = "events"
    """It delivered events, then ended: watch again from the last resourceVersion."""
    QUIET = "quiet"
    """It ended after its timeout without an event: watch again."""
    QUICK = "quick"
    """It ended at once without an event: back off first."""


@dataclass(frozen=True)
class WatchPlan:
    """Which lists and watches give the policies of the namespaces the operator serves."""

    scopes: tuple[Scope, ...]
    """Namespaces to list and watch one by one, or (None,): all namespaces at once."""
    patterns: tuple[str, ...] = ()
    """kopf namespace patterns a cluster-wide watch is filtered with; () keeps all."""

    def in_scope(self, namespace: str) -> bool:
        return not self.patterns or any(
            match_namespace(NamespaceName(namespace), p) for p in self.patterns
        )

    def describe(self) -> str:
        if self.patterns:
            return f"namespaces matching {', '.join(self.patterns)}"
        if self.scopes == (None,):
            return "all namespaces"
        return f"namespaces {', '.join(str(scope) for scope in self.scopes)}"


def watch_plan(namespaces: Sequence[str]) -> WatchPlan:
    """The plan for `hangwatch operator --namespace ...` (none: `--all-namespaces`)."""
    if not namespaces:
        return WatchPlan((None,))
    specific = select_specific_namespaces(namespaces)
    if len(specific) == len(set(namespaces)):
        return WatchPlan(tuple(sorted(specific)))
    return WatchPlan((None,), tuple(dict.fromkeys(namespaces)))


class Store(Protocol):
    """What a list-and-watch loop keeps current (`policy_store.PolicyStore`,
    `pod_watch.PodStore`): pure, fed with complete lists and watch events in order."""

    @property
    def ready(self) -> bool: ...

    def listed_once(self, scope: Scope) -> bool: ...

    def resource_version(self, scope: Scope) -> str | None: ...

    def listed(self, scope: Scope, items: Iterable[Any], resource_version: str) -> list[Note]: ...

    def apply(self, scope: Scope, event: WatchEvent) -> Applied: ...


StoreT = TypeVar("StoreT", bound=Store)


class ListWatch(Generic[StoreT]):
    """Lists and watches one kind of object of `plan` into `store` until cancelled (the
    bookkeeping of the module docstring); subclasses say what to list and watch."""

    kind = "objects"
    """What is listed, for log lines."""

    def __init__(
        self,
        api: KubeApi,
        plan: WatchPlan,
        store: StoreT,
        *,
        jitter: Callable[[], float] = random.random,
    ) -> None:
        self.api = api
        self.plan = plan
        self.store = store
        self.ready = asyncio.Event()
        self._jitter = jitter
        self._failing: set[Scope] = set()
        self._task: asyncio.Task[None] | None = None

    def list_page(
        self, scope: Scope, limit: int, token: str | None
    ) -> Coroutine[Any, Any, dict[str, Any]]:
        raise NotImplementedError

    def watch_lines(self, scope: Scope, version: str, timeout: int) -> AsyncGenerator[bytes, None]:
        raise NotImplementedError

    def set_up(self, up: bool) -> None:
        """Export whether every list and watch works (a metric of the subclass)."""

    def listed_note(self, scope: Scope, count: int) -> str:
        return f"Listed {count} {self.kind} in {describe_scope(scope)}."

    def start(self) -> None:
        """Run in the background (on the running loop) until `stop`."""
        if self._task is None:
            self._task = asyncio.create_task(self.run(), name=f"hangwatch {self.kind} watch")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None
        await self.api.close()

    async def run(self) -> None:
        log.info("Listing and watching %s in %s.", self.kind, self.plan.describe())
        await asyncio.gather(*(self._follow(scope) for scope in self.plan.scopes))

    async def _follow(self, scope: Scope) -> None:
        """List `scope`, then watch it from there, forever; relist on 410, back off on errors."""
        failures = 0
        relist = True
        while True:
            try:
                if relist:
                    await self._list(scope)
                    relist = False
                    failures = 0
                end = await self._watch(scope)
            except KubeApiError as exc:
                failures += 1
                self._failed(scope, str(exc), failures)
            except Exception:  # a bug must not end the watch
                failures += 1
                log.exception(
                    "Watch of %s in %s failed; trying again.", self.kind, describe_scope(scope)
                )
                self._failed(scope, "unexpected error", failures)
                relist = True
            else:
                if end is WatchEnd.GONE:
                    log.info(
                        "%s of %s: resourceVersion too old (410 Gone); listing again.",
                        self.kind,
                        describe_scope(scope),
                    )
                    relist = True
                elif end is WatchEnd.EVENTS:
                    failures = 0
                if end is not WatchEnd.QUICK:
                    continue
                failures += 1
                self._failed(scope, "the watch ended at once", failures)
            await asyncio.sleep(backoff_seconds(failures, self._jitter()))

    async def _list(self, scope: Scope) -> None:
        items: list[object] = []
        token: str | None = None
        while True:
            page = await self.list_page(scope, LIST_PAGE_SIZE, token)
            found = page.get("items")
            items.extend(found if isinstance(found, list) else [])
            meta = page.get("metadata")
            meta = meta if isinstance(meta, dict) else {}
            token = meta.get("continue") if isinstance(meta.get("continue"), str) else None
            if not token:
                break
        version = meta.get("resourceVersion")
        if not isinstance(version, str) or not version:
            raise KubeApiError(0, f"a list of {self.kind} without metadata.resourceVersion")
        self._log(self.store.listed(scope, items, version))
        self._healthy(scope)
        log.info("%s", self.listed_note(scope, len(items)))
        if self.store.ready and not self.ready.is_set():
            self.ready.set()

    async def _watch(self, scope: Scope) -> WatchEnd:
        """Follow one watch of `scope` to its end."""
        version = self.store.resource_version(scope)
        assert version is not None, "watched before listed"
        low, high = WATCH_TIMEOUT_SECONDS
        timeout = low + int((high - low) * self._jitter())
        began = time.monotonic()
        delivered = False
        lines = self.watch_lines(scope, version, timeout)
        try:
            async with contextlib.aclosing(lines):
                async for line in lines:
                    self._healthy(scope)
                    event = decode_event(line)
                    if not isinstance(event, WatchEvent):
                        raise KubeApiError(0, event)
                    applied = self.store.apply(scope, event)
                    if applied.gone:
                        return WatchEnd.GONE
                    if applied.error:
                        raise KubeApiError(0, applied.error)
                    self._log(applied.notes)
                    delivered = True
        except KubeApiError as exc:
            if exc.status == GONE:
                return WatchEnd.GONE
            raise
        if delivered:
            return WatchEnd.EVENTS
        return WatchEnd.QUICK if time.monotonic() - began < QUICK_END_SECONDS else WatchEnd.QUIET

    def _log(self, notes: Sequence[Note]) -> None:
        for note in notes:
            log.log(logging.WARNING if note.warning else logging.INFO, note.message())
        if notes:
            self.changed()

    def changed(self) -> None:
        """Called after a list or event that changed what the store holds (notes)."""

    def _healthy(self, scope: Scope) -> None:
        if scope in self._failing:
            self._failing.discard(scope)
            log.info("Watch of %s in %s works again.", self.kind, describe_scope(scope))
        self.set_up(not self._failing)

    def _failed(self, scope: Scope, problem: str, failures: int) -> None:
        self._failing.add(scope)
        self.set_up(False)
        state = (
            "keeping what it listed" if self.store.listed_once(scope) else "not listed yet: waiting"
        )
        log.warning(
            "Watch of %s in %s failed (%s), %d time(s) in a row; %s; trying again.",
            self.kind,
            describe_scope(scope),
            problem,
            failures,
            state,
        )


class PolicyWatch(ListWatch[PolicyStore]):
    """Lists and watches the policies of `plan` into `store` for the webhook."""

    kind = "ProducerHealthPolicies"

    def __init__(
        self,
        api: KubeApi,
        plan: WatchPlan,
        *,
        jitter: Callable[[], float] = random.random,
    ) -> None:
        super().__init__(api, plan, PolicyStore(plan.scopes, plan.in_scope), jitter=jitter)

    def list_page(
        self, scope: Scope, limit: int, token: str | None
    ) -> Coroutine[Any, Any, dict[str, Any]]:
        return self.api.list_policies(scope, limit, token)

    def watch_lines(self, scope: Scope, version: str, timeout: int) -> AsyncGenerator[bytes, None]:
        return self.api.watch_policies(scope, version, timeout)

    def set_up(self, up: bool) -> None:
        WEBHOOK_POLICY_WATCH_UP.set(1 if up else 0)

    def changed(self) -> None:
        WEBHOOK_POLICIES.set(self.store.valid_count())

    def listed_note(self, scope: Scope, count: int) -> str:
        return (
            f"Listed {count} ProducerHealthPolicies in {describe_scope(scope)} for injection "
            f"({self.store.valid_count()} valid in every scope)."
        )
