"""Each verdict's parts, declared once: `VERDICTS`, one `VerdictParts` per verdict.

A verdict is more than its wire name (`hangwatch.contracts.Verdict`): a policy's
`spec.actions` field and its default actions, whether a restart may help (the CRD
forbids restart and decommission where it cannot), whether a node may be cordoned for
it, who gives it, its colour in the run report, the chart's alerts that fire for it, a
dashboard panel of its own, and its line in docs/contracts.md. Everything else derives
from this table or is tested against it: the operator's `ACTION_FIELDS`,
`DEFAULT_ACTIONS` and restart refusals (`hangwatch_operator.policies`), the verdicts a
sidecar may not claim (`hangwatch_operator.sidecar_status`), the report's colours
(`hangwatch_demo.report.figures`), the dashboard's per-verdict panels
(scripts/generate_dashboard.py), the CRD's `spec.actions` fields, defaults, CEL rules
and verdict enums (both copies), the chart's alert rules, and the verdict table of
docs/contracts.md (scripts/generate_references.py writes it; tests/wire/
test_verdict_parts.py fails when any part is missing or disagrees).

A new verdict: a member of `Verdict`, a row here, then what the tests name (the CRD's
field, its alert if any); the sidecar's rule that gives it goes into
`hangwatch_sidecar.rules` (docs/architecture.md). Pure: no I/O.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum

from hangwatch.contracts import Operation, Verdict


class JudgedBy(StrEnum):
    """Who gives a verdict."""

    SIDECAR = "sidecar"
    """One pod's sidecar, from what it observes (`hangwatch_sidecar.rules`)."""
    OPERATOR = "operator"
    """The operator only, from several pods (a sidecar claiming it is refused)."""


@dataclass(frozen=True)
class Panel:
    """A dashboard panel of a verdict's own: how many producers have it, per application
    (every verdict is also in the dashboard's "Pods by verdict" panels)."""

    title: str
    description: str


@dataclass(frozen=True)
class VerdictParts:
    """One verdict and everything that names it. No field has a default: a verdict that
    lacks a part does not construct."""

    verdict: Verdict
    meaning: str
    """One line: what the verdict says (docs/contracts.md)."""
    judged_by: JudgedBy
    default_actions: tuple[Operation, ...] | None
    """What a policy does by default (`spec.actions.<field>`'s default); None: the verdict
    has no `spec.actions` field (nothing to act on)."""
    restart_may_help: bool
    """False: the cluster, not the producer, is at fault (or a refusal the next client
    meets again, or nothing judged): policies may not restart or decommission for it
    (the CRD's rule and `hangwatch_operator.policies` refuse it)."""
    node_at_fault: bool
    """True: a policy may cordon the pod's node for it (`cordonNode`)."""
    colour: str
    """Its band's colour in the run report's timelines (`#rrggbb`)."""
    alerts: tuple[str, ...]
    """The chart's alert rules (charts/hangwatch/files/alerts.yaml) that fire for it, on
    the verdict or on the evidence behind it."""
    panel: Panel | None
    """A dashboard panel of its own (scripts/generate_dashboard.py), or None."""

    @property
    def action_field(self) -> str | None:
        """Its `spec.actions` field (the wire name in camelCase), None when it has none."""
        if self.default_actions is None:
            return None
        first, *rest = str(self.verdict).split("_")
        return first + "".join(part.capitalize() for part in rest)


