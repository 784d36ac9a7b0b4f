"""A scenario's timeline and the report page, drawn from a recorded run.

Covers, on the record of a real `hangwatch demo --report` run on this machine
(tests/report/data/demo-run.jsonl): every finished scenario gets one figure whose
bands are its executors, each segment coloured by the verdict recorded for it at that
time; the fault window starts at 0 (the fault) and ends where the record says; the
detection line sits at the recorded detection, the bound line at the bound, the
producer's first error where it came; acknowledged events per second are drawn. The
page holds the run's table, machine and versions, one embedded PNG per finished
scenario (decodable, the figure's size), escapes recorded text and fetches nothing.
Verdict colours: every verdict of the contracts has its own; an unknown name is grey.
`hangwatch report DIR` rebuilds the same report from a kept directory, and a report
file that cannot be written is one line naming it (exit 3).
"""

from __future__ import annotations

import base64
import re
import shutil
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from matplotlib.collections import PolyCollection
from matplotlib.colors import to_hex
from matplotlib.patches import Rectangle

from hangwatch.contracts import Verdict
from hangwatch_demo.report import figures, page, records
from hangwatch_demo.report.recorder import Recorder
from hangwatch_demo.report.records import EVENTS_FILE, read_run
from hangwatch_demo.report.writing import REPORT_FILE, write_report
from hangwatch_testing.processes import run_hangwatch

RECORDED = Path(__file__).parent / "data" / "demo-run.jsonl"


@pytest.fixture(scope="module")
def story() -> records.RunStory:
    return read_run(RECORDED.read_text(), str(RECORDED))


def test_every_verdict_has_its_own_colour_and_unknown_names_are_grey() -> None:
    colours = [figures.verdict_colour(v) for v in [*Verdict, figures.NO_STATUS]]
    assert len(set(colours) - {figures.UNKNOWN_COLOUR}) == len(Verdict)
    assert figures.verdict_colour("a_verdict_from_a_newer_sidecar") == figures.UNKNOWN_COLOUR


def _segments(ax: object) -> list[tuple[float, float, float, str]]:
    """(x, width, y centre, colour) of every bar drawn with broken_barh."""
    found = []
    for collection in ax.collections:  # type: ignore[attr-defined]
        if isinstance(collection, PolyCollection):
            colours = collection.get_facecolors()
            for path, colour in zip(collection.get_paths(), colours, strict=False):
                xs, ys = path.vertices[:, 0], path.vertices[:, 1]
                found.append(
                    (xs.min(), xs.max() - xs.min(), (ys.min() + ys.max()) / 2, to_hex(colour))
                )
    return found


def test_each_scenario_figure_shows_its_executors_verdicts_over_time(
    story: records.RunStory,
) -> None:
    assert story.finished, "the recorded run finished scenarios"
    for scenario in story.finished:
        origin = scenario.fault_at
        assert origin is not None, scenario.start.scenario
        figure = figures.timeline(scenario)
        top, bottom = figure.axes
        executors = [t.get_text() for t in top.get_yticklabels()]
        recorded = list(dict.fromkeys(e.executor for e in scenario.of(records.VerdictChange)))
        assert executors == recorded
        segments = _segments(top)
        changes = scenario.of(records.VerdictChange)
        assert len(segments) == len(changes)
        for change in changes:
            y = executors.index(change.executor)
            x = change.at - origin
            match = [s for s in segments if abs(s[0] - x) < 1e-6 and abs(s[2] - y) < 1e-6]
            assert match, (scenario.start.scenario, change)
            assert match[0][3] == figures.verdict_colour(change.verdict)
        _check_lines(scenario, origin, top)
        _check_fault_window(scenario, origin, top)
        assert bottom.get_xlabel() == "seconds from the fault"
        if len(scenario.of(records.Progress)) > 1:
            assert bottom.lines, "events acknowledged per second are drawn"


def _check_lines(scenario: records.ScenarioStory, origin: float, ax: object) -> None:
    xs = {round(line.get_xdata()[0], 6) for line in ax.lines if line.get_linestyle() != "None"}  # type: ignore[attr-defined]
    for detected in scenario.of(records.Detected)[:1]:
        assert round(detected.at - origin, 6) in xs
    if scenario.start.bound_seconds is not None:
        assert round(scenario.start.bound_seconds, 6) in xs
    for error in scenario.of(records.ProducerError)[:1]:
        assert round(error.at - origin, 6) in xs


def _check_fault_window(scenario: records.ScenarioStory, origin: float, ax: object) -> None:
    spans = [p for p in ax.patches if isinstance(p, Rectangle)]  # type: ignore[attr-defined]
    assert len(spans) == 1, scenario.start.scenario
    start = spans[0].get_x()
    assert start == 0.0
    ends = scenario.of(records.FaultEnd)
    if ends:
        assert abs(spans[0].get_x() + spans[0].get_width() - max(0, ends[0].at - origin)) < 1e-6


