"""Turns a report directory's run record into its report: one PNG per scenario and the HTML.

`write_report(DIR)` reads `DIR/events.jsonl` (`records.read_run`), draws every finished
scenario's timeline (`figures`), writes `DIR/timeline-NN-<scenario>.png` and
`DIR/report.html` (`page`, the same PNGs embedded, and the field corpus's scorecard this
package keeps, `scorecard.SCORECARD_FILE`) and returns the page's path. A
record that cannot be read is a `RecordError`; a file that cannot be written a
`ReportDirError` naming it (both one line, exit 3).
"""

from __future__ import annotations

import contextlib
import re
from importlib import resources
from pathlib import Path

from hangwatch_demo.report import figures, page
from hangwatch_demo.report.recorder import ReportDirError
from hangwatch_demo.report.records import EVENTS_FILE, RecordError, read_run
from hangwatch_demo.report.scorecard import SCORECARD_FILE, Scorecard, read_scorecard

REPORT_FILE = "report.html"


def image_name(index: int, scenario: str) -> str:
    """The PNG's file name: its place in the run and the scenario's name, made file-safe."""
    return f"timeline-{index:02d}-{re.sub(r'[^A-Za-z0-9._-]+', '_', scenario)[:80]}.png"


def write_report(directory: Path) -> Path:
    """Rebuild the report of the run kept in `directory`; the HTML page's path."""
    source = directory / EVENTS_FILE
    try:
        data = source.read_bytes()
    except OSError as exc:
        raise RecordError(f"{source}: cannot read ({exc.strerror or exc})") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise RecordError(f"{source}: not UTF-8 ({exc.reason})") from None
    story = read_run(text, str(source))
    images: dict[str, bytes] = {}
    for index, scenario in enumerate(story.finished, start=1):
        image = figures.png(figures.timeline(scenario))
        images[scenario.start.scenario] = image
        _write(directory / image_name(index, scenario.start.scenario), image)
    target = directory / REPORT_FILE
    _write(target, page.html(story, images, kept_scorecard()).encode("utf-8"))
    return target


def kept_scorecard() -> Scorecard:
    """The field corpus's scorecard this package keeps (the figures measured last)."""
    kept = resources.files("hangwatch_demo.report") / SCORECARD_FILE
    return read_scorecard(kept.read_bytes(), f"hangwatch_demo.report/{SCORECARD_FILE}")


def _write(path: Path, data: bytes) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    try:
        tmp.write_bytes(data)
        tmp.replace(path)
    except OSError as exc:
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)
        raise ReportDirError(f"{path}: cannot write the report ({exc.strerror or exc})") from None
