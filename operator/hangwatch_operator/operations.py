"""The decision vocabulary: operations, how a decision ended, and the limit that stopped it.

One definition shared by `policies` (what `spec.actions` may name), `decisions`
(which operations the safety limits count), `history` and `reporting` (what is
remembered and shown in Events, status and metrics labels) and `actuation`.
"""

from __future__ import annotations

from enum import StrEnum

from hangwatch.contracts import Operation

__all__ = [
    "DISRUPTIVE",
    "NODE_OPERATIONS",
    "POLICY_OPERATIONS",
    "Operation",
    "Outcome",
    "Suppression",
]
"""`Operation` is defined with the public names (`hangwatch.contracts`), because each
verdict's default actions are declared beside it (`hangwatch.verdicts`); it is named
here too, with the rest of the decision vocabulary."""


POLICY_OPERATIONS = frozenset(
    {Operation.RESTART, Operation.DECOMMISSION, Operation.CORDON_NODE, Operation.ALERT}
)
"""What `spec.actions` may list (the CRD's enum says the same)."""
DISRUPTIVE = frozenset({Operation.RESTART, Operation.DECOMMISSION})
"""Operations that end an executor; rate limits count these, and `maxConcurrent` counts
these and the nodes a policy holds cordoned."""
NODE_OPERATIONS = frozenset({Operation.CORDON_NODE, Operation.UNCORDON_NODE})


class Outcome(StrEnum):
    """How a decision ended (the `outcome` label of `hangwatch_operator_decisions_total`)."""

    ACTED = "acted"
    DRY_RUN = "dry_run"
    SUPPRESSED = "suppressed"
    FAILED = "failed"


class Suppression(StrEnum):
    """The safety limit that stopped an action (`hangwatch_operator_suppressions_total`)."""

    STORM = "storm"
    RATE_LIMIT = "rate_limit"
    COOLDOWN = "cooldown"
    MAX_CORDONED = "max_cordoned"
    """A cordon past the policy's `safety.maxCordonedNodes` or the operator's cap."""
    MAX_CONCURRENT = "max_concurrent"
    CLUSTER_UNREACHABLE = "cluster_unreachable"
    LEADER_ELECTION = "leader_election"
    DRIVER_PROTECTED = "driver_protected"
    NO_OWNER = "no_owner"
    """A `producer` pod without a controlling owner: deleting it would not bring it back."""
    FAILURE_BUDGET = "failure_budget"
    """A restart would exceed the application's Spark executor failure budget."""
    DRY_RUN = "dry_run"
