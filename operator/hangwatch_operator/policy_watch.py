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
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from kopf._cogs.structs.references import (
    NamespaceName,
    match_namespace,
    select_specific_namespaces,
)

from hangwatch_operator.kube_api import KubeApi, KubeApiError
from hangwatch_operator.operator_metrics import WEBHOOK_POLICIES, WEBHOOK_POLICY_WATCH_UP
from hangwatch_operator.policy_store import (
    GONE,
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


class PolicyWatch:
    """Lists and watches the policies of `plan` into `store` until cancelled."""

    def __init__(
        self,
        api: KubeApi,
        plan: WatchPlan,
        *,
        jitter: Callable[[], float] = random.random,
    ) -> None:
        self.api = api
        self.plan = plan
        self.store = PolicyStore(plan.scopes, plan.in_scope)
        self.ready = asyncio.Event()
        self._jitter = jitter
        self._failing: set[Scope] = set()
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        """Run in the background (on the running loop) until `stop`."""
        if self._task is None:
            self._task = asyncio.create_task(self.run(), name="hangwatch policy watch")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None
        await self.api.close()

    async def run(self) -> None:
        log.info("Listing and watching ProducerHealthPolicies in %s.", self.plan.describe())
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
            except Exception:  # a bug must not end the webhook's policy source
                failures += 1
                log.exception("Policy watch of %s failed; trying again.", describe_scope(scope))
                self._failed(scope, "unexpected error", failures)
                relist = True
            else:
                if end is WatchEnd.GONE:
                    log.info(
                        "Policies of %s: resourceVersion too old (410 Gone); listing again.",
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
            page = await self.api.list_policies(scope, LIST_PAGE_SIZE, token)
            found = page.get("items")
            items.extend(found if isinstance(found, list) else [])
            meta = page.get("metadata")
            meta = meta if isinstance(meta, dict) else {}
            token = meta.get("continue") if isinstance(meta.get("continue"), str) else None
            if not token:
                break
        version = meta.get("resourceVersion")
        if not isinstance(version, str) or not version:
            raise KubeApiError(0, "a policy list without metadata.resourceVersion")
        self._log(self.store.listed(scope, items, version))
        self._healthy(scope)
        log.info(
            "Listed %d ProducerHealthPolicies in %s for injection (%d valid in every scope).",
            len(items),
            describe_scope(scope),
            self.store.valid_count(),
        )
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
        lines = self.api.watch_policies(scope, version, timeout)
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
            WEBHOOK_POLICIES.set(self.store.valid_count())

    def _healthy(self, scope: Scope) -> None:
        if scope in self._failing:
            self._failing.discard(scope)
            log.info("Policy watch of %s works again.", describe_scope(scope))
        WEBHOOK_POLICY_WATCH_UP.set(0 if self._failing else 1)

    def _failed(self, scope: Scope, problem: str, failures: int) -> None:
        self._failing.add(scope)
        WEBHOOK_POLICY_WATCH_UP.set(0)
        state = (
            "keeping the policies as they were"
            if self.store.listed_once(scope)
            else "not listed yet: the webhook waits"
        )
        log.warning(
            "Policy watch of %s failed (%s), %d time(s) in a row; %s; trying again.",
            describe_scope(scope),
            problem,
            failures,
            state,
        )
