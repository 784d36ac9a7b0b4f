"""The run record: what a demo or benchmark run saw, one JSON object per line.

A report directory keeps `events.jsonl` (`EVENTS_FILE`): a `Run` header (machine,
versions), then per scenario its `Start`, the events of its story (`VerdictChange`s
per executor, `Gone` executors, the `Fault` and its `FaultEnd`, operator `Action`s,
`Progress` samples of events acknowledged so far, the producer's first `ProducerError`,
`Detected`, `Flowing` again) and its table `Row`; an `End` line closes the run. Every
event carries `at`, wall-clock seconds; the report measures time from the scenario's
fault. `encode` writes one line; `read_run` parses a whole file's text into `RunStory`
(a kept directory is input: every field is type- and range-checked, a bad line is a
`RecordError` naming its line). Pure: no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated, TypeVar

import msgspec

from hangwatch.errors import UsageError

EVENTS_FILE = "events.jsonl"
"""The run record's file name in a report directory."""

NO_STATUS = "sidecar_unreachable"
"""The verdict a run records for an executor whose sidecar's /status did not answer."""

MAX_BYTES = 64 * 1024 * 1024
"""A run record larger than this is refused (a full demo writes well under 1 MiB)."""
MAX_SCENARIOS = 200
"""Scenarios one report shows at most (each is a figure)."""

Text = Annotated[str, msgspec.Meta(max_length=2000)]
Name = Annotated[str, msgspec.Meta(min_length=1, max_length=200)]
Wall = Annotated[float, msgspec.Meta(ge=0, le=1e11)]
"""Wall-clock seconds since the epoch (bounded: differences stay finite and plottable)."""
Seconds = Annotated[float, msgspec.Meta(ge=0, le=1e7)]
Count = Annotated[int, msgspec.Meta(ge=0, le=2**53)]


class RecordError(UsageError):
    """A run record that cannot be read (one line: the file, the line, what is wrong)."""


class Machine(msgspec.Struct, frozen=True, forbid_unknown_fields=False):
    cores: Count
    cpu: Text
    memory_bytes: Count


class Run(msgspec.Struct, tag="run", frozen=True):
    """The run's header: what ran, where, with which versions."""

    source: Name
    at: Wall
    machine: Machine
    versions: Annotated[dict[Name, Text], msgspec.Meta(max_length=50)]


class Start(msgspec.Struct, tag="scenario", frozen=True):
    """A scenario begins (before its baseline)."""

    scenario: Name
    at: Wall
    fault: Text
    producer: Name
    engine: Text
    expected: Name
    control: bool = False
    bound_seconds: Seconds | None = None
    """Fault to the expected verdict is judged against this (None for controls)."""
    progress_source: Text = ""
    """What `Progress` counts (e.g. the producers' telemetry, the topic's end offsets)."""


class VerdictChange(msgspec.Struct, tag="verdict", frozen=True):
    scenario: Name
    at: Wall
    executor: Name
    verdict: Name


class Gone(msgspec.Struct, tag="gone", frozen=True):
    """The executor (and its sidecar) is no longer there."""

    scenario: Name
    at: Wall
    executor: Name


class Fault(msgspec.Struct, tag="fault", frozen=True):
    scenario: Name
    at: Wall


class FaultEnd(msgspec.Struct, tag="fault_end", frozen=True):
    scenario: Name
    at: Wall
    how: Text


class Action(msgspec.Struct, tag="action", frozen=True):
    """An operator decision: acted, alerted, suppressed or refused (and why)."""

    scenario: Name
    at: Wall
    operation: Name
    outcome: Name
    executor: Name | None = None
    why: Text = ""


class Progress(msgspec.Struct, tag="progress", frozen=True):
    """Events acknowledged so far (cumulative) at `at`."""

    scenario: Name
    at: Wall
    acknowledged: Count


class ProducerError(msgspec.Struct, tag="producer_error", frozen=True):
    """The producer's own first error after the fault (what its application would see)."""

    scenario: Name
    at: Wall
    error: Text


class Detected(msgspec.Struct, tag="detected", frozen=True):
    scenario: Name
    at: Wall
    verdict: Name


