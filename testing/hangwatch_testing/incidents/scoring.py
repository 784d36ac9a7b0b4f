"""A field-corpus row's replays summed into its scorecard row (`hangwatch_demo.report.scorecard`).

Per run: did the client hang (alive, and no write completed in the last HUNG_TAIL_SECONDS
of the watch, which every field row makes outlast its fault by more than that), did it
end by itself, when did the sidecar first accuse the producer after the client's last
completed write (and how long after it), did a sidecar accuse a client that went on (a
false alarm), what did the restarted client do (`score_row`: pure, it only reads
`Replay`s). `write_scorecard` puts the rows into the scorecard the run report keeps and
renders docs/incidents.md's scorecard section from it (`docs_section`: between
SECTION_START and SECTION_END).
"""

from __future__ import annotations

from pathlib import Path

from hangwatch_demo.report.scorecard import (
    PRODUCER_FLAGS,
    SCORECARD_FILE,
    Scorecard,
    ScoreRow,
    encode,
    markdown,
    merged,
    read_scorecard,
)
from hangwatch_lab import kafkajars
from hangwatch_testing.clients.runs import SidecarTiming
from hangwatch_testing.incidents.model import DECLARED_INTERVAL, Incident
from hangwatch_testing.incidents.replay import Replay

HUNG_TAIL_SECONDS = 20.0
"""A run hung when its client, still running, completed no write in this last stretch of
the watch (the fault over well before it)."""


def last_write(result: Replay) -> float | None:
    """Seconds from the fault to the client's last completed write (negative: before the
    fault); None when it never completed one."""
    if result.last_ack_after is not None:
        return result.last_ack_after
    if result.last_ack_before_fault is not None:
        return -result.last_ack_before_fault
    return None


def hung(result: Replay) -> bool:
    """The client stopped completing writes for good: alive at the end, nothing completed
    in the watch's last HUNG_TAIL_SECONDS."""
    if result.client_exit is not None:
        return False
    last = last_write(result)
    return last is None or last < result.watched_seconds - HUNG_TAIL_SECONDS


def first_flag(result: Replay) -> tuple[float, str] | None:
    """(seconds from the client's last completed write, verdict) of the sidecar's first
    accusation of the producer from that write on; None without one."""
    last = last_write(result)
    since = last if last is not None else 0.0
    for at, verdict, _ in result.changes:
        if verdict in PRODUCER_FLAGS and at >= since:
            return round(at - since, 2), verdict
    return None


def after_fault_end(result: Replay, after_last_write: float) -> float:
    """A flag's seconds from the fault's end (negative: during the fault; an instant fault
    ends where it starts)."""
    at = after_last_write + (last_write(result) or 0.0)
    return round(at - (result.fault_ended_after or 0.0), 2)


def accused(result: Replay) -> bool:
    """The sidecar accused the producer at any moment of the watch."""
    return any(verdict in PRODUCER_FLAGS for _, verdict, _ in result.changes)


def bound_seconds(incident: Incident, timing: SidecarTiming) -> float:
    """The done-when bound on a flag: the row's declared write interval (else the stall
    threshold) plus one probe interval."""
    args = list(incident.sidecar_args)
    stall = (
        float(args[args.index(DECLARED_INTERVAL) + 1])
        if DECLARED_INTERVAL in args
        else timing.stall_seconds
    )
    return stall + timing.probe_interval_seconds


def score_row(incident: Incident, results: list[Replay], timing: SidecarTiming) -> ScoreRow:
    """`incident`'s scorecard row from its replays (at least one)."""
    case = incident.case
    if case is None or not results:
        raise ValueError(f"{incident.id}: a scorecard row needs a field case and a replay")
    stuck = [r for r in results if hung(r)]
    flagged = [(r, f) for r, f in ((r, first_flag(r)) for r in stuck) if f is not None]
    flags = [f for _, f in flagged]
    exits = sorted({r.client_exit for r in results if r.client_exit is not None})
    went_on = [r for r in results if not hung(r) and r.client_exit is None]
    errors: dict[str, int] = {}
    for r in stuck:
        for text, n in r.error_kinds.items():
            errors[text] = errors.get(text, 0) + n
    note = []
    if exits:
        note.append(f"exit codes {', '.join(map(str, exits))}")
    if errors:
        text, n = max(errors.items(), key=lambda kv: kv[1])
        note.append(f"the hung clients' own errors: {sum(errors.values())} ({n} x {text[:80]})")
    return ScoreRow(
        row=incident.id,
        case=case.id,
        family=case.family,
        report=case.report,
        client=incident.label,
        release=incident.client,
        role="control" if incident.control else "affected",
        where=incident.where.value,
        kafka=incident.kafka_version or kafkajars.default_version(),
        fault=incident.fault,
        runs=len(results),
        hung=len(stuck),
        exited=sum(1 for r in results if r.client_exit is not None),
        flagged=len(flags),
        flag_after_last_write=[t for t, _ in flags],
        first_flags=[v for _, v in flags],
        flag_after_fault_end=[after_fault_end(r, f[0]) for r, f in flagged],
        false_alarms=sum(1 for r in went_on if accused(r)),
        verdicts=sorted({v for r in results for _, v, _ in r.changes}),
        bound_seconds=bound_seconds(incident, timing),
        restarted=sum(1 for r in results if r.restarted),
        restart_wrote=[r.restarted_first_ack for r in results if r.restarted_first_ack is not None],
        note="; ".join(note),
    )


SECTION_START = "<!-- scorecard: benchmarks/incidents.py --scorecard writes it -->"
SECTION_END = "<!-- /scorecard -->"
SCORECARD_PATH = Path("demo/hangwatch_demo/report") / SCORECARD_FILE
DOCS_PATH = Path("docs/incidents.md")


def docs_section(docs: str, card: Scorecard) -> str:
    """`docs` with the text between SECTION_START and SECTION_END replaced by the
    scorecard's markdown; ValueError when the markers are missing."""
    head, start, rest = docs.partition(SECTION_START)
    _, end, tail = rest.partition(SECTION_END)
    if not start or not end:
        raise ValueError(f"{DOCS_PATH}: no scorecard section ({SECTION_START} ... {SECTION_END})")
    return f"{head}{start}\n{markdown(card)}{end}{tail}"


def write_scorecard(rows: list[ScoreRow], measured: str, repo: Path) -> list[Path]:
    """`rows` into the kept scorecard under `repo` (replacing rows of the same id), then
    docs/incidents.md's section rendered from it; the paths written."""
    kept_path = repo / SCORECARD_PATH
    card = merged(read_scorecard(kept_path.read_bytes(), str(kept_path)), rows, measured)
    kept_path.write_bytes(encode(card))
    docs_path = repo / DOCS_PATH
    docs_path.write_text(docs_section(docs_path.read_text(), card))
    return [kept_path, docs_path]