def test_the_page_has_the_table_machine_versions_and_every_figure(
    story: records.RunStory, tmp_path: Path
) -> None:
    shutil.copy(RECORDED, tmp_path / EVENTS_FILE)
    target = write_report(tmp_path)
    text = target.read_text()
    names = [s.start.scenario for s in story.finished]
    images = re.findall(r'<img class="timeline" alt="timeline of ([^"]+)" src="([^"]+)"', text)
    assert [n for n, _ in images] == names
    for (name, src), png in zip(images, sorted(tmp_path.glob("timeline-*.png")), strict=True):
        assert src.startswith("data:image/png;base64,")
        data = base64.b64decode(src.split(",", 1)[1])
        assert data == png.read_bytes() and data.startswith(b"\x89PNG"), name
    for row in (s.row for s in story.finished):
        assert row is not None and f"<td>{row.scenario}</td><td>{row.engine}</td>" in text
    assert f"{story.run.machine.cores} cores" in text and story.run.machine.cpu in text
    for name, version in story.run.versions.items():
        assert f"<th>{name}</th><td>{version}</td>" in text
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", text), "nothing is fetched"
    assert "<script" not in text


def test_recorded_text_is_escaped(tmp_path: Path) -> None:
    header = records.Run(
        source="demo", at=1.0, machine=records.Machine(cores=2, cpu="<b>", memory_bytes=1),
        versions={"x": "<script>alert(1)</script>"},
    )  # fmt: skip
    start = records.Start(
        scenario='"><img src=x>', at=1.0, fault="<script>", producer="p", engine="e",
        expected="healthy",
    )  # fmt: skip
    row = records.Row(
        scenario='"><img src=x>', at=2.0, engine="e", producer="p", verdict="v", ok=True
    )
    story = read_run(b"".join(records.encode(r) for r in (header, start, row)).decode())
    text = page.html(story, {start.scenario: b"png"})
    assert "<script>" not in text and "<img src=x>" not in text and "&lt;script&gt;" in text


def test_report_rebuilds_a_kept_run_and_says_where(tmp_path: Path) -> None:
    shutil.copy(RECORDED, tmp_path / EVENTS_FILE)
    done = run_hangwatch("report", str(tmp_path), timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == str(tmp_path / REPORT_FILE)
    assert (tmp_path / REPORT_FILE).stat().st_size > 0


def test_a_report_file_that_cannot_be_written_is_one_line_and_exit_3(tmp_path: Path) -> None:
    shutil.copy(RECORDED, tmp_path / EVENTS_FILE)
    (tmp_path / REPORT_FILE).mkdir()  # even root cannot write a file there
    done = run_hangwatch("report", str(tmp_path), timeout=300)
    assert done.returncode == 3, done.stderr
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
    assert f"{tmp_path / REPORT_FILE}: cannot write" in done.stderr


offsets = st.floats(min_value=0, max_value=3600, allow_nan=False)


@settings(max_examples=10)
@given(
    times=st.lists(offsets.map(lambda t: 1.7e9 + t), min_size=1, max_size=12),
    verdicts=st.lists(st.sampled_from([*Verdict, "producer_silent", "gone"]), min_size=1),
    bound=st.none() | st.floats(min_value=0, max_value=1e7),
)
def test_any_recorded_story_draws(
    times: list[float], verdicts: list[str], bound: float | None
) -> None:
    start = records.Start(
        scenario="s", at=times[0], fault="f", producer="p", engine="e", expected="healthy",
        bound_seconds=bound,
    )  # fmt: skip
    story = records.ScenarioStory(start)
    for i, at in enumerate(times):
        verdict = verdicts[i % len(verdicts)]
        executor = f"exec-{i % 3}"
        story.events += [
            records.Gone(scenario="s", at=at, executor=executor)
            if verdict == "gone"
            else records.VerdictChange(scenario="s", at=at, executor=executor, verdict=verdict),
            records.Progress(scenario="s", at=at, acknowledged=i * 1000),
        ]
        if i == 1:
            story.events.append(records.Fault(scenario="s", at=at))
        if i == 2:
            story.events.append(
                records.Action(scenario="s", at=at, operation="restart", outcome="suppressed")
            )
    assert figures.png(figures.timeline(story)).startswith(b"\x89PNG")


def test_the_demo_end_names_a_report_it_cannot_write_and_prints_no_path(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from hangwatch_demo.demo_cli import finish_report

    recorder = Recorder.open(tmp_path, "demo")
    (tmp_path / REPORT_FILE).mkdir()
    problem = finish_report(recorder)
    assert problem is not None and f"{tmp_path / REPORT_FILE}: cannot write" in problem
    assert "\n" not in problem and capsys.readouterr().out == ""
    (tmp_path / REPORT_FILE).rmdir()
    assert finish_report(Recorder.off()) is None
    assert finish_report(recorder) is None  # closed twice: the report is written
    assert capsys.readouterr().out == f"report: {tmp_path / REPORT_FILE}\n"
