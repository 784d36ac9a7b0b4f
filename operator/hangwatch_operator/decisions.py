"""Decisions: correlated findings + policy + history + time -> what to do, and what not.

Fed by `correlation` (findings), `policies` (actions per verdict, safety limits) and
`history`; the result goes to `actuation` (outcome `acted`) and to `reporting`
(Events, status, metrics) — every decision, acted or not, carries its reason.

For every watched pod whose effective verdict has actions, one decision per action;
for a verdict said once per topic (`correlation.BY_TOPIC`: the cluster refuses writes
to a topic, `partitions_unwritable`), one `alert` per topic instead, naming its pods,
and nothing else (the CRD allows only `alert` for it: no pod is ever acted on); for
every node at fault, one `cordonNode` if the policy asks for it; with
`autoUncordon` (on by default), one `uncordonNode` per node this policy cordoned that
has been quiet long enough. `alert` is never suppressed. A disruptive operation
(restart, decommission, cordonNode) passes these limits in order, and the first one
that holds is the reason it is suppressed:

1. `driver_protected` — the pod is a Spark driver and `allowDriverDeletion` is false;
1a. `no_owner` — the pod is a `producer` pod (not Spark's) without a controlling owner
   (`ownerReferences` with `controller: true`): deleting it would not bring it back;
1b. `failure_budget` (restart only) — the pod's sidecar reports that its application's
   Spark executor failure budget (`spark.executor.maxNumFailures` within
   `spark.executor.failuresValidityInterval`) cannot take one more failure (with this
   round's other restarts of the application): Spark would end the application. The
   restart is refused and, when the policy has no `alert` for the verdict, an alert is
   raised instead, so the hang is still reported;
2. `cluster_unreachable` — some pod cannot reach Kafka with no node to blame, or all
   cannot (outage): restarts cannot help;
3. `leader_election` — a pod reports leaderless partitions, or did so less than
   `detection.electionGraceSeconds` ago;
4. `storm` — more than `maxUnhealthyShare` of the watched pods (and at least
   `STORM_MIN_PODS`) are unhealthy: a shared cause, not a hang. A pod whose sidecar
   does not answer is watched (it counts in the whole) but not unhealthy: its owner can
   silence it at will, and it must not switch remediation off for everyone else. One
   exception (`recalled`): a pod whose sidecar answered unhealthy less than
   `policies.stale_after_seconds` ago (three probe rounds and their timeouts, as long as
   a sidecar's own /status stays believable) and has not answered since counts as it
   last answered: one answer missed under load must not open the gate and let the
   other unhealthy pods of a storm be restarted (seen in CI: 2 of 3 pods hung, one
   sidecar late by a poll, both restarted). Its owner could have kept answering
   unhealthy, so this gives a tenant nothing it did not have;
5. `cooldown` — the same pod (or node) was acted on (or tried) within
   `podCooldownSeconds`;
6. `rate_limit` — `maxActionsPerApplicationPerHour` other pods of the pod's
   application (for a `producer` pod: of its controlling owner) were
   restarted/decommissioned in the last hour (dry runs count, so a dry run shows where
   the limit would bite);
   an operation recorded as acted and then as failed (the limits ledger enters it
   before it is carried out: `ActionRecord.attempt`) counts as failed, here and in 8;
7. `max_cordoned` (cordonNode only) — the policy already holds
   `safety.maxCordonedNodes` nodes cordoned, or hangwatch holds the operator's
   `max_cordoned_nodes` across every policy (this round's plan included);
8. `max_concurrent` — `maxConcurrent` actions are already in progress (restarts and
   decommissions until their pod is gone, cordons until the node is uncordoned) or
   planned in this round; with sharding, other replicas' restarts and decommissions
   in progress count too (`busy_elsewhere`, from the limits ledger);
9. `dry_run` — the policy (or the operator's `--dry-run`) says report only.

Pods are considered longest-unhealthy first, so the limits spare the newest cases.
Pure: `now` is passed in, nothing is read from the cluster or the clock.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

from hangwatch.contracts import Verdict
from hangwatch.wire.status import FailureBudget
from hangwatch_operator.correlation import BY_TOPIC, Findings, PodFinding, TopicFinding
from hangwatch_operator.history import History
from hangwatch_operator.operations import DISRUPTIVE, Operation, Outcome, Suppression
from hangwatch_operator.policies import Policy, Role, stale_after_seconds
from hangwatch_operator.settings import OperatorSettings
from hangwatch_operator.watched import WatchedPod

_COUNTED = frozenset({Outcome.ACTED, Outcome.DRY_RUN})
STORM_MIN_PODS = 2
"""A single unhealthy pod is never a storm, so a one-executor job can still be healed."""
RATE_WINDOW_SECONDS = 3600
NAMES_SHOWN = 3


@dataclass(frozen=True)
class Decision:
    """One operation on one pod or node, with how it ended and why."""

    operation: Operation
    verdict: Verdict
    outcome: Outcome
    pod: WatchedPod | None = None
    node: str | None = None
    suppression: Suppression | None = None
    limit: str = ""
    """The sentence naming the limit that suppressed it (or the dry run)."""
    reasons: tuple[str, ...] = ()
    """Why the verdict: the sidecar's reasons, or correlation's for node faults."""
    note: str = ""
    """Set by actuation: what happened (or the error)."""
    brokers: tuple[str, ...] = ()
    """Broker addresses the pod (for a node, its pods) could not use, sorted."""
    topic: str | None = None
    """The topic a decision about a topic is about (`correlation.BY_TOPIC` verdicts)."""

    @property
    def target(self) -> str:
        if self.topic is not None:
            return f"topic/{self.topic}"
        return self.pod.key if self.pod is not None else f"node/{self.node}"

    @property
    def key(self) -> str:
        return f"{self.target}#{self.operation}"

    @property
    def signature(self) -> tuple[str, ...]:
        return (self.operation, self.verdict, self.outcome, self.suppression or "")


@dataclass(frozen=True)
class Gates:
    """Policy-wide conditions that stop every disruptive operation (None: open)."""

    cluster_unreachable: str | None = None
    leader_election: str | None = None
    storm: str | None = None

    def first(self) -> tuple[Suppression, str] | None:
        for reason, text in (
            (Suppression.CLUSTER_UNREACHABLE, self.cluster_unreachable),
            (Suppression.LEADER_ELECTION, self.leader_election),
            (Suppression.STORM, self.storm),
        ):
            if text is not None:
                return reason, text
        return None


@dataclass
class _Tally:
    """Budget used so far in this round."""

    in_flight: int
    operator_max_cordoned: int
    failed: frozenset[tuple[str, Operation, int]] = frozenset()
    """`ActionRecord.attempt` of every failed record: an `acted` twin of one did nothing."""
    elsewhere: int = 0
    """Of `in_flight`, those on pods other replicas judge."""
    planned: int = 0
    cordons: int = 0
    per_application: Counter[str] = field(default_factory=Counter)


def assess_gates(
    findings: Findings,
    policy: Policy,
    history: History,
    now: float,
    elsewhere: tuple[int, int] = (0, 0),
) -> Gates:
    """The policy-wide gates for this round. `elsewhere`: (watched, unhealthy) pods of the
    policy that other replicas judge (sharding), counted in the unhealthy share."""
    unreachable = findings.with_verdict(Verdict.CLUSTER_UNREACHABLE)
    cluster = None
    if findings.outage:
        cluster = f"no broker answers from any of the {len(unreachable)} answering pod(s): outage"
    elif unreachable:
        cluster = f"{_names(unreachable)} cannot reach Kafka and no single node is at fault"
    electing = findings.with_verdict(Verdict.LEADER_ELECTION)
    grace = policy.detection.election_grace_seconds
    election = None
    if electing:
        election = f"partitions are leaderless for {_names(electing)}"
    elif history.last_election_ts is not None and now - history.last_election_ts < grace:
        ago = now - history.last_election_ts
        election = f"a leader election ended {ago:.0f} s ago (electionGraceSeconds {grace})"
    recalled_pods = recalled(findings, policy, history, now)
    return Gates(cluster, election, storm_gate(findings, policy, elsewhere, recalled_pods))


def recalled(findings: Findings, policy: Policy, history: History, now: float) -> int:
    """Watched pods whose sidecar did not answer this round and answered unhealthy less
    than `stale_after_seconds(policy)` ago: the storm gate counts them as unhealthy."""
    window = stale_after_seconds(policy)
    seen = history.unhealthy_seen
    return sum(
        1
        for f in findings.watched
        if f.unobservable and f.pod.key in seen and now - seen[f.pod.key] < window
    )


def storm_gate(
    findings: Findings, policy: Policy, elsewhere: tuple[int, int] = (0, 0), recalled: int = 0
) -> str | None:
    """Why the unhealthy share closes the gate (at least `STORM_MIN_PODS` unhealthy pods,
    more than `maxUnhealthyShare` of the watched ones, `elsewhere` and `recalled` pods
    counted), else None."""
    watched = len(findings.watched) + elsewhere[0]
    bad = sum(1 for f in findings.watched if f.unhealthy) + elsewhere[1] + recalled
    share = policy.safety.max_unhealthy_share
    if bad >= STORM_MIN_PODS and bad > share * watched:
        late = (
            f" ({recalled} by its last answer: its sidecar did not answer this round)"
            if recalled == 1
            else f" ({recalled} by their last answer: their sidecars did not answer this round)"
            if recalled
            else ""
        )
        return (
            f"{bad} of {watched} watched pods are unhealthy{late}, more than "
            f"maxUnhealthyShare {share:g}: a shared cause, not a hang"
        )
    return None


def decide(
    findings: Findings,
    policy: Policy,
    history: History,
    now: float,
    *,
    operator_max_cordoned: int = OperatorSettings.max_cordoned_nodes,
    gates: Gates | None = None,
    busy_elsewhere: int = 0,
) -> list[Decision]:
    """Every decision of this round: node operations first, then pods, then uncordons.

    `operator_max_cordoned` is the operator's cap on cordoned nodes across every policy
    (`OperatorSettings.max_cordoned_nodes`); `history` knows them all (`cordoned` and
    `cordoned_elsewhere`). `gates`: `assess_gates` of the same arguments, when the
    caller has it already. `busy_elsewhere`: the policy's pods other replicas judge on
    which a disruptive operation is in progress (sharding: `limits_ledger.in_progress`),
    counted against `maxConcurrent` with this replica's own."""
    if gates is None:
        gates = assess_gates(findings, policy, history, now)
    failed = frozenset(r.attempt for r in history.records if r.outcome is Outcome.FAILED)
    tally = _Tally(
        _in_flight(findings, history, failed) + busy_elsewhere,
        operator_max_cordoned,
        failed,
        busy_elsewhere,
    )
    decisions: list[Decision] = []
    if Operation.CORDON_NODE in policy.actions.by_verdict.get(Verdict.NODE_NETWORK_FAULT, ()):
        for node, reason in sorted(findings.faulty_nodes.items()):
            if node in history.cordoned or node in history.cordoned_elsewhere:
                continue
            draft = Decision(
                Operation.CORDON_NODE,
                Verdict.NODE_NETWORK_FAULT,
                Outcome.ACTED,
                node=node,
                reasons=(reason,),
                brokers=_node_brokers(findings, node),
            )
            decisions.append(_limited(draft, policy, gates, history, tally, now))
    for topic, found in sorted(findings.unwritable.items()):
        decisions += _topic_alerts(topic, found, policy)
    for finding in sorted(_unhealthy(findings), key=lambda f: (f.since or now, f.pod.key)):
        assert finding.verdict is not None
        if finding.verdict in BY_TOPIC:
            continue
        for action in policy.actions.by_verdict.get(finding.verdict, ()):
            if action is Operation.CORDON_NODE:
                continue
            draft = Decision(
                action,
                finding.verdict,
                Outcome.ACTED,
                pod=finding.pod,
                node=finding.pod.node,
                reasons=finding.reasons,
                brokers=tuple(sorted(finding.brokers)),
            )
            if action is not Operation.ALERT:
                draft = _limited(draft, policy, gates, history, tally, now, finding)
            decisions.append(draft)
            actions = policy.actions.by_verdict.get(finding.verdict, ())
            if draft.suppression is Suppression.FAILURE_BUDGET and Operation.ALERT not in actions:
                decisions.append(
                    dataclasses.replace(
                        draft,
                        operation=Operation.ALERT,
                        outcome=Outcome.ACTED,
                        suppression=None,
                        limit="",
                    )
                )
    decisions.extend(_uncordons(findings, policy, history, now))
    return decisions


