"""The report's HTML page: the run's table, machine and versions, then a timeline per scenario.

`html(story, images)` returns one self-contained page: styles inline, each figure
embedded as a `data:image/png;base64` URI (the same PNG is also written beside it), no
script and nothing fetched, so it opens offline and can be mailed as one file. Every
recorded string is escaped. Pure: no I/O.
"""

from __future__ import annotations

import base64
import html as htmlib
import time

from hangwatch_demo.report.records import (
    Action,
    Detected,
    Fault,
    FaultEnd,
    Flowing,
    Gone,
    ProducerError,
    Progress,
    RunStory,
    ScenarioStory,
    VerdictChange,
)
from hangwatch_demo.report.scorecard import Scorecard, html_table

STYLE = """
body { font-family: sans-serif; margin: 1.5em; color: #212121; }
table { border-collapse: collapse; font-size: 0.9em; }
th, td { border: 1px solid #bdbdbd; padding: 0.25em 0.6em; text-align: left; }
td.num { text-align: right; }
tr.bad td { background: #ffebee; }
img { max-width: 100%; border: 1px solid #e0e0e0; }
details { margin: 0.5em 0 2em 0; font-size: 0.85em; }
.note { color: #616161; }
"""


def _e(value: object) -> str:
    return htmlib.escape(str(value), quote=True)


def _s(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


def _n(value: int | None) -> str:
    return "-" if value is None else str(value)


def _utc(at: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(at))


def _table(story: RunStory) -> str:
    head = (
        "scenario", "engine", "producer", "verdict", "fault to verdict s", "bound s", "action",
        "flowing again s", "lost", "dupes", "as expected",
    )  # fmt: skip
    lines = ["<table>", "<tr>" + "".join(f"<th>{_e(h)}</th>" for h in head) + "</tr>"]
    for s in story.finished:
        row = s.row
        assert row is not None
        cells = [
            (row.scenario, ""), (row.engine, ""), (row.producer, ""), (row.verdict, ""),
            (_s(row.detect_seconds), "num"), (_s(s.start.bound_seconds), "num"),
            (row.action or "-", ""), (_s(row.flowing_again_seconds), "num"),
            (_n(row.lost), "num"), (_n(row.duplicates), "num"), ("yes" if row.ok else "NO", ""),
        ]  # fmt: skip
        klass = "" if row.ok else ' class="bad"'
        lines.append(
            f"<tr{klass}>"
            + "".join(
                f'<td class="{c}">{_e(v)}</td>' if c else f"<td>{_e(v)}</td>" for v, c in cells
            )
            + "</tr>"
        )
    lines.append("</table>")
    return "\n".join(lines)


def _machine_and_versions(story: RunStory) -> str:
    m = story.run.machine
    items = [
        ("machine", f"{m.cores} cores, {m.cpu}, {m.memory_bytes / 2**30:.1f} GiB memory"),
        *story.run.versions.items(),
    ]
    engines = sorted({s.start.engine for s in story.scenarios})
    items.append(("Kafka engine", "; ".join(engines) or "-"))
    rows = "".join(f"<tr><th>{_e(k)}</th><td>{_e(v)}</td></tr>" for k, v in items)
    return f"<table>{rows}</table>"


def describe(event: object, origin: float) -> str | None:
    """One event of a scenario's story as a line of text (None: not listed)."""
    if isinstance(event, Progress):
        return None
    t = f"{event.at - origin:+7.1f} s  " if hasattr(event, "at") else ""
    if isinstance(event, VerdictChange):
        return f"{t}{event.executor}: {event.verdict}"
    if isinstance(event, Gone):
        return f"{t}{event.executor}: gone"
    if isinstance(event, Fault):
        return f"{t}fault injected"
    if isinstance(event, FaultEnd):
        return f"{t}fault ends: {event.how}"
    if isinstance(event, Action):
        target = f" {event.executor}" if event.executor else ""
        why = f": {event.why}" if event.why else ""
        return f"{t}operator: {event.operation}{target} {event.outcome}{why}"
    if isinstance(event, ProducerError):
        return f"{t}producer's first error: {event.error}"
    if isinstance(event, Detected):
        return f"{t}detected: {event.verdict}"
    if isinstance(event, Flowing):
        return f"{t}events flow again"
    return None


def _scenario(s: ScenarioStory, image: bytes) -> str:
    origin = s.fault_at if s.fault_at is not None else s.start.at
    lines = [d for e in s.events if (d := describe(e, origin)) is not None]
    problems = s.row.problems if s.row else []
    data = base64.b64encode(image).decode("ascii")
    parts = [
        f'<h2 id="{_e(s.start.scenario)}">{_e(s.start.scenario)}</h2>',
        f"<p>{_e(s.start.fault)} (producer: {_e(s.start.producer)}; expected: "
        f"{_e(s.start.expected)}{'; control' if s.start.control else ''})</p>",
        f'<img class="timeline" alt="timeline of {_e(s.start.scenario)}" '
        f'src="data:image/png;base64,{data}">',
    ]
    if problems:
        parts.append("<p><b>not as expected:</b> " + _e("; ".join(problems)) + "</p>")
    if s.start.producer and not s.of(ProducerError):
        parts.append('<p class="note">the producer reported no error of its own in the run '
                     "(or it writes no telemetry)</p>")  # fmt: skip
    parts.append(
        "<details><summary>the story, seconds from the fault</summary><pre>"
        + _e("\n".join(lines))
        + "</pre></details>"
    )
    return "\n".join(parts)


def _field_corpus(card: Scorecard) -> str:
    return "\n".join(
        [
            '<h2 id="field-corpus">field corpus: published producer hangs, replayed</h2>',
            '<p class="note">Each client at the release a public report names, and its '
            "control, replayed on Apache Kafka next to a real sidecar (the figures measured "
            "last, docs/incidents.md); rows the done-when fails are marked.</p>",
            html_table(card),
        ]
    )


def html(story: RunStory, images: dict[str, bytes], scorecard: Scorecard | None = None) -> str:
    """The page; `images` maps each finished scenario's name to its timeline PNG;
    `scorecard`, the field corpus's figures, after the machine's table."""
    run = story.run
    unfinished = [s.start.scenario for s in story.scenarios if s.row is None]
    if story.end is not None:
        status = f"ran {story.end.seconds:.0f} s"
    else:
        status = "cut short (interrupted): the scenarios it finished are shown"
    notes = [f"<p>{_e(_utc(run.at))}; {_e(status)}.</p>"]
    if unfinished:
        notes.append(f'<p class="note">not finished, not shown: {_e(", ".join(unfinished))}</p>')
    body = [
        f"<h1>hangwatch {_e(run.source)} report</h1>",
        *notes,
        _table(story),
        "<h2>machine and versions</h2>",
        _machine_and_versions(story),
        *([_field_corpus(scorecard)] if scorecard is not None and scorecard.rows else []),
        *(_scenario(s, images[s.start.scenario]) for s in story.finished),
    ]
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>hangwatch {_e(run.source)} report</title><style>{STYLE}</style></head>\n"
        "<body>\n" + "\n".join(body) + "\n</body></html>\n"
    )
