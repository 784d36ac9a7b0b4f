"""The run record (`events.jsonl`): written as the run goes, read back exactly, bad input refused.

Covers: a `Recorder` writes the header (machine, versions), each scenario's start, its
verdict changes only when a verdict changes (and `gone` when an executor disappears),
its events and its row, and the run's end; `read_run` gives back the same records in
the same order, grouped by scenario; any valid record survives encode -> read; any
text at all either reads or is refused with one line naming the file and line (a kept
directory is input); `hangwatch report DIR` on a malformed or missing record prints one
line and exits 3, never a traceback; a directory that cannot be written is refused at
`--report` (the demo: before Spark starts) and a write that fails mid-run stops the
record, not the run.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import msgspec
from hypothesis import given, settings
from hypothesis import strategies as st

from hangwatch_demo.report import records
from hangwatch_demo.report.recorder import Recorder, ReportDirError
from hangwatch_demo.report.records import EVENTS_FILE, RecordError, read_run
from hangwatch_testing.processes import run_hangwatch


def _hangwatch(*args: str) -> subprocess.CompletedProcess[str]:
    return run_hangwatch(*args, timeout=120)


def _record_one_scenario(directory: Path) -> Recorder:
    recorder = Recorder.open(directory, "demo")
    s = recorder.scenario(
        "s4-blocked-io-thread",
        fault="user code blocks the poll thread",
        producer="wrapper",
        engine="librdkafka mock cluster 2.16.0",
        expected="producer_hung",
        control=False,
        bound_seconds=8.0,
        progress_source="acknowledged (producer telemetry)",
    )
    s.observe(100.0, {"exec-0": "healthy", "exec-1": "healthy"})
    s.progress(100.5, 10)
    s.fault(101.0)
    s.observe(102.0, {"exec-0": "healthy", "exec-1": "healthy"})  # no change: nothing
    s.observe(106.0, {"exec-0": "producer_hung", "exec-1": "healthy"})
    s.detected(106.0, "producer_hung")
    s.action(106.5, "restart", "acted", "exec-0", "executor JVM pid 7 killed")
    s.observe(108.0, {"exec-1": "healthy", "exec-2": "healthy"})
    s.producer_error(109.0, "delivery failed (_MSG_TIMED_OUT)")
    s.producer_error(110.0, "a later error is not the first")
    s.flowing(111.0)
    s.row(
        engine="librdkafka mock cluster 2.16.0",
        producer="wrapper",
        verdict="producer_hung",
        ok=True,
        detect_seconds=5.0,
        action="restart exec-0 (producer_hung)",
        flowing_again_seconds=10.0,
        lost=0,
        duplicates=3,
    )
    return recorder


def test_a_recorded_run_reads_back_in_order(tmp_path: Path) -> None:
    _record_one_scenario(tmp_path).close()
    story = read_run((tmp_path / EVENTS_FILE).read_text())
    assert story.run.source == "demo" and story.run.machine.cores >= 1
    assert {"hangwatch", "confluent-kafka", "librdkafka", "spark (pyspark)"} <= set(
        story.run.versions
    )
    assert story.end is not None and not story.end.interrupted
    [scenario] = story.finished
    kinds = [type(e).__name__ for e in scenario.events]
    assert kinds == [
        "VerdictChange", "VerdictChange", "Progress", "Fault", "VerdictChange", "Detected",
        "Action", "Gone", "VerdictChange", "ProducerError", "Flowing",
    ]  # fmt: skip
    changes = [(e.at, e.executor, e.verdict) for e in scenario.of(records.VerdictChange)]
    assert changes == [
        (100.0, "exec-0", "healthy"),
        (100.0, "exec-1", "healthy"),
        (106.0, "exec-0", "producer_hung"),
        (108.0, "exec-2", "healthy"),
    ]
    assert [(e.at, e.executor) for e in scenario.of(records.Gone)] == [(108.0, "exec-0")]
    assert scenario.fault_at == 101.0
    assert [e.error for e in scenario.of(records.ProducerError)] == [
        "delivery failed (_MSG_TIMED_OUT)"
    ]
    assert scenario.row is not None and scenario.row.duplicates == 3


def test_an_interrupted_run_keeps_its_finished_scenarios(tmp_path: Path) -> None:
    recorder = _record_one_scenario(tmp_path)
    recorder.scenario(
        "full-outage", fault="every broker down", producer="wrapper", engine="e",
        expected="cluster_unreachable", control=False, bound_seconds=5.0,
    ).fault(200.0)  # fmt: skip
    recorder.close(interrupted=True)
    story = read_run((tmp_path / EVENTS_FILE).read_text())
    assert story.end is None
    assert [s.start.scenario for s in story.scenarios] == ["s4-blocked-io-thread", "full-outage"]
    assert [s.start.scenario for s in story.finished] == ["s4-blocked-io-thread"]


names = st.text(min_size=1, max_size=20)
walls = st.floats(min_value=0, max_value=1e11, allow_nan=False)
seconds = st.none() | st.floats(min_value=0, max_value=1e7, allow_nan=False)
counts = st.integers(min_value=0, max_value=2**53)
events = st.one_of(
    st.builds(records.VerdictChange, scenario=names, at=walls, executor=names, verdict=names),
    st.builds(records.Gone, scenario=names, at=walls, executor=names),
    st.builds(records.Fault, scenario=names, at=walls),
    st.builds(records.FaultEnd, scenario=names, at=walls, how=st.text(max_size=50)),
    st.builds(
        records.Action,
        scenario=names,
        at=walls,
        operation=names,
        outcome=names,
        executor=st.none() | names,
        why=st.text(max_size=50),
    ),
    st.builds(records.Progress, scenario=names, at=walls, acknowledged=counts),
    st.builds(records.ProducerError, scenario=names, at=walls, error=st.text(max_size=50)),
    st.builds(records.Detected, scenario=names, at=walls, verdict=names),
    st.builds(records.Flowing, scenario=names, at=walls),
)
HEADER = records.Run(
    source="demo", at=1.0, machine=records.Machine(cores=2, cpu="x", memory_bytes=1), versions={}
)


@settings(max_examples=200)
@given(
    start=st.builds(
        records.Start,
        scenario=names,
        at=walls,
        fault=st.text(max_size=50),
        producer=names,
        engine=st.text(max_size=50),
        expected=names,
        control=st.booleans(),
        bound_seconds=seconds,
        progress_source=st.text(max_size=50),
    ),
    story=st.lists(events, max_size=20),
    row=st.builds(
        records.Row,
        scenario=names,
        at=walls,
        engine=st.text(max_size=20),
        producer=names,
        verdict=names,
        ok=st.booleans(),
        detect_seconds=seconds,
        action=st.text(max_size=20),
        flowing_again_seconds=seconds,
        lost=st.none() | counts,
        duplicates=st.none() | counts,
        problems=st.lists(st.text(max_size=20), max_size=3),
    ),
)
def test_any_valid_record_reads_back_unchanged(
    start: records.Start, story: list[records.Event], row: records.Row
) -> None:
    mine = [msgspec.structs.replace(e, scenario=start.scenario) for e in story]
    row = msgspec.structs.replace(row, scenario=start.scenario)
    text = b"".join(records.encode(r) for r in [HEADER, start, *mine, row]).decode()
    read = read_run(text)
    assert read.run == HEADER
    [scenario] = read.scenarios
    assert (scenario.start, scenario.events, scenario.row) == (start, mine, row)


@settings(max_examples=300)
@given(
    lines=st.lists(
        st.one_of(
            st.text(max_size=80),
            st.sampled_from(
                [
                    records.encode(HEADER).decode(),
                    '{"type":"scenario","scenario":"a","at":1,"fault":"f","producer":"p",'
                    '"engine":"e","expected":"healthy"}',
                    '{"type":"verdict","scenario":"a","at":-1,"executor":"x","verdict":"v"}',
                    '{"type":"verdict","scenario":"b","at":1,"executor":"x","verdict":"v"}',
                    '{"type":"progress","scenario":"a","at":1,"acknowledged":1e400}',
                    '{"type":"end","at":1,"seconds":1}',
                    '{"type":"row","scenario":"a","at":1,"engine":"e","producer":"p",'
                    '"verdict":"v","ok":true}',
                    "[]",
                    "null",
                    '{"type":"run"}',
                ]
            ),
        ),
        max_size=8,
    )
)
def test_any_text_is_read_or_refused_in_one_line(lines: list[str]) -> None:
    try:
        read_run("\n".join(lines), "kept/events.jsonl")
    except RecordError as exc:
        assert "\n" not in str(exc).strip() and str(exc).startswith("kept/events.jsonl")


def test_report_of_a_malformed_record_is_one_line_and_exit_3(tmp_path: Path) -> None:
    _record_one_scenario(tmp_path).close()
    kept = (tmp_path / EVENTS_FILE).read_text().splitlines()
    kept[3] = kept[3].replace('"at":', '"at":"yesterday","was":')
    (tmp_path / EVENTS_FILE).write_text("\n".join(kept) + "\n")
    done = _hangwatch("report", str(tmp_path))
    assert done.returncode == 3, done.stderr
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
    assert f"{tmp_path / EVENTS_FILE} line 4" in done.stderr
    assert not (tmp_path / "report.html").exists()


def test_report_of_a_directory_without_a_record_is_one_line_and_exit_3(tmp_path: Path) -> None:
    done = _hangwatch("report", str(tmp_path))
    assert done.returncode == 3 and done.stderr.count("\n") == 1, done.stderr
    assert str(tmp_path / EVENTS_FILE) in done.stderr and "cannot read" in done.stderr


def test_a_report_dir_that_cannot_be_created_is_refused_before_the_demo_starts(
    tmp_path: Path,
) -> None:
    (tmp_path / "a-file").write_text("")
    target = tmp_path / "a-file" / "report"
    done = _hangwatch("demo", "--scenario", "healthy", "--report", str(target))
    assert done.returncode == 3, done.stderr
    assert done.stderr.count("\n") == 1 and f"--report {target}: cannot write" in done.stderr
    assert "starting Spark" not in done.stderr and done.stdout == ""


def test_a_write_that_fails_mid_run_stops_the_record_not_the_run() -> None:
    # /dev/full: every write fails with ENOSPC, as on a full disk.
    with open("/dev/full", "wb", buffering=0) as full:
        recorder = Recorder(Path("/dev"), full)
        s = recorder.scenario(
            "healthy", fault="no fault", producer="wrapper", engine="e", expected="healthy",
            control=True, bound_seconds=None,
        )  # fmt: skip
        s.observe(1.0, {"exec-0": "healthy"})
        s.row(engine="e", producer="wrapper", verdict="healthy", ok=True, detect_seconds=None)
        assert recorder.error is not None and EVENTS_FILE in recorder.error
        assert "No space left on device" in recorder.error


def test_a_record_whose_first_write_fails_is_refused_at_open(tmp_path: Path) -> None:
    (tmp_path / EVENTS_FILE).symlink_to("/dev/full")
    try:
        Recorder.open(tmp_path, "demo")
    except ReportDirError as exc:
        assert str(tmp_path) in str(exc) and "No space left on device" in str(exc)
    else:
        raise AssertionError("a record that cannot be written was accepted")