class Flowing(msgspec.Struct, tag="flowing", frozen=True):
    """Events flow again after the restart or heal."""

    scenario: Name
    at: Wall


class Row(msgspec.Struct, tag="row", frozen=True):
    """The scenario's line of the run's table; it also marks the scenario finished."""

    scenario: Name
    at: Wall
    engine: Text
    producer: Name
    verdict: Name
    ok: bool
    detect_seconds: Seconds | None = None
    action: Text = ""
    flowing_again_seconds: Seconds | None = None
    lost: Count | None = None
    duplicates: Count | None = None
    problems: Annotated[list[Text], msgspec.Meta(max_length=50)] = []


class End(msgspec.Struct, tag="end", frozen=True):
    at: Wall
    seconds: Seconds
    interrupted: bool = False


Event = (
    VerdictChange | Gone | Fault | FaultEnd | Action | Progress | ProducerError | Detected | Flowing
)
Record = Run | Start | Event | Row | End

E = TypeVar("E", bound=Event)

_encoder = msgspec.json.Encoder()
_decoder = msgspec.json.Decoder(Record)


def encode(record: Record) -> bytes:
    """One line of the run record (newline included)."""
    return _encoder.encode(record) + b"\n"


@dataclass
class ScenarioStory:
    """One scenario's start, its events in file order, and its row once it finished."""

    start: Start
    events: list[Event] = field(default_factory=list)
    row: Row | None = None

    @property
    def fault_at(self) -> float | None:
        return next((e.at for e in self.events if isinstance(e, Fault)), None)

    def of(self, kind: type[E]) -> list[E]:
        """This scenario's events of one kind, in order."""
        return [e for e in self.events if isinstance(e, kind)]


@dataclass
class RunStory:
    """A whole run record: header, scenarios in order, and its end (None: cut short)."""

    run: Run
    scenarios: list[ScenarioStory] = field(default_factory=list)
    end: End | None = None

    @property
    def finished(self) -> list[ScenarioStory]:
        """The scenarios that ran to their row (an interrupted one has none)."""
        return [s for s in self.scenarios if s.row is not None]


def read_run(text: str, name: str = EVENTS_FILE) -> RunStory:
    """Parse a run record; `RecordError` ("NAME line N: ...") for anything malformed."""
    if len(text) > MAX_BYTES:
        raise RecordError(f"{name}: larger than {MAX_BYTES // 2**20} MiB: not a run record")
    story: RunStory | None = None
    by_name: dict[str, ScenarioStory] = {}
    for number, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        try:
            record = _decoder.decode(line)
        except (msgspec.DecodeError, UnicodeError, ValueError) as exc:
            raise RecordError(f"{name} line {number}: {exc}") from None
        where = f"{name} line {number}"
        if story is None:
            if not isinstance(record, Run):
                raise RecordError(f"{where}: the first record must be the run's header")
            story = RunStory(record)
        elif story.end is not None:
            raise RecordError(f"{where}: a record after the run's end")
        else:
            _add(story, by_name, record, where)
    if story is None:
        raise RecordError(f"{name}: empty: no run was recorded")
    return story


def _add(story: RunStory, by_name: dict[str, ScenarioStory], record: Record, where: str) -> None:
    if isinstance(record, Run):
        raise RecordError(f"{where}: a second run header")
    if isinstance(record, End):
        story.end = record
        return
    if isinstance(record, Start):
        if record.scenario in by_name:
            raise RecordError(f"{where}: scenario {record.scenario!r} started twice")
        if len(story.scenarios) >= MAX_SCENARIOS:
            raise RecordError(f"{where}: more than {MAX_SCENARIOS} scenarios")
        by_name[record.scenario] = ScenarioStory(record)
        story.scenarios.append(by_name[record.scenario])
        return
    scenario = by_name.get(record.scenario)
    if scenario is None:
        raise RecordError(f"{where}: scenario {record.scenario!r} was not started")
    if scenario.row is not None:
        raise RecordError(f"{where}: scenario {record.scenario!r} already has its row")
    if isinstance(record, Row):
        scenario.row = record
    else:
        scenario.events.append(record)