VERDICTS: tuple[VerdictParts, ...] = (
    VerdictParts(
        Verdict.HEALTHY,
        meaning="nothing wrong that the sidecar sees: its producers make progress, or idle",
        judged_by=JudgedBy.SIDECAR,
        default_actions=None,
        restart_may_help=False,
        node_at_fault=False,
        colour="#4caf50",
        alerts=(),
        panel=None,
    ),
    VerdictParts(
        Verdict.BROKER_DEGRADED,
        meaning=(
            "some brokers or bootstrap entries fail from this pod, or its own connections "
            "to a broker are blackholed: producers can still work, not their fault"
        ),
        judged_by=JudgedBy.SIDECAR,
        default_actions=(Operation.ALERT,),
        restart_may_help=False,
        node_at_fault=False,
        colour="#ffc107",
        alerts=("HangwatchBrokerBlackholed", "HangwatchBrokerUnreachable"),
        panel=None,
    ),
    VerdictParts(
        Verdict.CLUSTER_UNREACHABLE,
        meaning="no broker answers from this pod (S0): the cluster or the path, never a restart",
        judged_by=JudgedBy.SIDECAR,
        default_actions=(Operation.ALERT,),
        restart_may_help=False,
        node_at_fault=False,
        colour="#ff7043",
        alerts=("HangwatchClusterUnreachable",),
        panel=None,
    ),
    VerdictParts(
        Verdict.LEADER_ELECTION,
        meaning=(
            "partitions the pod writes have no leader (S2): expected within the election "
            "grace, still the cluster's beyond it"
        ),
        judged_by=JudgedBy.SIDECAR,
        default_actions=(Operation.ALERT,),
        restart_may_help=False,
        node_at_fault=False,
        colour="#90caf9",
        alerts=("HangwatchLeaderElectionStuck",),
        panel=None,
    ),
    VerdictParts(
        Verdict.METADATA_STALE,
        meaning=(
            "a producer's view of the cluster is wrong while the cluster answers (S1): its "
            "requests are answered and nothing is delivered; a restart is the fix"
        ),
        judged_by=JudgedBy.SIDECAR,
        default_actions=(Operation.RESTART,),
        restart_may_help=True,
        node_at_fault=False,
        colour="#ab47bc",
        alerts=("HangwatchMetadataStale",),
        panel=Panel(
            "Producers with stale metadata",
            "Producers whose latest verdict is metadata_stale, per application.",
        ),
    ),
    VerdictParts(
        Verdict.PRODUCER_HUNG,
        meaning=(
            "a producer is stuck while the cluster is healthy (S2, S4): positive evidence "
            "that it sends nothing it should; a restart is the fix"
        ),
        judged_by=JudgedBy.SIDECAR,
        default_actions=(Operation.RESTART,),
        restart_may_help=True,
        node_at_fault=False,
        colour="#d32f2f",
        alerts=("HangwatchProducerHung",),
        panel=None,
    ),
    VerdictParts(
        Verdict.PRODUCER_SILENT,
        meaning=(
            "every connection of the pod to brokers silent while it should write, and "
            "nothing shows whether the producer is stuck or the task busy elsewhere: "
            "alert only by default"
        ),
        judged_by=JudgedBy.SIDECAR,
        default_actions=(Operation.ALERT,),
        restart_may_help=True,
        node_at_fault=False,
        colour="#f48fb1",
        alerts=("HangwatchProducerSilent",),
        panel=None,
    ),
    VerdictParts(
        Verdict.WRITES_REJECTED,
        meaning=(
            "the cluster refuses the producer's writes for a reason the next client meets "
            "again (a record above the topic's limit, a missing ACL, refused credentials, "
            "a topic that does not exist): alert only"
        ),
        judged_by=JudgedBy.SIDECAR,
        default_actions=(Operation.ALERT,),
        restart_may_help=False,
        node_at_fault=False,
        colour="#00897b",
        alerts=("HangwatchWritesRejected",),
        panel=Panel(
            "Producers whose writes are refused",
            "Producers whose latest verdict is writes_rejected (the cluster refuses their "
            "writes for a reason a restart cannot fix: /status names the error), per "
            "application.",
        ),
    ),
    VerdictParts(
        Verdict.PARTITIONS_UNWRITABLE,
        meaning=(
            "the cluster refuses writes to partitions the pod's producers write, for its "
            "own reason: their ISR below min.insync.replicas (acks=all), their leader's log "
            "directory failed (issue 43): alert only, said once per topic by the operator"
        ),
        judged_by=JudgedBy.SIDECAR,
        default_actions=(Operation.ALERT,),
        restart_may_help=False,
        node_at_fault=False,
        colour="#6d4c41",
        alerts=("HangwatchPartitionsUnwritable",),
        panel=Panel(
            "Producers whose partitions the cluster refuses",
            "Producers whose latest verdict is partitions_unwritable (the cluster refuses "
            "writes to partitions they write: ISR below min.insync.replicas, a failed log "
            "directory; /status and the operator's unwritableTopics name the topic), per "
            "application.",
        ),
    ),
    VerdictParts(
        Verdict.UNKNOWN,
        meaning=(
            "nothing to judge: no probe round yet, or no producer telemetry, no connection "
            "to a broker and no producer thread in the executor's JVM"
        ),
        judged_by=JudgedBy.SIDECAR,
        default_actions=(),
        restart_may_help=False,
        node_at_fault=False,
        colour="#9e9e9e",
        alerts=(),
        panel=None,
    ),
    VerdictParts(
        Verdict.NODE_NETWORK_FAULT,
        meaning=(
            "pods on one node are cut off from the brokers while pods on other nodes reach "
            "them: the node's network (the operator's correlation)"
        ),
        judged_by=JudgedBy.OPERATOR,
        default_actions=(Operation.ALERT,),
        restart_may_help=True,
        node_at_fault=True,
        colour="#5d4037",
        alerts=("HangwatchNodeCordoned",),
        panel=None,
    ),
)
"""Every verdict's parts, in the order of `Verdict`."""

