"""One policy's round: poll sidecars, correlate, decide, act, report. The I/O glue.

Driven by the per-policy daemon in `handlers`, once per `probes.probeIntervalSeconds`
(the sidecar's verdict cannot change faster). Each round gathers its inputs (the
policy body, the pods and cordoned nodes from kopf's indexes, the sidecars' /status),
hands them to the pure `correlation.correlate`, `decisions.decide` and
`history.newsworthy`, carries out the decisions that passed every limit
(`actuation`), then writes what happened: an Event per reported decision and per
silent sidecar, the policy's status (patched only when it changed) and the metrics.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import aiohttp

from hangwatch.contracts import Verdict
from hangwatch_operator import operator_metrics as metrics
from hangwatch_operator.actuation import carry_out
from hangwatch_operator.correlation import SIDECAR_UNREACHABLE, Findings, correlate
from hangwatch_operator.decisions import Decision, assess_gates, decide
from hangwatch_operator.history import (
    ActionRecord,
    History,
    newsworthy,
    remember,
    seed_history,
    with_cordons,
)
from hangwatch_operator.kube_api import KubeApi, KubeApiError
from hangwatch_operator.operations import Operation, Outcome
from hangwatch_operator.policies import (
    InvalidPolicyError,
    Policy,
    parse_policy,
    stale_after_seconds,
)
from hangwatch_operator.reporting import (
    SidecarSilence,
    action_record,
    build_status,
    decision_message,
    event_body,
    event_reason,
    invalid_status,
    involved_object,
    pod_reference,
    silence_message,
)
from hangwatch_operator.settings import OperatorSettings
from hangwatch_operator.sidecar_status import PodReport
from hangwatch_operator.status_polling import poll_sidecars
from hangwatch_operator.watched import CordonedNode, WatchedPod

_REPORT_ONLY = frozenset({Operation.ALERT})
INVALID_RETRY_SECONDS = 30.0
"""How often an invalid policy is re-read (it changes only when someone edits it)."""

Logger = logging.Logger | logging.LoggerAdapter[Any]


@dataclass(frozen=True)
class Runtime:
    """What every policy's rounds share, built once at start-up."""

    settings: OperatorSettings
    api: KubeApi
    session: aiohttp.ClientSession


def effective_policy(policy: Policy, settings: OperatorSettings) -> Policy:
    """The policy with the operator-wide `--dry-run` applied."""
    if not settings.dry_run or policy.safety.dry_run:
        return policy
    return dataclasses.replace(policy, safety=dataclasses.replace(policy.safety, dry_run=True))