def _topic_alerts(topic: str, found: TopicFinding, policy: Policy) -> list[Decision]:
    """One `alert` for a topic the cluster refuses writes to, when the policy alerts for
    the verdict (it can do nothing else: a new executor would meet the same refusal)."""
    verdict = Verdict.PARTITIONS_UNWRITABLE
    if Operation.ALERT not in policy.actions.by_verdict.get(verdict, ()):
        return []
    names = _names(found.pods)
    pods = f"{len(found.pods)} pod(s) write it ({names})" if topic else f"pods {names}"
    reasons = (found.reason, pods) if found.reason else (pods,)
    return [Decision(Operation.ALERT, verdict, Outcome.ACTED, reasons=reasons, topic=topic)]


def _node_brokers(findings: Findings, node: str) -> tuple[str, ...]:
    """The brokers the pods of a faulty node could not use."""
    return tuple(sorted({b for f in findings.watched if f.pod.node == node for b in f.brokers}))


def _unhealthy(findings: Findings) -> list[PodFinding]:
    return [f for f in findings.watched if f.unhealthy]


def _limited(
    draft: Decision,
    policy: Policy,
    gates: Gates,
    history: History,
    tally: _Tally,
    now: float,
    finding: PodFinding | None = None,
) -> Decision:
    """The draft, suppressed by the first limit that holds, or counted against the budget."""
    found = _limit(draft, policy, gates, history, tally, now)
    if finding is not None and draft.operation is Operation.RESTART:
        app = (draft.pod.limit_group if draft.pod is not None else None) or ""
        exhausted = budget_exhausted(finding.failure_budget, tally.per_application[app])
        if exhausted is not None and (
            found is None or found[0] is not Suppression.DRIVER_PROTECTED
        ):
            found = (Suppression.FAILURE_BUDGET, exhausted)
    if found is None:
        tally.planned += 1
        if draft.operation is Operation.CORDON_NODE:
            tally.cordons += 1
        if draft.pod is not None and draft.pod.limit_group and draft.operation in DISRUPTIVE:
            tally.per_application[draft.pod.limit_group] += 1
        if not policy.safety.dry_run:
            return draft
        found = (Suppression.DRY_RUN, "safety.dryRun is true: reported, not done")
    reason, text = found
    outcome = Outcome.DRY_RUN if reason is Suppression.DRY_RUN else Outcome.SUPPRESSED
    return dataclasses.replace(draft, outcome=outcome, suppression=reason, limit=text)


