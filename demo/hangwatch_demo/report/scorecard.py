"""The field corpus's scorecard: published producer hangs replayed, and what hangwatch said.

One `ScoreRow` per replayed row (a client at the release a report names as affected, or
its control), summed over its runs by `benchmarks/incidents.py --scorecard FILE`: in how
many runs the client hung (stopped completing writes for good), which verdicts the
sidecar gave, how long after the client's last completed write it first flagged the
producer, what restarting the client did, and, for a control, whether it was ever
flagged (a false alarm). `Scorecard` is the file (`SCORECARD_FILE`, kept in this package
so that every run report shows the figures measured last); `read_scorecard` checks a
file's every field (it is input), `markdown` renders docs/incidents.md's table and
`html_table` the run report's. Pure: no I/O.
"""

from __future__ import annotations

import html as htmlib
import statistics
from typing import Annotated, Literal

import msgspec

from hangwatch.errors import one_line
from hangwatch_demo.report.records import Count, Name, RecordError, Seconds, Text

SCORECARD_FILE = "field-corpus.json"
"""The scorecard's file in this package (package data)."""
MAX_ROWS = 200
Runs = Annotated[int, msgspec.Meta(ge=1, le=1000)]
SecondsList = Annotated[list[Seconds], msgspec.Meta(max_length=1000)]
SignedList = Annotated[
    list[Annotated[float, msgspec.Meta(ge=-1e7, le=1e7)]], msgspec.Meta(max_length=1000)
]
Names = Annotated[list[Name], msgspec.Meta(max_length=50)]
PRODUCER_FLAGS = ("producer_hung", "producer_silent", "metadata_stale")
"""The verdicts that accuse the producer (the rest name the cluster, or nothing): the
scorecard's "flagged", and on a control, a false alarm."""