class PolicyWatch:
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

    async def round(
        self,
        body: Mapping[str, Any],
        pods: Sequence[WatchedPod],
        cordons: Sequence[CordonedNode],
        logger: Logger,
    ) -> float:
        """One poll-decide-act-report round; returns seconds until the next one."""
        generation = (body.get("metadata") or {}).get("generation")
        try:
            policy = effective_policy(parse_policy(body), self.runtime.settings)
        except InvalidPolicyError as exc:
            logger.error("Invalid ProducerHealthPolicy, not polling: %s", exc)
            await self._write_status(invalid_status(self.status, str(exc), generation, time.time()))
            return INVALID_RETRY_SECONDS
        findings = await self._poll(policy, pods)
        now = time.time()
        ours = {c.name: c.since for c in cordons if c.policy_key == self.key}
        others = [c.name for c in cordons if c.policy_key != self.key]
        history = with_cordons(self.history, ours, others, now)
        decisions, reported = await self._act(
            decide(findings, policy, history, now), history, now, logger
        )
        silences = [SidecarSilence(f) for f in findings.watched if f.unobservable]
        silent_news = newsworthy(silences, history, now, self.runtime.settings.renotify_seconds)
        records = await self._report(reported, silent_news, now)
        self.history = remember(
            history,
            current=[*decisions, *silences],
            reported=[*reported, *silent_news],
            records=records,
            election_seen=bool(findings.with_verdict(Verdict.LEADER_ELECTION)),
            faulty_nodes=findings.faulty_nodes,
            now=now,
        )
        self._measure(findings, reported, cordons)
        gates = assess_gates(findings, policy, history, now)
        status = build_status(
            previous=self.status,
            findings=findings,
            gates=gates,
            policy=policy,
            records=records,
            generation=generation,
            now=now,
        )
        await self._write_status(status)
        return float(policy.probes.probe_interval_seconds)

    async def _poll(self, policy: Policy, pods: Sequence[WatchedPod]) -> Findings:
        settings = self.runtime.settings
        started = time.monotonic()
        live = [p for p in pods if not p.terminating]
        reports = await poll_sidecars(
            self.runtime.session,
            live,
            timeout_seconds=settings.status_timeout_seconds,
            concurrency=settings.status_poll_concurrency,
            stale_after_seconds=stale_after_seconds(policy),
        )
        metrics.POLL_DURATION.observe(time.monotonic() - started)
        leaving = [PodReport(p) for p in pods if p.terminating]
        return correlate([*reports, *leaving])

    async def _act(
        self, decisions: Sequence[Decision], history: History, now: float, logger: Logger
    ) -> tuple[list[Decision], list[Decision]]:
        """Carry out what passed the limits; return all decisions as they ended, and those
        to report (new, changed or due again, and every action carried out)."""
        settings = self.runtime.settings
        due = {d.key for d in newsworthy(decisions, history, now, settings.renotify_seconds)}
        final = []
        reported = []
        for planned in decisions:
            decision = planned
            executes = decision.outcome is Outcome.ACTED and decision.operation not in _REPORT_ONLY
            if executes:
                decision = await carry_out(
                    planned,
                    self.runtime.api,
                    policy_key=self.key,
                    restart_grace_seconds=settings.restart_grace_seconds,
                    now=now,
                )
                level = logging.WARNING if decision.outcome is Outcome.FAILED else logging.INFO
                logger.log(level, "%s", decision_message(decision, self.key))
            final.append(decision)
            if executes or decision.key in due:
                reported.append(decision)
        return final, reported

    async def _report(
        self, decisions: Sequence[Decision], silences: Sequence[SidecarSilence], now: float
    ) -> list[ActionRecord]:
        """Post the Events; return the action records for status and history, newest first."""
        events: list[tuple[dict[str, str], str, str, str]] = []
        records = []
        for decision in decisions:
            message = decision_message(decision, self.key)
            events.append((involved_object(decision), *event_reason(decision), message))
            records.append(action_record(decision, message, now))
        for silence in silences:
            involved = pod_reference(silence.finding.pod)
            message = silence_message(silence, self.key)
            events.append((involved, "Warning", "HangwatchSidecarUnreachable", message))
        base = time.time_ns()
        await asyncio.gather(
            *(
                self._post(
                    event_body(
                        obj, kind=kind, reason=reason, message=text, now=now, suffix=f"{base + i:x}"
                    )
                )
                for i, (obj, kind, reason, text) in enumerate(events)
            )
        )
        return list(reversed(records))

    async def _post(self, body: dict[str, Any]) -> None:
        try:
            await self.runtime.api.create_event(body)
        except KubeApiError as exc:
            logging.getLogger(__name__).warning("Event %s not posted: %s", body["reason"], exc)

    def _measure(
        self, findings: Findings, reported: Sequence[Decision], cordons: Sequence[CordonedNode]
    ) -> None:
        counts = findings.counts()
        metrics.set_pod_gauges(self.key, len(findings.watched), counts, counts[SIDECAR_UNREACHABLE])
        metrics.count_decisions(self.key, reported)
        metrics.CORDONED_NODES.set(len(cordons))
        metrics.POLL_ROUNDS.labels(self.key).inc()

    async def _write_status(self, status: dict[str, Any]) -> None:
        if status == self.status:
            return
        try:
            await self.runtime.api.patch_policy_status(self.namespace, self.name, status)
        except KubeApiError as exc:
            logging.getLogger(__name__).warning("Status of %s not written: %s", self.key, exc)
            return
        self.status = status
