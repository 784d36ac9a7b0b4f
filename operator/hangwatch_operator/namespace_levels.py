"""The Pod Security level each namespace enforces, as the webhook needs it: cached reads.

Used by `webhook`, only for pods whose policy asks for a feature some level forbids
(`admission.needs_level`; with the defaults, no policy does, and no namespace is
read). A namespace's level is its `pod-security.kubernetes.io/enforce` label
(`hangwatch.pod_security.enforced_level`, with the operator's `pod_security_default`
for an unlabelled namespace), read with one GET and kept `TTL_SECONDS`: a label
changed meanwhile takes effect for pods admitted after that (Pod Security admission
itself re-checks every pod, so a stale level can leave a feature out, never make a
pod inadmissible when it errs towards the stricter level). Concurrent admissions in
one namespace share one read. A read that fails or takes longer than
`READ_TIMEOUT_SECONDS` (the API server waits `webhook_timeout_seconds` for the whole
answer) counts as restricted, the level that admits the least, for `ERROR_TTL_SECONDS`,
and is logged once per namespace per failure spell. Needs RBAC `get` on namespaces
(the chart's ClusterRole).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from hangwatch.pod_security import Level, enforced_level

TTL_SECONDS = 30.0
"""How long one read of a namespace's labels is used."""
ERROR_TTL_SECONDS = 5.0
"""How long a failed read counts as restricted before the next admission tries again."""
READ_TIMEOUT_SECONDS = 1.5
"""Longest wait for one namespace read, well inside the webhook's 5 s timeout."""

log = logging.getLogger(__name__)

Reader = Callable[[str, float], Awaitable[dict[str, Any]]]
"""`KubeApi.get_namespace`: (name, timeout) -> the Namespace object."""


@dataclass
class NamespaceLevels:
    """namespace -> enforced level, read through `reader` and cached."""

    reader: Reader
    default: Level
    clock: Callable[[], float] = time.monotonic
    _cache: dict[str, tuple[float, Level]] = field(default_factory=dict)
    _pending: dict[str, asyncio.Task[Level]] = field(default_factory=dict)
    _failing: set[str] = field(default_factory=set)

    async def level(self, namespace: str) -> Level:
        """The level `namespace` enforces (restricted when it cannot be read)."""
        cached = self._cache.get(namespace)
        if cached is not None and cached[0] > self.clock():
            return cached[1]
        task = self._pending.get(namespace)
        if task is None:
            task = asyncio.create_task(self._read(namespace))
            self._pending[namespace] = task
            task.add_done_callback(lambda _: self._pending.pop(namespace, None))
        return await asyncio.shield(task)

    async def _read(self, namespace: str) -> Level:
        try:
            body = await asyncio.wait_for(
                self.reader(namespace, READ_TIMEOUT_SECONDS), READ_TIMEOUT_SECONDS
            )
        except Exception as exc:  # noqa: BLE001 - any failure: the strictest level
            if namespace not in self._failing:
                log.warning(
                    "Cannot read namespace %s for its Pod Security level (%s); injecting as "
                    "for restricted until it can be read.",
                    namespace,
                    exc,
                )
                self._failing.add(namespace)
            self._cache[namespace] = (self.clock() + ERROR_TTL_SECONDS, Level.RESTRICTED)
            return Level.RESTRICTED
        if namespace in self._failing:
            self._failing.discard(namespace)
            log.info("Namespace %s readable again for its Pod Security level.", namespace)
        meta = body.get("metadata")
        labels = meta.get("labels") if isinstance(meta, dict) else None
        level = enforced_level(labels, self.default)
        self._cache[namespace] = (self.clock() + TTL_SECONDS, level)
        return level
