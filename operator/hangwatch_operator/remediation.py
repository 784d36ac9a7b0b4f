"""One policy's round: poll sidecars, plan, act, report. The I/O glue.

Driven by the per-policy daemon in `handlers`, once per `probes.probeIntervalSeconds`
(the sidecar's verdict cannot change faster). Each round gathers its inputs (the
policy body, the pods and cordoned nodes from kopf's indexes, the sidecars' /status),
keeps only the pods the policy's webhook injected (`watched.injection_problem`),
hands the reports to the pure `rounds.plan_round`, carries out the decisions that
passed every limit (`actuation`), settles the round with `rounds.settle_round`, then
writes what happened: its Events, the policy's status (patched only when it changed)
and the metrics. The demo drives the same two pure halves (`hangwatch_demo`).

While the poll goes on, the reads go into a `rolling.RollingRound` (node by node); when
it says a pod is due (a new verdict the policy restarts for, its node read through),
the round plans over the latest report of every pod with the same `plan_round`,
carries out and settles only what it decides on the due pods (`rounds.early_slice`),
and its end-of-round plan leaves those pods alone (`rounds.after_early`).

`Runtime.cordons` is the operator-wide ledger of cordons the node index may not show
yet: a round reserves its cordons before its first await, so two policies deciding
at once never exceed the operator's cap between them.

With sharding (`Runtime.leases`, see `replica_leases`) the daemon hands a round only
the pods of the shards this replica holds, and the round counts the other replicas in
its limits: their tallies in the unhealthy share, and their operations from the
`limits_ledger` (in the rate limit and cooldowns, and, on the pods they judge that are
still in the cluster, in `maxConcurrent`), to which it adds its own, dry runs
included, with compare-and-swap before carrying them out (decided again on a
conflict, at most `LEDGER_ATTEMPTS` times; a ledger the API server does not read or
write: nothing carried out that round). An operation entered and then failed is
entered again as failed, so that no replica counts it in progress. Only the holder of
shard 0 writes the policy's status, for the whole fleet: its own findings plus the
other replicas' published tallies and verdict counts, and their operations from the
ledger (`reporting.Fleet`).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from hangwatch_operator import limits_ledger
from hangwatch_operator import operator_metrics as metrics
from hangwatch_operator.actuation import carry_out
from hangwatch_operator.decisions import Decision
from hangwatch_operator.history import CordonLedger, History, seed_history
from hangwatch_operator.kube_api import KubeApi, KubeApiError
from hangwatch_operator.operations import Operation, Outcome
from hangwatch_operator.policies import (
    InvalidPolicyError,
    Policy,
    parse_policy,
    stale_after_seconds,
)
from hangwatch_operator.replica_leases import ReplicaLeases
from hangwatch_operator.reporting import (
    Fleet,
    action_record,
    build_status,
    decision_message,
    event_body,
    invalid_status,
)
from hangwatch_operator.rolling import RollingRound, restarting_verdicts
from hangwatch_operator.rounds import (
    EventDraft,
    Plan,
    Settled,
    after_early,
    early_slice,
    plan_round,
    settle_round,
    storm_in_sample,
)
from hangwatch_operator.settings import OperatorSettings
from hangwatch_operator.sidecar_status import PodReport
from hangwatch_operator.status_polling import poll_sidecars
from hangwatch_operator.watched import CordonedNode, WatchedPod, injection_problem

INVALID_RETRY_SECONDS = 30.0
"""How often an invalid policy is re-read (it changes only when someone edits it)."""
EARLY_PLAN_SPACING = 4.0
"""An early plan (`rolling`) waits this many times the last plan's duration after it, so
that in a storm of new verdicts plans take at most a fifth of the loop while the reads
go on (a plan over 10,000 pods took 0.11 s on 2 shared CPUs)."""
LEDGER_ATTEMPTS = 3
"""Tries to add a round's operations to the limits ledger before the round carries out
none of them (each conflict means another replica just wrote it: decide again)."""

Logger = logging.Logger | logging.LoggerAdapter[Any]


@dataclass(frozen=True)
class Runtime:
    """What every policy's rounds share, built once at start-up."""

    settings: OperatorSettings
    api: KubeApi
    cordons: CordonLedger = field(default_factory=CordonLedger)
    leases: ReplicaLeases | None = None
    """This replica's shards and the shared limits; None without sharding."""


