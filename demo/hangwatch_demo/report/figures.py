"""One scenario's timeline as a matplotlib figure: data in, figure (or PNG bytes) out.

`timeline(story)` draws, on one time axis measured from the fault: the fault window
shaded; one band per executor coloured by its sidecar's verdict (`verdict_colour`);
operator actions as markers (restart, alert, suppressed or refused); events
acknowledged per second below; the producer's own first error, the detection time and
the bound it is judged against as vertical lines. `png(figure)` renders it with Agg.
Pure: no files, no network, no pyplot state (each call builds its own `Figure`).
"""

from __future__ import annotations

import io
from dataclasses import dataclass, field

from matplotlib.artist import Artist
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from hangwatch.verdicts import VERDICTS
from hangwatch_demo.report.records import (
    NO_STATUS,
    Action,
    Detected,
    FaultEnd,
    Flowing,
    Gone,
    ProducerError,
    Progress,
    ScenarioStory,
    VerdictChange,
)

UNKNOWN_COLOUR = "#9e9e9e"
"""A verdict this version does not know (a newer sidecar's, or a kept run's): grey."""

VERDICT_COLOURS: dict[str, str] = {
    **{str(parts.verdict): parts.colour for parts in VERDICTS},
    NO_STATUS: "#cfd8dc",
}
"""Each verdict and the colour its band is drawn in (declared with the verdict:
`hangwatch.verdicts`), and the band of a sidecar that did not answer."""

ACTED = "acted"
"""The outcome of a decision that was carried out (`hangwatch_operator.operations.Outcome`)."""
ACTION_MARKERS: dict[str, tuple[str, str]] = {
    "restart": ("v", "#b71c1c"),
    "alert": ("D", "#ef6c00"),
}
"""Operation -> (marker, colour) for actions carried out; anything suppressed, refused
or failed is drawn as REFUSED_MARKER."""
REFUSED_MARKER = ("X", "#212121")
RATE_WINDOW_SECONDS = 3.0
"""Events acknowledged per second are averaged over this window."""
MARKER_OFFSETS = {"restart": 0.0, "alert": 0.3}
"""Where on its executor's band an action's marker sits (refused ones: REFUSED_OFFSET),
so that a restart and an alert at the same moment are both seen."""
REFUSED_OFFSET = -0.3
BEFORE_FAULT_SECONDS = 10.0
"""How much of the baseline before the fault a timeline shows at most."""


def verdict_colour(verdict: str) -> str:
    """The band colour of a verdict name; grey for names this version does not know."""
    return VERDICT_COLOURS.get(verdict, UNKNOWN_COLOUR)


@dataclass
class Band:
    """One executor's verdicts over time: (start, end, verdict) in seconds from the fault."""

    executor: str
    segments: list[tuple[float, float, str]] = field(default_factory=list)


def bands(story: ScenarioStory, origin: float, end: float) -> list[Band]:
    """Per executor (in order of appearance), its verdict segments until it is gone or `end`."""
    found: dict[str, Band] = {}
    open_at: dict[str, tuple[float, str]] = {}
    for event in story.events:
        if isinstance(event, VerdictChange | Gone):
            t = event.at - origin
            band = found.setdefault(event.executor, Band(event.executor))
            if event.executor in open_at:
                start, verdict = open_at.pop(event.executor)
                band.segments.append((start, max(start, t), verdict))
            if isinstance(event, VerdictChange):
                open_at[event.executor] = (t, event.verdict)
    for executor, (start, verdict) in open_at.items():
        found[executor].segments.append((start, max(start, end), verdict))
    return list(found.values())


def rates(
    story: ScenarioStory, origin: float, window: float = RATE_WINDOW_SECONDS
) -> list[tuple[float, float]]:
    """Events acknowledged per second over the `window` before each progress sample:
    (time, rate). Counts come in steps (the producers' statistics interval), so a
    window of a few samples shows the rate rather than the steps; a count that went
    down (a gone executor's) counts as no progress."""
    samples = [(e.at - origin, e.acknowledged) for e in story.of(Progress)]
    found = []
    first = 0
    for t1, n1 in samples[1:]:
        while first < len(samples) - 1 and samples[first + 1][0] <= t1 - window:
            first += 1
        t0, n0 = samples[first]
        if t1 > t0:
            found.append((t1, max(0, n1 - n0) / (t1 - t0)))
    return found


def _times(story: ScenarioStory, origin: float) -> list[float]:
    times = [e.at - origin for e in story.events]
    if story.row is not None:
        times.append(story.row.at - origin)
    return times or [0.0]


