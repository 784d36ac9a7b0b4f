"""The field corpus's scorecard: its rows summed from replays, its file, its two renderings (unit).

A run hangs when its client, still alive, completed nothing in the watch's last stretch;
its flag is the first verdict accusing the producer from the client's last completed
write on, timed from that write; an accusation of a client that went on is a false
alarm. The kept file is input: every malformed one is refused in one line naming it
(a Hypothesis property over arbitrary JSON), never a traceback. docs/incidents.md's
section is the rendering of the file the run report keeps, never edited apart.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hangwatch_demo.report import page, writing
from hangwatch_demo.report.records import RecordError
from hangwatch_demo.report.scorecard import (
    Scorecard,
    ScoreRow,
    encode,
    html_table,
    markdown,
    merged,
    read_scorecard,
    wrong,
)
from hangwatch_testing.clients.runs import SidecarTiming
from hangwatch_testing.incidents.catalogue import BY_ID, CASES
from hangwatch_testing.incidents.replay import Replay
from hangwatch_testing.incidents.scoring import (
    DOCS_PATH,
    SCORECARD_PATH,
    docs_section,
    first_flag,
    hung,
    score_row,
)

REPO = Path(__file__).resolve().parents[2]


def _replay(**fields: Any) -> Replay:
    base: dict[str, Any] = {"incident": "KG451", "baseline": "healthy", "watched_seconds": 60.0}
    return Replay(**(base | fields))


def test_a_run_hangs_when_its_live_client_wrote_nothing_at_the_end() -> None:
    assert hung(_replay(last_ack_after=2.0))
    assert hung(_replay(last_ack_before_fault=0.4))
    assert not hung(_replay(last_ack_after=50.0)), "wrote 10 s before the end"
    assert not hung(_replay(last_ack_after=2.0, client_exit=2)), "a crash is no hang"


def test_the_flag_is_timed_from_the_last_completed_write() -> None:
    changes = [
        (1.0, "broker_degraded", []),
        (3.0, "producer_silent", []),  # before the last write: not this run's flag
        (5.0, "healthy", []),
        (16.5, "producer_silent", ["silent"]),
    ]
    assert first_flag(_replay(last_ack_after=6.0, changes=changes)) == (10.5, "producer_silent")
    assert first_flag(_replay(last_ack_after=20.0, changes=changes)) is None


def test_score_row_counts_hangs_flags_false_alarms_and_restarts() -> None:
    incident = BY_ID["KG451"]
    silent = [(0.5, "broker_degraded", []), (12.0, "producer_silent", [])]
    results = [
        _replay(last_ack_after=1.0, changes=silent, restarted=True, restarted_first_ack=2.5),
        _replay(last_ack_after=58.0, changes=silent, restarted=True, restarted_first_ack=None),
        _replay(last_ack_after=1.0, client_exit=2, restarted=True),
    ]
    row = score_row(incident, results, SidecarTiming())
    assert (row.runs, row.hung, row.exited, row.flagged, row.false_alarms) == (3, 1, 1, 1, 1)
    assert row.flag_after_last_write == [11.0] and row.first_flags == ["producer_silent"]
    assert row.flag_after_fault_end == [12.0], "no lasting fault: it ended where it began"
    assert row.bound_seconds == 11.0, "the declared 10 s plus one 1 s probe round"
    assert (row.restarted, row.restart_wrote) == (3, [2.5])
    assert row.role == "affected" and row.case == "kafka-go#451" and "exit codes 2" in row.note
    assert wrong(row), "a false alarm fails the done-when"
    assert read_scorecard(encode(Scorecard("m", [row])), "x").rows == [row]


def _row(**fields: Any) -> ScoreRow:
    base: dict[str, Any] = {
        "row": "R", "case": "c#1", "family": "sarama", "report": "https://example.invalid/1",
        "client": "sarama | <b>", "release": "sarama-v1", "role": "affected",
        "where": "a producer pod", "kafka": "4.4.0", "fault": "f", "runs": 3, "hung": 3,
        "flagged": 3, "flag_after_last_write": [10.4, 10.6, 10.9],
        "first_flags": ["producer_silent"] * 3, "bound_seconds": 11.0,
        "verdicts": ["healthy", "producer_silent"],
    }  # fmt: skip
    return ScoreRow(**(base | fields))


def test_both_renderings_say_the_same_and_escape_what_they_show() -> None:
    control = _row(row="C", role="control", hung=0, flagged=0, flag_after_last_write=[],
                   first_flags=[])  # fmt: skip
    card = Scorecard("on 2 cores", [_row(), control])
    text = markdown(card)
    assert "`producer_silent` in 3 of the 3 that hung, 10.6 (10.9) s after the last write" in text
    assert "sarama \\| <b>" in text and "Measured: on 2 cores" in text
    table = html_table(card)
    assert "&lt;b&gt;" in table and "<b>" not in table
    assert 'c#1<br><span class="note">https://example.invalid/1</span>' in table
    assert "href=" not in table, "the page links and fetches nothing"
    late = _row(flag_after_last_write=[10.4, 10.6, 12.9])
    assert wrong(late) and "bound 11 s: **late**" in markdown(Scorecard("m", [late]))
    # the cluster refused until the fault's end: flagged 0.1-0.3 s after it, not late
    healed = _row(flag_after_last_write=[20.4, 20.6, 20.9], flag_after_fault_end=[0.1, 0.2, 0.3])
    assert not wrong(healed), markdown(Scorecard("m", [healed]))
    assert "late" not in markdown(Scorecard("m", [healed]))
    assert "20.6 (20.9) s after the last write (0.2 (0.3) s after the fault ended)" in markdown(
        Scorecard("m", [healed])
    )
    assert wrong(_row(flagged=2, flag_after_last_write=[1.0, 2.0], first_flags=["x", "y"]))


def test_merged_replaces_rows_of_the_same_id_and_keeps_the_rest() -> None:
    card = Scorecard("first", [_row(row="A"), _row(row="B")])
    again = merged(card, [_row(row="B", runs=5, hung=5), _row(row="C")], "second")
    assert [(r.row, r.runs) for r in again.rows] == [("A", 3), ("B", 5), ("C", 3)]
    assert again.measured == "first second"
    assert merged(Scorecard("not measured yet", []), [_row()], "now").measured == "now"


@pytest.mark.parametrize(
    ("document", "message"),
    [
        ('{"measured": ', "not JSON"),
        ('{"measured": "m"}', "not a scorecard"),
        (json.dumps({"measured": "m", "rows": [{"row": "A"}]}), "not a scorecard"),
    ],
)
def test_a_malformed_scorecard_is_refused_in_one_line(document: str, message: str) -> None:
    with pytest.raises(RecordError, match=f"^kept.json: {message}") as raised:
        read_scorecard(document, "kept.json")
    assert "\n" not in str(raised.value)


def test_counts_that_cannot_be_are_refused() -> None:
    for bad in (_row(hung=4), _row(flagged=2), _row(row="A", runs=3, hung=0, false_alarms=4)):
        with pytest.raises(RecordError, match="row"):
            read_scorecard(encode(Scorecard("m", [bad])), "kept.json")
    with pytest.raises(RecordError, match="listed twice"):
        read_scorecard(encode(Scorecard("m", [_row(), _row()])), "kept.json")


@given(st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(),
                    lambda inner: st.lists(inner) | st.dictionaries(st.text(), inner),
                    max_leaves=20))  # fmt: skip
def test_any_json_is_read_or_refused_in_one_line(value: object) -> None:
    try:
        document = json.dumps(value)
    except ValueError:
        return
    try:
        read_scorecard(document, "kept.json")
    except RecordError as exc:
        assert "\n" not in str(exc)


def test_the_kept_scorecard_reads_and_every_row_is_a_known_field_case() -> None:
    card = writing.kept_scorecard()
    for row in card.rows:
        assert row.row in BY_ID and row.case in CASES, row.row
        assert BY_ID[row.row].case == CASES[row.case]


def test_docs_section_is_the_kept_scorecard_rendered() -> None:
    card = read_scorecard((REPO / SCORECARD_PATH).read_bytes(), str(SCORECARD_PATH))
    docs = (REPO / DOCS_PATH).read_text()
    assert docs_section(docs, card) == docs, (
        "docs/incidents.md's scorecard differs from the kept one: run "
        "benchmarks/incidents.py --scorecard, never edit it by hand"
    )
    with pytest.raises(ValueError, match="no scorecard section"):
        docs_section("no markers", card)


def test_the_run_report_shows_the_scorecard_after_the_machine() -> None:
    assert "field corpus" in page._field_corpus(Scorecard("m", [_row()]))


def test_a_lasting_fault_runs_beside_the_watch_and_its_failure_is_raised(tmp_path: Path) -> None:
    import threading
    import time

    from hangwatch_testing.incidents import replay as replaying

    started = threading.Event()

    def slow(_lab: object, _scratch: Path) -> None:
        started.set()
        time.sleep(0.3)

    row = dataclasses.replace(BY_ID["KG451"], inject=slow)
    with replaying._fault(row, None, tmp_path) as ended:  # type: ignore[arg-type]
        assert started.wait(5) and not ended, "the watch goes on while the fault lasts"
    assert ended, "the replay waited for the fault's end"

    def fails(_lab: object, _scratch: Path) -> None:
        raise RuntimeError("restore failed")

    with (
        pytest.raises(RuntimeError, match="restore failed"),
        replaying._fault(dataclasses.replace(row, inject=fails), None, tmp_path),  # type: ignore[arg-type]
    ):
        pass