class PolicyRemediation:
    """The remediation state of one ProducerHealthPolicy across its rounds."""

    def __init__(
        self, runtime: Runtime, namespace: str, name: str, status: Mapping[str, Any] | None
    ) -> None:
        self.runtime = runtime
        self.namespace = namespace
        self.name = name
        self.key = f"{namespace}/{name}"
        self.history: History = seed_history(status, namespace)
        self.status: Mapping[str, Any] | None = status
        self.ignored: frozenset[str] = frozenset()
        """Labelled pods not watched, as of the last round (each logged once)."""
        self.ledger: tuple[limits_ledger.Entry, ...] = ()
        """The limits ledger as this round's plan read it (sharding)."""
        self.present: Callable[[], Collection[str]] | None = None
        """The keys of the policy's pods in the cluster now (see `round`)."""
        self.plan_seconds = 0.0
        """How long the last plan took (its CPU: a plan never awaits)."""
        self.latest: dict[str, PodReport] = {}
        """Pod key -> its last report, from the last round (`rolling`)."""

    async def round(
        self,
        body: Mapping[str, Any],
        pods: Sequence[WatchedPod],
        cordons: Sequence[CordonedNode],
        logger: Logger,
        elsewhere: frozenset[str] = frozenset(),
        present: Callable[[], Collection[str]] | None = None,
    ) -> float:
        """One poll-plan-act-report round; returns seconds until the next one.
        `elsewhere`: keys of the policy's pods other replicas judge (sharding);
        `present`: the keys of the policy's pods in the cluster now (the pod store), so
        that each plan leaves out the pods gone since the round began."""
        self.present = present
        generation = (body.get("metadata") or {}).get("generation")
        try:
            policy = parse_policy(body)
        except InvalidPolicyError as exc:
            logger.error("Invalid ProducerHealthPolicy, not polling: %s", exc)
            await self._write_status(invalid_status(self.status, str(exc), generation, time.time()))
            return INVALID_RETRY_SECONDS
        watched = self._watched(policy, pods, logger)
        rolling = RollingRound(watched, self.latest, restarting_verdicts(policy))
        early = await self._poll(policy, rolling, cordons, elsewhere, logger)
        self.latest = rolling.latest
        reports = rolling.snapshot(self._gone(rolling))
        now = time.time()
        ledger = self.runtime.cordons
        decisions = [d for s in early for d in s.decisions]
        plan, entered = await self._plan(
            reports, policy, cordons, now, elsewhere, lambda p: after_early(p, decisions)
        )
        settled = await self._act(plan, entered, now, logger)
        metrics.measure_round(self.key, plan, settled, len(ledger.known(cordons, now)))
        status = build_status(
            previous=self.status,
            findings=plan.findings,
            gates=plan.gates,
            policy=plan.policy,
            records=[*settled.records, *(r for s in reversed(early) for r in s.records)],
            generation=generation,
            now=now,
            ignored=len(self.ignored),
            fleet=self._fleet(),
        )
        leases = self.runtime.leases
        if leases is None or 0 in leases.owned():
            await self._write_status(status)
        return float(policy.probes.probe_interval_seconds)

    def _fleet(self) -> Fleet | None:
        """The other replicas' share of the policy, for its status (sharding)."""
        leases = self.runtime.leases
        if leases is None:
            return None
        judged, unhealthy = leases.tally_elsewhere(self.key)
        return Fleet(
            replicas=len(leases.elsewhere),
            watched=judged,
            unhealthy=unhealthy,
            counts=leases.counts_of_others(self.key),
            records=limits_ledger.entered_elsewhere(self.ledger, self.key, leases.identity),
        )

    async def _poll(
        self,
        policy: Policy,
        rolling: RollingRound,
        cordons: Sequence[CordonedNode],
        elsewhere: frozenset[str],
        logger: Logger,
    ) -> list[Settled]:
        """Read every live pod's sidecar into `rolling`; meanwhile, decide the pods it
        says are due (`rolling`) over its snapshot, at most one plan at a time and
        spaced by `EARLY_PLAN_SPACING` times the last one's duration. Returns the early
        settlements, oldest first."""
        settings = self.runtime.settings
        wake = asyncio.Event()

        def arrived(report: PodReport) -> None:
            if rolling.read(report):
                wake.set()

        async def read_all() -> None:
            started = time.monotonic()
            await poll_sidecars(
                rolling.poll_order(),
                timeout_seconds=settings.status_timeout_seconds,
                concurrency=settings.status_poll_concurrency,
                stale_after_seconds=stale_after_seconds(policy),
                on_report=arrived,
            )
            metrics.POLL_DURATION.observe(time.monotonic() - started)

        poll = asyncio.ensure_future(read_all())
        early: list[Settled] = []
        next_plan = 0.0
        try:
            while not poll.done():
                waiting = asyncio.ensure_future(wake.wait())
                await asyncio.wait({poll, waiting}, return_when=asyncio.FIRST_COMPLETED)
                waiting.cancel()
                if poll.done():
                    break
                if time.monotonic() < next_plan:
                    await asyncio.wait({poll}, timeout=next_plan - time.monotonic())
                    if poll.done():
                        break
                wake.clear()
                due = rolling.take_due()
                if not due:
                    continue
                settled = await self._act_early(policy, rolling, due, cordons, elsewhere, logger)
                if settled is not None:
                    early.append(settled)
                next_plan = time.monotonic() + EARLY_PLAN_SPACING * self.plan_seconds
            await poll
        finally:
            poll.cancel()
        return early

    def _gone(self, rolling: RollingRound) -> frozenset[str]:
        """The round's pods no longer in the cluster (none known without `present`)."""
        if self.present is None:
            return frozenset()
        present = self.present()
        return frozenset(p.key for p in rolling.pods if p.key not in present)

    async def _act_early(
        self,
        policy: Policy,
        rolling: RollingRound,
        due: frozenset[str],
        cordons: Sequence[CordonedNode],
        elsewhere: frozenset[str],
        logger: Logger,
    ) -> Settled | None:
        """Plan over the rolling snapshot, carry out and settle what it decides on the
        `due` pods (`rounds.early_slice`); None when it decides nothing on them, or when
        the pods read this round close the unhealthy-share gate on their own
        (`rounds.storm_in_sample`: the round's end decides them)."""
        now = time.time()
        storm = storm_in_sample(rolling.sample(), policy)
        if storm is not None:
            logger.info(
                "Early decision on %s held for the round's end: %s.", ", ".join(sorted(due)), storm
            )
            return None
        reports = rolling.snapshot(self._gone(rolling))
        plan, entered = await self._plan(
            reports, policy, cordons, now, elsewhere, lambda p: early_slice(p, due)
        )
        if not plan.decisions:
            return None
        settled = await self._act(plan, entered, now, logger)
        metrics.measure_early(self.key, settled, now)
        return settled

    async def _act(self, plan: Plan, entered: bool, now: float, logger: Logger) -> Settled:
        """Carry out `plan` (its cordons reserved before the first await; nothing when
        it is not `entered` in the limits ledger), settle it, post its Events and keep
        the history it leaves."""
        for decision in plan.to_carry_out:
            if decision.operation is Operation.CORDON_NODE and decision.node:
                self.runtime.cordons.reserve(decision.node, self.key, now)
        done = await self._carry_out(plan, logger) if entered else self._not_entered(plan)
        if entered and plan.to_carry_out:
            await self._enter_failures(done, now)
        settled = settle_round(plan, done)
        await self._post(settled.events, now)
        self.history = settled.history
        return settled

    async def _plan(
        self,
        reports: Sequence[PodReport],
        policy: Policy,
        cordons: Sequence[CordonedNode],
        now: float,
        pods_elsewhere: frozenset[str],
        part: Callable[[Plan], Plan],
    ) -> tuple[Plan, bool]:
        """The part (`part` of the whole plan) of the round's plan to carry out and
        settle, with the other replicas counted (sharding), and whether its operations
        are in the limits ledger (always, without sharding). Only the end-of-round plan
        (not a partial one) publishes the tallies."""
        leases = self.runtime.leases
        if leases is None:
            known = self.runtime.cordons.known(cordons, now)
            return part(self._plan_with(reports, policy, self.history, known, now, (0, 0))), True
        elsewhere = leases.tally_elsewhere(self.key)
        fresh = limits_ledger.DRY_RUN_FRESH_ROUNDS * policy.probes.probe_interval_seconds
        plan = None
        for _ in range(LEDGER_ATTEMPTS):
            try:
                entries, version = await leases.read_ledger()
            except KubeApiError as exc:  # no limits to count with: decide, carry out nothing
                logging.getLogger(__name__).warning("Limits ledger not read: %s", exc)
                known = self.runtime.cordons.known(cordons, now)
                plan = part(self._plan_with(reports, policy, self.history, known, now, elsewhere))
                return plan, not plan.to_carry_out
            self.ledger = entries
            history = limits_ledger.merged(self.history, entries, self.key)
            pending = limits_ledger.pending_cordons(entries, now)
            known = self.runtime.cordons.known([*cordons, *pending], now)
            busy = limits_ledger.in_progress(entries, self.key, pods_elsewhere, now, fresh)
            plan = part(self._plan_with(reports, policy, history, known, now, elsewhere, len(busy)))
            findings = plan.findings
            if not plan.partial:
                unhealthy = sum(1 for f in findings.watched if f.unhealthy)
                leases.tally[self.key] = (len(findings.watched), unhealthy)
                leases.counts[self.key] = findings.counts()
            records = [
                record
                for record in (action_record(d, "", now) for d in plan.decisions)
                if limits_ledger.entered(record)
            ]
            if not records:
                return plan, True
            new = limits_ledger.appended(entries, self.key, leases.identity, records)
            try:
                if await leases.write_ledger(new, version):
                    return plan, True
            except KubeApiError as exc:
                logging.getLogger(__name__).warning("Limits ledger not written: %s", exc)
                return plan, False
        assert plan is not None
        return plan, False

    def _plan_with(
        self,
        reports: Sequence[PodReport],
        policy: Policy,
        history: History,
        cordons: Sequence[CordonedNode],
        now: float,
        elsewhere: tuple[int, int],
        busy_elsewhere: int = 0,
    ) -> Plan:
        began = time.monotonic()
        plan = plan_round(
            reports,
            policy,
            history,
            now,
            policy_key=self.key,
            cordons=cordons,
            settings=self.runtime.settings,
            elsewhere=elsewhere,
            busy_elsewhere=busy_elsewhere,
        )
        self.plan_seconds = time.monotonic() - began
        return plan

    async def _enter_failures(self, done: Sequence[Decision], now: float) -> None:
        """Enter again as failed the operations entered as acted that then failed, so that
        no replica counts them in progress (on a conflict, read and try again; when that
        fails, they count until their pods are gone, as a restart carried out would)."""
        leases = self.runtime.leases
        failed = limits_ledger.failed_after(action_record(d, "", now) for d in done)
        if leases is None or not failed:
            return
        for _ in range(LEDGER_ATTEMPTS):
            try:
                entries, version = await leases.read_ledger()
                new = limits_ledger.appended(entries, self.key, leases.identity, failed)
                if await leases.write_ledger(new, version):
                    return
            except KubeApiError as exc:
                logging.getLogger(__name__).warning("Limits ledger not written: %s", exc)
                return

    @staticmethod
    def _not_entered(plan: Plan) -> list[Decision]:
        note = "not carried out: not entered in the limits ledger (it changed or failed)"
        return [
            dataclasses.replace(d, outcome=Outcome.FAILED, note=note) for d in plan.to_carry_out
        ]

    def _watched(
        self, policy: Policy, pods: Sequence[WatchedPod], logger: Logger
    ) -> list[WatchedPod]:
        """The pods the policy watches; the others are logged once each and counted."""
        watched = []
        ignored = set()
        for pod in pods:
            problem = injection_problem(pod, policy, self.runtime.settings.sidecar_image)
            if problem is None:
                watched.append(pod)
                continue
            ignored.add(pod.key)
            if pod.key not in self.ignored:
                logger.warning("Not watching pod %s: %s.", pod.key, problem)
        self.ignored = frozenset(ignored)
        return watched

    async def _carry_out(self, plan: Plan, logger: Logger) -> list[Decision]:
        """Each decision of the plan to carry out, one after the other, as it ended."""
        settings = self.runtime.settings
        leases = self.runtime.leases
        done = []
        for planned in plan.to_carry_out:
            pod = planned.pod
            if (
                leases is not None
                and pod is not None
                and not leases.judges(pod.uid, leases.owned())
            ):
                note = "not carried out: this replica no longer holds the pod's shard"
                done.append(dataclasses.replace(planned, outcome=Outcome.FAILED, note=note))
                continue
            decision = await carry_out(
                planned,
                self.runtime.api,
                policy_key=self.key,
                restart_grace_seconds=settings.restart_grace_seconds,
                now=plan.now,
            )
            failed_cordon = (
                decision.operation is Operation.CORDON_NODE and decision.outcome is Outcome.FAILED
            )
            if decision.node and (failed_cordon or decision.operation is Operation.UNCORDON_NODE):
                self.runtime.cordons.release(decision.node)
            level = logging.WARNING if decision.outcome is Outcome.FAILED else logging.INFO
            logger.log(level, "%s", decision_message(decision, self.key))
            done.append(decision)
        return done

    async def _post(self, events: Sequence[EventDraft], now: float) -> None:
        """Post the round's Events at once; a failed post is logged, never raised."""
        base = time.time_ns()
        await asyncio.gather(
            *(
                self._post_one(
                    event_body(
                        e.involved,
                        kind=e.kind,
                        reason=e.reason,
                        message=e.message,
                        now=now,
                        suffix=f"{base + i:x}",
                    )
                )
                for i, e in enumerate(events)
            )
        )

    async def _post_one(self, body: dict[str, Any]) -> None:
        try:
            await self.runtime.api.create_event(body)
        except KubeApiError as exc:
            logging.getLogger(__name__).warning("Event %s not posted: %s", body["reason"], exc)

    async def _write_status(self, status: dict[str, Any]) -> None:
        if status == self.status:
            return
        try:
            await self.runtime.api.patch_policy_status(self.namespace, self.name, status)
        except KubeApiError as exc:
            logging.getLogger(__name__).warning("Status of %s not written: %s", self.key, exc)
            return
        self.status = status