class ScoreRow(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """One replayed row, summed over its runs."""

    row: Name
    """The replayed row's id (hangwatch_testing.incidents.catalogue)."""
    case: Name
    """The report's id, e.g. `kafka-go#451`."""
    family: Name
    report: Text
    """The public report's link."""
    client: Text
    """The client, its release and how it was configured."""
    release: Name
    role: Literal["affected", "control"]
    where: Name
    """Where the client ran: `a producer pod` or `inside Spark`."""
    kafka: Name
    """The Apache Kafka release of the lab."""
    fault: Text
    runs: Runs
    hung: Count
    """Runs in which the client stopped completing writes for good (the report's hang)."""
    exited: Count = 0
    """Runs in which the client's process ended by itself (a crash is not a hang)."""
    flagged: Count = 0
    """Runs that hung in which the sidecar accused the producer (PRODUCER_FLAGS) after
    the client's last completed write."""
    flag_after_last_write: SecondsList = msgspec.field(default_factory=list)
    """Per flagged run: seconds from the client's last completed write to the first flag."""
    first_flags: Names = msgspec.field(default_factory=list)
    """The first flag of each flagged run."""
    flag_after_fault_end: SignedList = msgspec.field(default_factory=list)
    """Per flagged run: seconds from the fault's end (the cluster whole again) to the first
    flag; negative when it came during the fault. Silence is not the producer's while the
    cluster refuses it, so a flag is late only when it is past the bound from both."""
    false_alarms: Count = 0
    """Runs that did NOT hang (a control's, or an affected client that went on) in which
    the sidecar accused the producer all the same."""
    verdicts: Names = msgspec.field(default_factory=list)
    """Every verdict the sidecar gave in any run (sorted)."""
    bound_seconds: Seconds | None = None
    """The done-when bound on `flag_after_last_write`: the declared write interval (or the
    stall threshold) plus one probe interval."""
    restarted: Count = 0
    """Runs whose client was restarted after the watch."""
    restart_wrote: SecondsList = msgspec.field(default_factory=list)
    """Per restarted run whose fresh client completed a write: seconds to its first one."""
    note: Text = ""
    """What the runs showed that the counts do not say (a client's own error, a crash)."""


class Scorecard(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    measured: Text
    """Where and how the rows were measured (the machine, its load, the command)."""
    rows: Annotated[list[ScoreRow], msgspec.Meta(max_length=MAX_ROWS)]


def encode(card: Scorecard) -> bytes:
    """The scorecard file's bytes (indented JSON, rows in order)."""
    return msgspec.json.format(msgspec.json.encode(card), indent=2) + b"\n"


def read_scorecard(data: bytes | str, source: str) -> Scorecard:
    """The scorecard in `data`; RecordError naming `source` and what is wrong."""
    try:
        card = msgspec.json.decode(data, type=Scorecard)
    except msgspec.ValidationError as exc:
        raise RecordError(one_line(f"{source}: not a scorecard: {exc}")) from None
    except msgspec.DecodeError as exc:
        raise RecordError(one_line(f"{source}: not JSON: {exc}")) from None
    ids = [row.row for row in card.rows]
    if len(set(ids)) != len(ids):
        raise RecordError(one_line(f"{source}: a row is listed twice"))
    for row in card.rows:
        went_on = row.runs - row.hung - row.exited
        if went_on < 0 or row.flagged > row.hung or row.false_alarms > went_on:
            raise RecordError(one_line(f"{source}: row {row.row}: more runs counted than made"))
        if len(row.flag_after_last_write) != row.flagged or len(row.first_flags) != row.flagged:
            raise RecordError(
                one_line(f"{source}: row {row.row}: one time and flag per flagged run")
            )
        if row.flag_after_fault_end and len(row.flag_after_fault_end) != row.flagged:
            raise RecordError(
                one_line(f"{source}: row {row.row}: one time and flag per flagged run")
            )
        if row.restarted > row.runs or len(row.restart_wrote) > row.restarted:
            raise RecordError(one_line(f"{source}: row {row.row}: more restarts counted than made"))
    return card


def merged(card: Scorecard, rows: list[ScoreRow], measured: str) -> Scorecard:
    """`card` with `rows` replacing the rows of the same id (new ones appended), and
    `measured` said of them (after what was said of the rows kept)."""
    fresh = {row.row: row for row in rows}
    kept = [fresh.pop(row.row, row) for row in card.rows]
    if not card.rows:
        notes = measured  # nothing measured before: no earlier note to keep
    elif measured in card.measured:
        notes = card.measured
    else:
        notes = f"{card.measured} {measured}"
    return Scorecard(measured=notes.strip(), rows=[*kept, *fresh.values()])


def _span(values: list[float]) -> str:
    """`median (max)`, or the one value."""
    if len(values) == 1:
        return f"{values[0]:.1f}"
    return f"{statistics.median(values):.1f} ({max(values):.1f})"


def reproduced(row: ScoreRow) -> str:
    """How many runs hung, in the table's words."""
    text = f"hung {row.hung} of {row.runs}"
    if row.exited:
        text += f"; the process ended by itself in {row.exited}"
    return text


def flag(row: ScoreRow) -> str:
    """The sidecar's first flag after the last completed write, and how long after it."""
    if not row.flagged:
        return "**never flagged**" if row.hung else "-"
    kinds = ", ".join(f"`{v}`" for v in sorted(set(row.first_flags)))
    within = ""
    if row.bound_seconds is not None:
        within = f", bound {row.bound_seconds:g} s" + (": **late**" if late(row) else "")
    healed = [t for t in row.flag_after_fault_end if t >= 0]
    after_end = f" ({_span(healed)} s after the fault ended)" if healed else ""
    return (
        f"{kinds} in {row.flagged} of the {row.hung} that hung, "
        f"{_span(row.flag_after_last_write)} s after the last write{after_end}{within}"
    )


def late(row: ScoreRow) -> bool:
    """A flag past the bound both from the client's last completed write and from the
    fault's end (while the fault lasts, silence is the cluster's to explain)."""
    if row.bound_seconds is None:
        return False
    ends = row.flag_after_fault_end or [row.bound_seconds + 1] * row.flagged
    return any(
        since_write > row.bound_seconds and since_end > row.bound_seconds
        for since_write, since_end in zip(row.flag_after_last_write, ends, strict=True)
    )


def restart(row: ScoreRow) -> str:
    """What restarting the client did."""
    if not row.restarted:
        return "not restarted"
    if not row.restart_wrote:
        return f"no write within the watch in {row.restarted} of {row.restarted}"
    return (
        f"wrote again in {len(row.restart_wrote)} of {row.restarted}, "
        f"{_span(row.restart_wrote)} s after the restart"
    )


def false_alarm(row: ScoreRow) -> str:
    """Flags on runs whose client did not hang (a control's above all)."""
    went_on = row.runs - row.hung - row.exited
    if not went_on:
        return "-"
    return "none" if not row.false_alarms else f"**{row.false_alarms} of {went_on} runs**"


COLUMNS = (
    "report",
    "client, release",
    "role",
    "fault (Apache Kafka)",
    "reproduced",
    "sidecar's first flag after the last write",
    "verdicts seen",
    "a restart",
    "false alarm (runs that went on)",
)


def cells(row: ScoreRow) -> list[str]:
    """One row's cells after the report's, in COLUMNS' order (text; `**` marks what is
    wrong, backquotes a verdict)."""
    return [
        row.client,
        row.role,
        f"{row.fault} (Kafka {row.kafka})",
        reproduced(row) + (f"; {row.note}" if row.note else ""),
        flag(row),
        ", ".join(f"`{v}`" for v in row.verdicts) or "-",
        restart(row),
        false_alarm(row),
    ]


def wrong(row: ScoreRow) -> bool:
    """A row the done-when fails: a control flagged, a hung client not flagged, a flag
    later than its bound."""
    return row.false_alarms > 0 or late(row) or row.flagged < row.hung


def markdown(card: Scorecard) -> str:
    """docs/incidents.md's scorecard: the table, then how it was measured."""
    lines = ["| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    for row in card.rows:
        shown = [f"[{row.case}]({row.report})", *cells(row)]
        lines.append("| " + " | ".join(c.replace("|", "\\|") for c in shown) + " |")
    return "\n".join(lines) + f"\n\nMeasured: {card.measured}\n"


def html_table(card: Scorecard) -> str:
    """The run report's scorecard: the same table, every string escaped, the rows the
    done-when fails marked; a report's link is shown as text (the page fetches and links
    nothing)."""
    head = "".join(f"<th>{htmlib.escape(c)}</th>" for c in COLUMNS)
    body = []
    for row in card.rows:
        link = f'{htmlib.escape(row.case)}<br><span class="note">{htmlib.escape(row.report)}</span>'
        tds = "".join(
            f"<td>{htmlib.escape(c.replace('**', '').replace('`', ''))}</td>" for c in cells(row)
        )
        marked = ' class="bad"' if wrong(row) else ""
        body.append(f"<tr{marked}><td>{link}</td>{tds}</tr>")
    return (
        f"<table><tr>{head}</tr>{''.join(body)}</table>"
        f'<p class="note">Measured: {htmlib.escape(card.measured)}</p>'
    )