def timeline(story: ScenarioStory) -> Figure:
    """The scenario's timeline (see the module docstring)."""
    origin = story.fault_at if story.fault_at is not None else story.start.at
    times = _times(story, origin)
    last = max(*times, 1.0)  # the record's end: open bands and an unended fault stop here
    bound = story.start.bound_seconds if story.fault_at is not None else None
    end = max(last, (bound or 0.0) + 1.0)
    start = max(min(times), -BEFORE_FAULT_SECONDS)
    executor_bands = bands(story, origin, last)
    rows = max(1, len(executor_bands))
    figure = Figure(figsize=(11, 2.9 + 0.42 * rows), layout="constrained")
    top, bottom = figure.subplots(2, 1, sharex=True, height_ratios=[max(1.2, 0.42 * rows), 1.3])
    title = f"{story.start.scenario}: {story.start.fault}"
    figure.suptitle(title if len(title) < 130 else title[:127] + "...", fontsize=11)
    legend: list[Artist] = []

    _fault_window(story, origin, last, (top, bottom), legend)

    seen_verdicts: dict[str, None] = {}
    for y, band in enumerate(executor_bands):
        for s, e, verdict in band.segments:
            top.broken_barh(
                [(s, max(e - s, 0.05))], (y - 0.35, 0.7), facecolors=verdict_colour(verdict)
            )
            seen_verdicts[verdict] = None
    top.set_yticks(range(len(executor_bands)), [b.executor for b in executor_bands])
    top.set_ylim(-0.7, rows - 0.3)
    top.invert_yaxis()
    legend += [Patch(color=verdict_colour(v), label=v) for v in seen_verdicts]

    _actions(story, origin, top, {b.executor: y for y, b in enumerate(executor_bands)}, legend)
    _lines(story, origin, (top, bottom), legend)

    points = rates(story, origin)
    if points:
        bottom.step([t for t, _ in points], [r for _, r in points], where="pre", color="#1565c0")
        source = story.start.progress_source[:40] or "progress"
        label = f"events /s ({RATE_WINDOW_SECONDS:g} s window): {source}"
        legend.append(Line2D([], [], color="#1565c0", label=label))
    else:
        bottom.text(0.5, 0.5, "no progress recorded", transform=bottom.transAxes, ha="center")
    flowing = story.of(Flowing)
    if flowing:
        t = flowing[0].at - origin
        # Unclipped (its lower half would be cut off) only within the time shown: an
        # artist outside the axes would grow the figure's layout.
        inside = start <= t <= end
        bottom.plot([t], [0], marker="^", color="#2e7d32", markersize=10, clip_on=not inside)
        legend.append(
            Line2D([], [], marker="^", color="#2e7d32", ls="", label=f"flowing again {t:.1f} s")
        )
    bottom.set_ylabel("events /s")
    bottom.set_ylim(bottom=0)
    bottom.set_xlim(start, end + 0.5)
    bottom.set_xlabel("seconds from the fault")
    bottom.grid(axis="x", alpha=0.3)
    top.grid(axis="x", alpha=0.3)
    figure.legend(handles=legend, loc="outside lower center", ncols=3, fontsize=8, frameon=False)
    return figure


def _fault_window(
    story: ScenarioStory, origin: float, last: float, axes: tuple[Axes, Axes], legend: list[Artist]
) -> None:
    """The fault window, shaded on both panels from the fault to its recorded end."""
    if story.fault_at is None:
        return
    fault_end = next((e for e in story.events if isinstance(e, FaultEnd)), None)
    until = fault_end.at - origin if fault_end else last
    for ax in axes:
        ax.axvspan(0.0, max(0.0, until), color="#ffcdd2", alpha=0.5, zorder=0, lw=0)
    ended = "" if fault_end else " (not ended in the run)"
    legend.append(Patch(color="#ffcdd2", label="fault window" + ended))


def _actions(
    story: ScenarioStory, origin: float, ax: Axes, rows: dict[str, int], legend: list[Artist]
) -> None:
    """A marker per operator decision on its executor's band (above the bands: no pod)."""
    kinds: dict[str, None] = {}
    for event in story.of(Action):
        acted = event.outcome == ACTED
        marker, colour = ACTION_MARKERS.get(event.operation, REFUSED_MARKER)
        if not acted:
            marker, colour = REFUSED_MARKER
        label = event.operation if acted else f"{event.operation} {event.outcome}"
        offset = MARKER_OFFSETS.get(event.operation, 0.0) if acted else REFUSED_OFFSET
        y = rows.get(event.executor or "", -0.55) + offset
        ax.plot(
            [event.at - origin], [y], marker=marker, color=colour, markersize=10, ls="",
            markeredgecolor="white", zorder=6 if acted else 5,
        )  # fmt: skip
        if label not in kinds:
            kinds[label] = None
            legend.append(Line2D([], [], marker=marker, color=colour, ls="", label=label[:40]))


def _lines(
    story: ScenarioStory, origin: float, axes: tuple[Axes, Axes], legend: list[Artist]
) -> None:
    """Vertical lines across both panels: detection, its bound, the producer's error."""
    marks: list[tuple[float, str, str, str]] = []
    detected = story.of(Detected)
    if detected:
        t = detected[0].at - origin
        marks.append((t, "-", "#000000", f"detected ({detected[0].verdict[:30]}) {t:.1f} s"))
    if story.start.bound_seconds is not None and story.fault_at is not None:
        b = story.start.bound_seconds
        marks.append((b, ":", "#000000", f"bound {b:.1f} s"))
    errors = story.of(ProducerError)
    if errors:
        t = errors[0].at - origin
        marks.append((t, "--", "#6a1b9a", f"producer's first error {t:.1f} s"))
    for t, style, colour, label in marks:
        for ax in axes:
            ax.axvline(t, ls=style, color=colour, lw=1.4, zorder=4)
        legend.append(Line2D([], [], ls=style, color=colour, label=label))


def png(figure: Figure, dpi: int = 100) -> bytes:
    """The figure as PNG bytes (Agg), without a timestamp in its metadata."""
    out = io.BytesIO()
    FigureCanvasAgg(figure)
    figure.savefig(out, format="png", dpi=dpi, metadata={"Software": None})
    return out.getvalue()