_BY_VERDICT = {parts.verdict: parts for parts in VERDICTS}
_COLOUR = re.compile(r"^#[0-9a-f]{6}$")


class DeclarationError(Exception):
    """`VERDICTS` does not declare every verdict exactly once, or a part is malformed."""


def parts_of(verdict: Verdict) -> VerdictParts:
    """The parts of `verdict`."""
    return _BY_VERDICT[verdict]


def _check(declared: tuple[VerdictParts, ...]) -> None:
    """Refuse a table that misses a verdict, repeats one, or carries a malformed part."""
    seen = [parts.verdict for parts in declared]
    if sorted(seen) != sorted(Verdict) or len(set(seen)) != len(seen):
        missing = sorted(set(Verdict) - set(seen))
        raise DeclarationError(f"VERDICTS must declare each verdict once; missing: {missing}")
    for parts in declared:
        if not _COLOUR.match(parts.colour) or not parts.meaning:
            raise DeclarationError(f"{parts.verdict}: a colour #rrggbb and a meaning are needed")
        disruptive = {Operation.RESTART, Operation.DECOMMISSION} & set(parts.default_actions or ())
        if disruptive and not parts.restart_may_help:
            raise DeclarationError(f"{parts.verdict}: restart by default, yet none may help")


_check(VERDICTS)


def contracts_table() -> str:
    """The verdict table of docs/contracts.md (scripts/generate_references.py puts it in)."""
    lines = [
        "| verdict | given by | `spec.actions` field | default | restart or decommission "
        "| alerts | meaning |",
        "|---|---|---|---|---|---|---|",
    ]
    for parts in VERDICTS:
        field = f"`{parts.action_field}`" if parts.action_field else "none"
        actions = parts.default_actions
        default = "none" if actions is None else f"`[{', '.join(map(str, actions))}]`"
        restart = "allowed" if parts.restart_may_help else "refused"
        if actions is None:
            restart = "none"
        alerts = ", ".join(f"`{a}`" for a in parts.alerts) or "none"
        lines.append(
            f"| `{parts.verdict}` | {parts.judged_by} | {field} | {default} | {restart} "
            f"| {alerts} | {parts.meaning} |"
        )
    return "\n".join(lines) + "\n"