def _limit(
    draft: Decision, policy: Policy, gates: Gates, history: History, tally: _Tally, now: float
) -> tuple[Suppression, str] | None:
    safety = policy.safety
    pod = draft.pod
    if pod is not None and pod.role == Role.DRIVER and not safety.allow_driver_deletion:
        return Suppression.DRIVER_PROTECTED, "drivers are protected (allowDriverDeletion is false)"
    if pod is not None and draft.operation in DISRUPTIVE and not pod.replaceable:
        return Suppression.NO_OWNER, (
            f"{pod.key} has no controlling owner: deleting it would not bring it back"
        )
    gate = gates.first()
    if gate is not None:
        return gate
    cooldown = safety.pod_cooldown_seconds
    last = next(
        (
            r
            for r in history.recent(now, cooldown)
            if r.target == draft.target and r.starts_cooldown
        ),
        None,
    )
    if last is not None:
        return Suppression.COOLDOWN, (
            f"{draft.target} was acted on {now - last.time:.0f} s ago "
            f"(podCooldownSeconds {cooldown})"
        )
    app = pod.limit_group if pod is not None else None
    if app and draft.operation in DISRUPTIVE:
        earlier = {
            r.pod
            for r in history.recent(now, RATE_WINDOW_SECONDS)
            if r.application_id == app
            and r.operation in DISRUPTIVE
            and r.outcome in _COUNTED
            and r.pod != draft.target
            and r.attempt not in tally.failed
        }
        done = tally.per_application[app] + len(earlier)
        cap = safety.max_actions_per_application_per_hour
        if done >= cap:
            return Suppression.RATE_LIMIT, (
                f"{'owner' if pod is not None and pod.role == Role.PRODUCER else 'application'} "
                f"{app} had {done} action(s) in the last hour "
                f"(maxActionsPerApplicationPerHour {cap})"
            )
    if draft.operation is Operation.CORDON_NODE:
        capped = _cordon_cap(policy, history, tally)
        if capped is not None:
            return Suppression.MAX_CORDONED, capped
    busy = tally.in_flight + tally.planned
    if busy >= safety.max_concurrent:
        where = f", {tally.elsewhere} on other replicas' pods" if tally.elsewhere else ""
        return Suppression.MAX_CONCURRENT, (
            f"{busy} action(s) already in progress{where} (maxConcurrent {safety.max_concurrent})"
        )
    return None


