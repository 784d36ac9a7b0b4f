"""This replica's Leases: which shards of the watched pods it judges, and the shared limits.

Started by `handlers.start_remediation` when `OperatorSettings.shards` is above 0, as a
plain asyncio task (like `pod_watch`), with a client of its own. Every
`lease_renew_seconds` it lists the Leases labelled `hangwatch.dev/lease` in the
operator's namespace, renews its own replica Lease (with its tally per policy), and
carries out `sharding.plan_leases`: renew, release or acquire each shard's Lease, each
write a create or a replace conditional on the resourceVersion read (the API server
lets one writer win; a 409 means another replica got there first, and the step ends
without the shard). `owned()` is what `sharding.owned` says of the Leases as this
replica last wrote them, by its own clock: a replica that cannot renew stops judging
`CLOCK_MARGIN_SECONDS` before anyone else may take its shards.

Its own Lease carries its tally and verdict counts per policy (`sharding`), read by the
others. It also reads and writes the `hangwatch-limits` Lease, the ledger of disruptive
operations across replicas (`limits_ledger`), for `remediation`. On stop it releases
the shards it holds, so a rolling update hands them over at once.

Metric: `hangwatch_operator_shards_held`.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from hangwatch_operator import limits_ledger, sharding
from hangwatch_operator.kube_api import KubeApi, KubeApiError
from hangwatch_operator.operator_metrics import SHARDS_HELD
from hangwatch_operator.sharding import Lease, LeaseKind, Step, Tally

log = logging.getLogger(__name__)
CONFLICT = 409


class ReplicaLeases:
    """One replica's shard Leases, its own Lease and the limits ledger, until stopped."""

    def __init__(
        self,
        api: KubeApi,
        namespace: str,
        identity: str,
        shards: int,
        duration: int,
        renew_seconds: float,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.api = api
        self.namespace = namespace
        self.identity = identity
        self.shards = shards
        self.duration = duration
        self.renew_seconds = renew_seconds
        self.clock = clock
        self.leases: dict[int, Lease] = {}
        """Every shard's Lease as last read, or as this replica last wrote it."""
        self.tally: dict[str, Tally] = {}
        """This replica's (judged, unhealthy) per policy, published at its next renewal."""
        self.elsewhere: dict[str, dict[str, Tally]] = {}
        """The other live replicas' published tallies."""
        self.counts: dict[str, sharding.Counts] = {}
        """This replica's pods per verdict per policy, published at its next renewal."""
        self.counts_elsewhere: dict[str, dict[str, sharding.Counts]] = {}
        """The other live replicas' published verdict counts."""
        self.ready = asyncio.Event()
        """Set after the first step: until then this replica holds nothing."""
        self._versions: dict[str, str] = {}
        self._task: asyncio.Task[None] | None = None

    def owned(self) -> frozenset[int]:
        return sharding.owned(self.identity, self.leases, self.clock())

    def judges(self, uid: str, owned: frozenset[int]) -> bool:
        return sharding.shard_of(uid, self.shards) in owned

    def tally_elsewhere(self, policy_key: str) -> Tally:
        return sharding.summed(self.elsewhere.values(), policy_key)

    def counts_of_others(self, policy_key: str) -> sharding.Counts:
        return sharding.summed_counts(self.counts_elsewhere.values(), policy_key)

    def forget(self, policy_key: str) -> None:
        """Publish nothing more for a policy this replica no longer runs."""
        self.tally.pop(policy_key, None)
        self.counts.pop(policy_key, None)

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="hangwatch-replica-leases")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        held = self.owned()
        self.leases = {}
        for shard in held:  # hand over at once rather than after the Lease's duration
            await self._write(sharding.lease_name(shard), LeaseKind.SHARD, "")
        SHARDS_HELD.set(0)

    async def _run(self) -> None:
        while True:
            try:
                await self.step()
            except KubeApiError as exc:
                log.warning("Shard Leases not renewed: %s", exc)
            self.ready.set()
            SHARDS_HELD.set(len(self.owned()))
            await asyncio.sleep(self.renew_seconds)

    async def step(self) -> None:
        """Read every Lease, renew our own, then renew, release or acquire shards."""
        members: dict[str, Lease] = {}
        tallies: dict[str, dict[str, Tally]] = {}
        counts: dict[str, dict[str, sharding.Counts]] = {}
        read: dict[int, Lease] = {}
        by_name = {sharding.lease_name(s): s for s in range(self.shards)}
        for body in await self.api.list_leases(self.namespace, sharding.LEASE_LABEL):
            meta = body.get("metadata") or {}
            name, lease = str(meta.get("name", "")), sharding.read_lease(body)
            self._versions[name] = str(meta.get("resourceVersion", ""))
            if name.startswith(sharding.MEMBER_PREFIX) and lease is not None:
                members[lease.holder] = lease
                annotations = meta.get("annotations") or {}
                tallies[lease.holder] = sharding.decode_tally(
                    annotations.get(sharding.TALLY_ANNOTATION)
                )
                counts[lease.holder] = sharding.decode_counts(
                    annotations.get(sharding.COUNTS_ANNOTATION)
                )
            elif name in by_name and lease is not None:
                read[by_name[name]] = lease
        now = self.clock()
        await self._write(
            sharding.member_lease_name(self.identity),
            LeaseKind.REPLICA,
            self.identity,
            {
                sharding.TALLY_ANNOTATION: sharding.encode_tally(self.tally),
                sharding.COUNTS_ANNOTATION: sharding.encode_counts(self.counts),
            },
        )
        live = sharding.live_replicas(members, now) | {self.identity}
        self.elsewhere = {r: t for r, t in tallies.items() if r in live and r != self.identity}
        self.counts_elsewhere = {
            r: c for r, c in counts.items() if r in live and r != self.identity
        }
        self.leases = read
        for shard, step in sorted(
            sharding.plan_leases(self.identity, live, read, self.shards, now).items()
        ):
            holder = "" if step is Step.RELEASE else self.identity
            written = await self._write(sharding.lease_name(shard), LeaseKind.SHARD, holder)
            if written is not None:
                self.leases[shard] = written
                if step is not Step.RENEW:
                    log.info("Shard %d %sd by %s.", shard, step, self.identity)
            elif step is not Step.ACQUIRE:  # lost to another writer: trust it no more
                self.leases.pop(shard, None)

    async def _write(
        self,
        name: str,
        kind: LeaseKind,
        holder: str,
        annotations: Mapping[str, str] | None = None,
    ) -> Lease | None:
        """Create or conditionally replace one Lease; None when another writer won."""
        now = self.clock()
        body = sharding.lease_body(
            name,
            kind,
            holder,
            now,
            self.duration,
            resource_version=self._versions.get(name) or None,
            annotations=annotations,
        )
        try:
            written = await self.api.write_lease(self.namespace, body)
        except KubeApiError as exc:
            if exc.status == CONFLICT:
                return None
            raise
        self._versions[name] = str((written.get("metadata") or {}).get("resourceVersion", ""))
        return Lease(holder, now, float(self.duration))

    async def read_ledger(self) -> tuple[tuple[limits_ledger.Entry, ...], str | None]:
        """The limits ledger and the resourceVersion it was read at (None: not created)."""
        selector = f"{sharding.LEASE_LABEL}={LeaseKind.LIMITS}"
        for body in await self.api.list_leases(self.namespace, selector):
            meta = body.get("metadata") or {}
            if meta.get("name") == limits_ledger.LIMITS_LEASE:
                annotations = meta.get("annotations") or {}
                entries = limits_ledger.decode(annotations.get(limits_ledger.ACTIONS_ANNOTATION))
                return entries, str(meta.get("resourceVersion", ""))
        return (), None

    async def write_ledger(
        self, entries: Sequence[limits_ledger.Entry], version: str | None
    ) -> bool:
        """Write the ledger if no one wrote it since `version` was read; False if someone did."""
        now = self.clock()
        body: dict[str, Any] = sharding.lease_body(
            limits_ledger.LIMITS_LEASE,
            LeaseKind.LIMITS,
            "",
            now,
            self.duration,
            resource_version=version,
            annotations={limits_ledger.ACTIONS_ANNOTATION: limits_ledger.encode(entries, now)},
        )
        try:
            await self.api.write_lease(self.namespace, body)
        except KubeApiError as exc:
            if exc.status == CONFLICT:
                return False
            raise
        return True
