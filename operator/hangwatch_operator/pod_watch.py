"""The remediation's own list and watch of the pods the webhook labelled.

Started by `handlers.start_remediation` as a plain asyncio task, outside kopf's
handlers, with a client of its own: one list (paginated) and then one watch per scope
of `policy_watch.watch_plan`, selected by the API server with the `hangwatch.dev/policy`
label, into a `pod_store.PodStore` (the bookkeeping of `policy_watch.ListWatch`: 410
relists, bounded backoff, resume from the last resourceVersion). The remediation daemon
starts its first round only once every scope is listed (`ready`), so a round never
judges a policy's pods from half a list (the unhealthy share would be wrong).

It replaces kopf's index of pods, whose start-up grows with the square of the pods
(see `pod_store`). A standby replica keeps its copy current too (kopf peering pauses
kopf's handlers, not this task), so a takeover starts from a complete list.

Metric: `hangwatch_operator_pod_watch_up` (0 while a list or watch fails).
"""

from __future__ import annotations

import random
from collections.abc import AsyncGenerator, Callable, Coroutine
from typing import Any

from hangwatch_operator.injection import POLICY_LABEL
from hangwatch_operator.kube_api import KubeApi
from hangwatch_operator.operator_metrics import POD_WATCH_UP
from hangwatch_operator.pod_store import PodStore
from hangwatch_operator.policy_store import Scope
from hangwatch_operator.policy_watch import ListWatch, WatchPlan


class PodWatch(ListWatch[PodStore]):
    """Lists and watches the labelled pods of `plan` into a `PodStore` until stopped."""

    kind = "labelled pods"

    def __init__(
        self,
        api: KubeApi,
        plan: WatchPlan,
        default_port: int,
        *,
        jitter: Callable[[], float] = random.random,
    ) -> None:
        store = PodStore(plan.scopes, default_port, plan.in_scope)
        super().__init__(api, plan, store, jitter=jitter)

    def list_page(
        self, scope: Scope, limit: int, token: str | None
    ) -> Coroutine[Any, Any, dict[str, Any]]:
        return self.api.list_pods(scope, limit, token, label_selector=POLICY_LABEL)

    def watch_lines(self, scope: Scope, version: str, timeout: int) -> AsyncGenerator[bytes, None]:
        return self.api.watch_pods(scope, version, timeout, label_selector=POLICY_LABEL)

    def set_up(self, up: bool) -> None:
        POD_WATCH_UP.set(1 if up else 0)

    def listed_note(self, scope: Scope, count: int) -> str:
        return (
            f"Listed {count} labelled pods in {scope or 'all namespaces'}; "
            f"{len(self.store)} running or being deleted."
        )
