"""A round's reports as they arrive: which pods may be decided before the poll ends.

Fed by `remediation` with each sidecar's report as its read ends (`RollingRound.read`);
tells it when to plan before the whole poll is over and on which pods, and hands it the
rolling snapshot to plan over: one report per watched pod, this round's where it has
been read, the last one read otherwise. A full poll of 10,000 sidecars takes most of a
10 s interval; a round that decided only at its end would act on a verdict up to one
interval plus one full poll after it was given (docs/performance.md).

When a plan is due: a pod that reaches at least one broker gave a verdict for which
the policy restarts or decommissions, and its last report did not (`disruptive_news`;
a pod read for the first time counts as changed), and every live pod on its node has
been read this round, so correlation judges the pod next to its peers as they are this
round, never next to their older reports. Such a pod's node is never at fault (a node
is blamed only when all its answering pods are cut off), so its effective verdict is
the one the end-of-round plan gives it. A pod cut off from every broker, which a node
fault may explain, is left to the round's end, where the witness nodes are read too.
No early plan either while a watched pod has never been read (the first round of a
policy, a pod new since the last round: `poll_order` reads those first), so the
unhealthy share and every gate count one real report per pod, as at the end of a
round. Unchanged or healthy reports plan nothing: 10,000 healthy reads cost no plan.

What an early plan sees: the pod and its node as read this round, the rest of the
policy's pods as read this round or the round before, so at most one interval older
than the end-of-round plan's input, never fresher. A gate that pods not yet read this
round would close (an election, a broker-wide fault, the unhealthy share) is missed by
an early plan and seen by the round's end, after the early action; `maxConcurrent`,
the rate limit and cooldowns bound what can happen meanwhile, as they bound a round in
which a fault begins just after the first sidecars were read. The unhealthy share is
also judged over the pods read this round alone (`sample`, `rounds.storm_in_sample`):
at the start of a shared fault the snapshot's share is diluted by reports from before
it, the sample's is not, and an early plan waits for the round's end while the sample
alone would close the gate.

Pure: no I/O, no clock.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Collection, Iterable, Mapping, Sequence

from hangwatch.contracts import Verdict
from hangwatch_operator.operations import Operation
from hangwatch_operator.policies import Policy
from hangwatch_operator.sidecar_status import PodReport
from hangwatch_operator.watched import WatchedPod

EARLY_OPERATIONS = frozenset({Operation.RESTART, Operation.DECOMMISSION})
"""What may be carried out before a round's end: operations on one pod. Cordons and
uncordons wait for the end, where every witness node is read this round."""


def restarting_verdicts(policy: Policy) -> frozenset[Verdict]:
    """The verdicts for which the policy restarts or decommissions the pod."""
    return frozenset(
        verdict
        for verdict, actions in policy.actions.by_verdict.items()
        if EARLY_OPERATIONS.intersection(actions)
    )


def disruptive_news(
    previous: PodReport | None, current: PodReport, restarting: frozenset[Verdict]
) -> bool:
    """Whether `current` gives a verdict in `restarting` that `previous` (the pod's last
    report, None when never read) did not give, from a pod that reaches a broker. A pod
    cut off from every broker is left to the round's end: whether its node is at fault
    depends on witness pods on other nodes, read this round only by then."""
    status = current.status
    if status is None or status.verdict not in restarting or status.cut_off:
        return False
    return (
        previous is None
        or previous.status is None
        or (previous.status.verdict is not status.verdict)
    )


def _node(pod: WatchedPod) -> str:
    """A pod's node for completeness; a pod without one is a node of its own."""
    return pod.node or f"pod/{pod.key}"


class RollingRound:
    """The reports of one round as they arrive, over the previous round's."""

    def __init__(
        self,
        pods: Sequence[WatchedPod],
        previous: Mapping[str, PodReport],
        restarting: frozenset[Verdict],
    ) -> None:
        self.pods = tuple(pods)
        self.live = tuple(p for p in self.pods if not p.terminating)
        self.restarting = restarting
        self.latest: dict[str, PodReport] = {
            p.key: previous[p.key] for p in self.live if p.key in previous
        }
        """Pod key -> its latest report (this round's once read)."""
        self.fresh: set[str] = set()
        self.never_read = sum(1 for p in self.live if p.key not in self.latest)
        self.unread: dict[str, int] = defaultdict(int)
        """Node -> live pods on it not read yet this round."""
        for pod in self.live:
            self.unread[_node(pod)] += 1
        self.waiting: dict[str, set[str]] = defaultdict(set)
        """Node -> pods on it with disruptive news, not yet handed to a plan."""
        self.due: set[str] = set()

    def poll_order(self) -> list[WatchedPod]:
        """The live pods in the order to read them: never read first, then node by node
        (a node's pods read together, so that it is soon complete)."""
        return sorted(self.live, key=lambda p: (p.key in self.latest, _node(p), p.key))

    def read(self, report: PodReport) -> bool:
        """Take one pod's report of this round; True when a plan is due (`take_due`)."""
        key = report.pod.key
        if key in self.fresh:
            return False
        previous = self.latest.get(key)
        self.latest[key] = report
        self.fresh.add(key)
        if previous is None:
            self.never_read -= 1
        node = _node(report.pod)
        self.unread[node] -= 1
        if disruptive_news(previous, report, self.restarting):
            self.waiting[node].add(key)
        if self.never_read:
            return False
        if previous is None and self.never_read == 0:  # the last never-read pod: all nodes
            nodes: Iterable[str] = list(self.waiting)
        else:
            nodes = (node,)
        for name in nodes:
            if self.unread[name] == 0 and name in self.waiting:
                self.due |= self.waiting.pop(name)
        return bool(self.due)

    def take_due(self) -> frozenset[str]:
        """The pods to decide now (each handed out once per round)."""
        due = frozenset(self.due)
        self.due.clear()
        return due

    def snapshot(self, gone: Collection[str] = ()) -> list[PodReport]:
        """One report per watched pod: the latest of each live pod (a pod never read: an
        error report, which no early plan sees), then the terminating pods, unpolled;
        without the pods `gone` from the cluster since the round began (a restart
        carried out earlier in the round is in progress until its pod is gone)."""
        return [
            *(
                self.latest.get(p.key) or PodReport(p, error="not read yet")
                for p in self.live
                if p.key not in gone
            ),
            *(PodReport(p) for p in self.pods if p.terminating and p.key not in gone),
        ]

    def sample(self) -> list[PodReport]:
        """The reports read so far this round (`rounds.storm_in_sample`)."""
        return [self.latest[key] for key in sorted(self.fresh)]

    def complete(self) -> bool:
        """Every live pod read this round."""
        return len(self.fresh) == len(self.live)
