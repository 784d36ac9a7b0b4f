"""One remediation round, pure: from the sidecars' reports to what to do and what to say.

The one definition of a round, which both of its drivers call: the operator's
`remediation.PolicyRemediation.round` (reports polled over HTTP from the pods' sidecars,
decisions carried out against the Kubernetes API) and the demo's
`hangwatch_demo.local_operator` (the same polling of real sidecar processes, a restart
carried out by killing the executor's JVM). A round has two pure halves around the
driver's I/O:

- `plan_round`: the policy with the operator's `--dry-run` applied, correlation
  (`correlation.correlate`, with the policy's `nodeFaultMinPods`), the history with the
  cordons the cluster shows (`history.with_cordons`), the policy-wide gates and every
  decision under every limit (`decisions.decide`, with the operator's cap on cordoned
  nodes), and what is due for reporting (`history.newsworthy`). `Plan.to_carry_out` is
  what the driver must do.
- `settle_round`: given the carried-out decisions as they ended (a note, or `failed`),
  every decision's end, the ones to report (carried out, or new, changed or due again),
  their Events and action records (newest first), and the history the next round
  starts from (`history.remember`: notices, records trimmed to an hour, the last
  election, node faults).

Before its end, a round may decide some pods early (`rolling`: a verdict the policy
restarts for, read while the poll goes on): `early_slice` keeps of a plan over the
rolling snapshot only the decisions on those pods that restart or decommission (or
would, in a dry run), with the pods' other decisions; the driver carries them out and
settles the slice (a partial settling: the rest of the history stays). The
end-of-round plan then leaves those pods to what was done (`after_early`): nothing on
them is decided, reported, entered or carried out twice in one round, whatever the
cooldown (which may be 0).

Pure: `now` comes in; nothing is read from the cluster, the network or the clock.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

from hangwatch.contracts import Verdict
from hangwatch_operator.correlation import Findings, correlate
from hangwatch_operator.decisions import Decision, Gates, assess_gates, decide, storm_gate
from hangwatch_operator.history import ActionRecord, History, newsworthy, remember, with_cordons
from hangwatch_operator.operations import Operation, Outcome
from hangwatch_operator.policies import Policy
from hangwatch_operator.reporting import (
    SidecarSilence,
    action_record,
    decision_message,
    event_reason,
    involved_object,
    pod_reference,
    silence_message,
)
from hangwatch_operator.rolling import EARLY_OPERATIONS
from hangwatch_operator.settings import OperatorSettings
from hangwatch_operator.sidecar_status import PodReport
from hangwatch_operator.watched import CordonedNode

SILENCE_REASON = "HangwatchSidecarUnreachable"


@dataclass(frozen=True)
class Plan:
    """A round up to the I/O: what was found, decided and is due for reporting."""

    policy_key: str
    """`namespace/name` of the policy, as messages and node annotations name it."""
    policy: Policy
    """The policy as it applies: with the operator's `--dry-run`."""
    now: float
    findings: Findings
    history: History
    """The history the round started from, with the cluster's cordons."""
    gates: Gates
    decisions: tuple[Decision, ...]
    due: frozenset[str]
    """Keys of the decisions to report even if not carried out (new, changed, repeated)."""
    silences: tuple[SidecarSilence, ...]
    silent_news: tuple[SidecarSilence, ...]
    partial: bool = False
    """A slice decided before the round's end (`early_slice`)."""
    settled_early: tuple[Decision, ...] = ()
    """Decisions of this round settled before its end (`after_early`): still current."""

    @property
    def to_carry_out(self) -> tuple[Decision, ...]:
        """The decisions the driver must carry out (acted on, and not only an alert)."""
        return tuple(d for d in self.decisions if carried_out(d))


@dataclass(frozen=True)
class EventDraft:
    """An Event to post: about what, its type and reason, and its message."""

    involved: Mapping[str, str]
    kind: str
    reason: str
    message: str


@dataclass(frozen=True)
class Settled:
    """A round after the I/O: how it ended, what to say, what to remember."""

    decisions: tuple[Decision, ...]
    """Every decision of the round as it ended."""
    reported: tuple[Decision, ...]
    events: tuple[EventDraft, ...]
    records: tuple[ActionRecord, ...]
    """This round's action records, newest first (for status and history)."""
    history: History


def carried_out(decision: Decision) -> bool:
    """A decision the driver must carry out: acted on, and more than an alert."""
    return decision.outcome is Outcome.ACTED and decision.operation is not Operation.ALERT


def effective_policy(policy: Policy, settings: OperatorSettings) -> Policy:
    """The policy with the operator-wide `--dry-run` applied."""
    if not settings.dry_run or policy.safety.dry_run:
        return policy
    return dataclasses.replace(policy, safety=dataclasses.replace(policy.safety, dry_run=True))