def budget_exhausted(budget: FailureBudget | None, planned: int) -> str | None:
    """Why one more executor restart would end the application (Spark counts it as an
    executor failure and stops the application past `max_failures`), or None when the
    budget takes it or is unknown. `planned`: restarts of the same application already
    planned in this round (each is one more failure)."""
    if budget is None or budget.remaining is None or budget.max_failures is None:
        return None
    if budget.remaining - planned >= 1:
        return None
    setting = "spark.executor.maxNumFailures" + ("" if budget.configured else " (Spark's default)")
    window = (
        ""
        if budget.validity_seconds is None
        else f" within spark.executor.failuresValidityInterval {budget.validity_seconds:g} s"
    )
    return (
        f"restarting would be executor failure {budget.failures + planned + 1} of the "
        f"application, whose {setting} is {budget.max_failures}{window}: Spark would end "
        "the application; alerting instead"
    )


def _cordon_cap(policy: Policy, history: History, tally: _Tally) -> str | None:
    """Why one more cordon would exceed the policy's or the operator's cap, or None."""
    ours = len(history.cordoned) + tally.cordons
    cap = policy.safety.max_cordoned_nodes
    if ours >= cap:
        return f"this policy holds {ours} cordoned node(s) (safety.maxCordonedNodes {cap})"
    everyone = ours + len(history.cordoned_elsewhere)
    cap = tally.operator_max_cordoned
    if cap == 0:
        return "cordoning is off in this operator (max_cordoned_nodes 0)"
    if everyone >= cap:
        return (
            f"hangwatch holds {everyone} cordoned node(s) across all policies "
            f"(operator max_cordoned_nodes {cap})"
        )
    return None


