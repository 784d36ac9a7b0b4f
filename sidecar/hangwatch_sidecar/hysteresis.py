"""Hysteresis: the pod's verdict changes only once a new one has held (pure).

`Debouncer` takes each round's verdict (`rules.evaluate`'s pod assessment) and replaces
the current one only after the new one held for `hold` evaluations in a row, so a single
lost probe or a 1-2 s election never flips the pod; verdicts whose evidence already held
for a threshold of its own take over at once.
"""

from __future__ import annotations

from dataclasses import dataclass

from hangwatch.contracts import Verdict

HELD_BY_THRESHOLD = frozenset(
    {Verdict.PRODUCER_HUNG, Verdict.METADATA_STALE, Verdict.WRITES_REJECTED}
)
"""Verdicts whose evidence already had to hold for a threshold (stall, heartbeat, failing
time): they take over at once instead of after `hold` more evaluations (a refusal must
replace a restart verdict in the same evaluation)."""
HELD_WHEN_MEASURED = frozenset({Verdict.PRODUCER_SILENT})
"""Alert-only verdicts that take over at once when their assessment says its evidence
held for a threshold of its own (`Assessment.held`): silence past a declared write
interval has lasted the whole interval, a second evaluation would only add a probe
round to the alert. Silence while Spark runs a task keeps the hysteresis (a task that
just started after an idle gap meets silence that is the gap's), and no restart verdict
is taken at once because of this."""


@dataclass
class Debouncer:
    """Hysteresis: a new verdict takes over only after `hold` evaluations in a row
    (at once for verdicts in `HELD_BY_THRESHOLD`, and for those in `HELD_WHEN_MEASURED`
    whose assessment is `held`)."""

    hold: int = 2
    current: Verdict = Verdict.UNKNOWN
    since: float | None = None
    _candidate: Verdict | None = None
    _count: int = 0

    def update(self, verdict: Verdict, now: float, *, held: bool = False) -> bool:
        """Feed one evaluation (`held`: its `Assessment.held`); True when the current
        verdict changed."""
        if verdict is self.current:
            self._candidate, self._count = None, 0
            if self.since is None:
                self.since = now
            return False
        if verdict is self._candidate:
            self._count += 1
        else:
            self._candidate, self._count = verdict, 1
        at_once = verdict in HELD_BY_THRESHOLD or (held and verdict in HELD_WHEN_MEASURED)
        if self._count >= self.hold or at_once:
            self.current, self.since = verdict, now
            self._candidate, self._count = None, 0
            return True
        return False