def plan_round(
    reports: Sequence[PodReport],
    policy: Policy,
    history: History,
    now: float,
    *,
    policy_key: str,
    cordons: Sequence[CordonedNode] = (),
    settings: OperatorSettings | None = None,
    elsewhere: tuple[int, int] = (0, 0),
    busy_elsewhere: int = 0,
) -> Plan:
    """The first half of a round (see the module docstring).

    `reports` has one entry per pod the policy watches (terminating ones unpolled);
    `cordons` every node hangwatch holds cordoned, whichever policy did it;
    `elsewhere` the (watched, unhealthy) pods of the policy other replicas judge;
    `busy_elsewhere` those of their pods with a disruptive operation in progress.
    """
    settings = settings or OperatorSettings()
    policy = effective_policy(policy, settings)
    findings = correlate(reports, node_fault_min_pods=policy.safety.node_fault_min_pods)
    ours = {c.name: c.since for c in cordons if c.policy_key == policy_key}
    others = [c.name for c in cordons if c.policy_key != policy_key]
    history = with_cordons(history, ours, others, now)
    gates = assess_gates(findings, policy, history, now, elsewhere)
    decisions = decide(
        findings,
        policy,
        history,
        now,
        operator_max_cordoned=settings.max_cordoned_nodes,
        gates=gates,
        busy_elsewhere=busy_elsewhere,
    )
    repeat = settings.renotify_seconds
    silences = [SidecarSilence(f) for f in findings.watched if f.unobservable]
    return Plan(
        policy_key=policy_key,
        policy=policy,
        now=now,
        findings=findings,
        history=history,
        gates=gates,
        decisions=tuple(decisions),
        due=frozenset(d.key for d in newsworthy(decisions, history, now, repeat)),
        silences=tuple(silences),
        silent_news=tuple(newsworthy(silences, history, now, repeat)),
    )


def storm_in_sample(sample: Sequence[PodReport], policy: Policy) -> str | None:
    """The unhealthy-share gate over `sample` alone: the pods read so far this round.

    An early plan (`rolling`) counts the pods not yet read by their last round's report,
    so at the start of a shared fault (many pods turning unhealthy at once) its share is
    diluted by reports from before it: 60 hung pods on the first node read of a
    10,000-pod fleet are 0.6 % of the snapshot and 30 % of what this round has read. An
    early plan is held while the pods read this round would close the gate on their own
    (`decisions.storm_gate`, the rule `assess_gates` applies); the round's end decides
    over every pod as before. The pods other replicas judge are not in the sample."""
    findings = correlate(sample, node_fault_min_pods=policy.safety.node_fault_min_pods)
    return storm_gate(findings, policy)


def early_slice(plan: Plan, pods: Collection[str]) -> Plan:
    """The part of `plan` to carry out and settle before the round's end: every decision
    on those of `pods` (keys) with a restart or decommission acted on or dry run; empty
    when there is none."""
    chosen = {
        d.pod.key
        for d in plan.decisions
        if d.pod is not None
        and d.pod.key in pods
        and d.operation in EARLY_OPERATIONS
        and d.outcome in {Outcome.ACTED, Outcome.DRY_RUN}
    }
    decisions = tuple(d for d in plan.decisions if d.pod is not None and d.pod.key in chosen)
    keys = {d.key for d in decisions}
    return dataclasses.replace(
        plan,
        decisions=decisions,
        due=plan.due & keys,
        silences=(),
        silent_news=(),
        partial=True,
    )


def after_early(plan: Plan, early: Sequence[Decision]) -> Plan:
    """The end-of-round `plan` without the pods `early` (decisions settled earlier in
    the round) acted on or reported: those stand for them."""
    pods = {d.pod.key for d in early if d.pod is not None}
    decisions = tuple(d for d in plan.decisions if d.pod is None or d.pod.key not in pods)
    keys = {d.key for d in decisions}
    return dataclasses.replace(
        plan, decisions=decisions, due=plan.due & keys, settled_early=tuple(early)
    )


def settle_round(plan: Plan, done: Sequence[Decision]) -> Settled:
    """The second half of a round: `done` holds the decisions of `plan.to_carry_out` as
    they ended (a note, or outcome `failed`); one left out of it failed."""
    ended = {d.key: d for d in done}
    for missing in (d for d in plan.to_carry_out if d.key not in ended):
        ended[missing.key] = dataclasses.replace(
            missing, outcome=Outcome.FAILED, note="not carried out"
        )
    decisions = tuple(ended.get(d.key, d) for d in plan.decisions)
    reported = tuple(d for d in decisions if d.key in ended or d.key in plan.due)
    events = []
    records = []
    for decision in reported:
        message = decision_message(decision, plan.policy_key)
        involved = involved_object(decision, plan.policy)
        events.append(EventDraft(involved, *event_reason(decision), message))
        records.append(action_record(decision, message, plan.now))
    for silence in plan.silent_news:
        message = silence_message(silence, plan.policy_key)
        involved = pod_reference(silence.finding.pod)
        events.append(EventDraft(involved, "Warning", SILENCE_REASON, message))
    records.reverse()
    findings = plan.findings
    history = remember(
        plan.history,
        current=[*decisions, *plan.settled_early, *plan.silences],
        reported=[*reported, *plan.silent_news],
        records=records,
        election_seen=bool(findings.with_verdict(Verdict.LEADER_ELECTION)),
        faulty_nodes=findings.faulty_nodes,
        now=plan.now,
        partial=plan.partial,
        unhealthy=[f.pod.key for f in findings.watched if f.unhealthy],
        unanswered=[f.pod.key for f in findings.watched if f.unobservable],
    )
    return Settled(decisions, reported, tuple(events), tuple(records), history)