def _in_flight(
    findings: Findings, history: History, failed: frozenset[tuple[str, Operation, int]]
) -> int:
    """Disruptive actions taken whose pod still exists (terminating, or not yet deleted),
    and nodes this policy holds cordoned (a cordon is in progress until it is lifted).
    `failed`: attempts that failed (an `acted` record of one is the ledger's twin)."""
    present = findings.present
    targets = {
        r.pod
        for r in history.records
        if r.operation in DISRUPTIVE
        and r.outcome is Outcome.ACTED
        and r.pod in present
        and r.attempt not in failed
    }
    return len(targets) + len(history.cordoned)


def _uncordons(findings: Findings, policy: Policy, history: History, now: float) -> list[Decision]:
    if not policy.actions.auto_uncordon or findings.outage:
        return []
    quiet_for = policy.actions.uncordon_healthy_for_seconds
    out = []
    for node, since in sorted(history.cordoned.items()):
        if node in findings.faulty_nodes:
            continue
        last_fault = max(history.node_fault_ts.get(node, now), since or 0.0)
        if now - last_fault < quiet_for:
            continue
        quiet = f"no network fault on node {node} for {now - last_fault:.0f} s"
        decision = Decision(
            Operation.UNCORDON_NODE,
            Verdict.HEALTHY,
            Outcome.ACTED,
            node=node,
            reasons=(f"{quiet} (healthyForSeconds {quiet_for})",),
        )
        if policy.safety.dry_run:
            decision = dataclasses.replace(
                decision,
                outcome=Outcome.DRY_RUN,
                suppression=Suppression.DRY_RUN,
                limit="safety.dryRun is true: reported, not done",
            )
        out.append(decision)
    return out


def _names(findings: Sequence[PodFinding]) -> str:
    names = [f.pod.name for f in findings[:NAMES_SHOWN]]
    more = len(findings) - len(names)
    return ", ".join(names) + (f" and {more} more" if more > 0 else "")
