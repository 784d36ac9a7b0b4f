"""A scenario's row of the demo's table: what its run found out, scored.

A fault's row is ok when the expected verdict came, a restart happened exactly when a
restart helps, no forbidden verdict was seen, nothing was lost and the run started; a
control's when no forbidden verdict came and nothing was restarted.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from hangwatch_demo.job_sizing import detect_bound
from hangwatch_demo.scenario_run import ScenarioRun


@dataclass
class DemoRow:
    """One line of the demo's table (and one object of its JSON)."""

    scenario: str
    seed: str
    producer: str
    engine: str
    """The lab engine the scenario ran on: `kafka` (Apache Kafka) or `mock` (librdkafka's
    protocol emulation, for faults only it can make)."""
    fault: str
    fault_short: str
    expected: str
    verdict: str
    detect_seconds: float | None
    action: str
    progress_again_seconds: float | None
    events: int
    lost: int
    """Events of the run missing from the topic when it was read back after the run: each
    was handed to a producer and never written (acknowledged or not). 0 when the run never
    started (`not_started`): nothing was sent, so nothing can be lost."""
    duplicates: int
    ok: bool
    restarts: int = 0
    task_retries: int = 0
    longest_silence_seconds: float | None = None
    """Plain producers: the longest every-connection silence a sidecar reported."""
    silence_cleared: list[str] = field(default_factory=list)
    """Plain producers: why a sidecar judged such a silence healthy (one reason a source)."""
    detect_bound_seconds: float | None = None
    """The scenario's detection bound (`detect_bound`; None for controls), shown beside
    `detect_seconds`: a timing (benchmarks/detection.py), never a reason for `ok` False."""
    restart_seconds: float | None = None
    """Fault to the first executor restart (None: nothing restarted)."""
    reasons: list[str] = field(default_factory=list)
    changes: list[tuple[float, str]] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    not_started: bool = False
    """No event of the run was written in time: nothing can have been lost, the row fails
    on its problem ("not started ...") and `lost` stays 0."""


def score_row(
    run: ScenarioRun,
    events: int,
    lost: int,
    duplicates: int,
    again: float | None,
    summary: Any,
) -> DemoRow:
    s = run.setup.scenario
    seen = [c.split(" ", 1)[1] for _, c in run.changes]
    if s.control:
        behaved = not ({str(v) for v in s.forbidden} & set(seen)) and not run.restarted
        verdict = next((v for v in seen if v != str(s.baseline)), str(s.baseline))
    else:
        # a forbidden verdict (a refusal's restart verdicts) fails the row even when the
        # expected one came too
        behaved = (
            run.detect is not None
            and bool(run.restarted) == s.restart_helps
            and not ({str(v) for v in s.forbidden} & set(seen))
        )
        verdict = str(s.expect) if run.detect is not None else (seen[-1] if seen else "-")
    action = action_summary(run.actions, run.restarted)
    return DemoRow(
        scenario=s.name,
        seed=s.seed,
        producer=s.producer,
        engine=s.engine,
        fault=s.fault,
        fault_short=s.label or s.fault,
        expected=str(s.expect),
        verdict=verdict,
        detect_seconds=run.detect,
        action=action,
        progress_again_seconds=again,
        events=events,
        lost=lost if run.started else 0,
        duplicates=duplicates,
        ok=behaved and lost == 0 and run.started and not run.problems,
        restarts=len(run.restarted),
        task_retries=summary.failed_attempts if summary is not None else 0,
        longest_silence_seconds=run.longest_silence,
        silence_cleared=run.silence_cleared,
        detect_bound_seconds=None if s.control else round(detect_bound(s, run.setup.timing), 2),
        restart_seconds=run.restart_at,
        reasons=run.reasons,
        changes=run.changes,
        problems=run.problems,
        not_started=not run.started,
    )


def action_summary(actions: list[str], restarted: list[tuple[str, str]]) -> str:
    """The table's action cell: restarts, else the first suppression, else alerts."""
    if restarted:
        verdicts = ", ".join(sorted({verdict for _, verdict in restarted}))
        return f"restart {', '.join(name for name, _ in restarted)} ({verdicts})"
    suppressed = [a for a in actions if " suppressed: " in a]
    if suppressed:
        return suppressed[0]
    alerted = {a.rsplit(" (", 1)[1].rstrip(")") for a in actions if a.startswith("alert")}
    return f"alert only ({', '.join(sorted(alerted))})" if alerted else "none"


def as_dict(row: DemoRow) -> dict[str, Any]:
    return asdict(row)
