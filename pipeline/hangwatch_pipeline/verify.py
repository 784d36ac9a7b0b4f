"""Read a topic back and check every event of a run is in it: `hangwatch pipeline verify`.

At-least-once means: no event missing, duplicates allowed. `verify` assigns every
partition of the topic from its low watermark, reads up to the high watermark taken at
the start (bounded by a timeout), and tallies the `(run_id, seq)` of each message the
pipeline wrote (`events.identify`). The run checked is `--run-id`, or the only run
found in the topic. Missing = seqs 0..expected-1 never seen; duplicates are counted,
not failed. Retention may have deleted the oldest records of a partition (its log no
longer starts at offset 0): as many missing events as records were deleted are
*unverifiable*, not lost (exit 4 when that explains every missing event); only events
missing beyond that count are lost (exit 1). Reading that cannot reach the end of every
partition in time is exit 2: a partial read cannot prove anything missing. The tally is
pure and tested without Kafka; only `read_topic` talks to the brokers (confluent-kafka
Consumer).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, Message, TopicPartition

from hangwatch import kafka_errors
from hangwatch.contracts import ExitCode
from hangwatch.errors import HangwatchError, UsageError
from hangwatch_pipeline.events import event_id, identify

MISSING_SAMPLE = 10
"""Missing event ids listed by name (all are counted)."""

BATCH = 10_000
"""Messages taken per consume() call."""


class VerifyError(HangwatchError):
    """The topic could not be read (unreachable brokers, unknown topic)."""

    exit_code = ExitCode.UNAVAILABLE


class SeqTally:
    """How often each seq of one run was seen (one byte per seq, saturating at 255)."""

    def __init__(self) -> None:
        self.counts = bytearray()
        self.records = 0
        self.duplicates = 0

    def add(self, seq: int) -> None:
        if seq < 0:
            return
        self.records += 1
        if seq >= len(self.counts):
            self.counts.extend(bytes(max(seq + 1 - len(self.counts), len(self.counts))))
        seen = self.counts[seq]
        if seen:
            self.duplicates += 1
        self.counts[seq] = min(255, seen + 1)

    def missing(self, expected: int) -> list[int]:
        """Seqs in 0..expected-1 never seen."""
        counts = self.counts
        return [s for s in range(expected) if s >= len(counts) or not counts[s]]

    def beyond(self, expected: int) -> int:
        """Distinct seqs >= expected seen: the run sent more events than expected."""
        return sum(1 for c in self.counts[expected:] if c)


@dataclass
class ReadStats:
    """What reading the topic found, for every run at once."""

    partitions: int = 0
    records: int = 0
    """Messages read."""
    foreign: int = 0
    """Messages not written by the pipeline (no run_id/seq)."""
    complete: bool = False
    """Every partition was read to its high watermark (taken at the start)."""
    runs: dict[str, SeqTally] = field(default_factory=dict)
    errors: dict[str, int] = field(default_factory=dict)
    """Consumer error code -> occurrences while reading."""
    deleted: dict[int, int] = field(default_factory=dict)
    """Partition -> records before its log start (retention deleted them; at most this
    many, since a compacted or transactional log leaves gaps in its offsets)."""

    @property
    def truncated(self) -> list[int]:
        """Partitions whose log starts after offset 0: retention deleted their oldest records."""
        return sorted(p for p, n in self.deleted.items() if n > 0)

    def add(self, value: bytes | None) -> None:
        self.records += 1
        found = identify(value)
        if found is None:
            self.foreign += 1
            return
        run_id, seq = found
        tally = self.runs.get(run_id)
        if tally is None:
            tally = self.runs[run_id] = SeqTally()
        tally.add(seq)


@dataclass(frozen=True)
class Verification:
    """The verdict of one verify."""

    topic: str
    run_id: str | None
    expected: int
    present: int
    missing: int
    missing_ids: list[str]
    duplicates: int
    beyond_expected: int
    run_records: int
    stats_records: int
    foreign: int
    other_runs: dict[str, int]
    partitions: int
    complete: bool
    duration_seconds: float
    truncated_partitions: list[int] = field(default_factory=list)
    deleted_records: int = 0
    """Records retention deleted before the read (offsets before each log start)."""
    read_errors: dict[str, int] = field(default_factory=dict)

    @property
    def unverifiable(self) -> int:
        """Missing events that may be among the records retention deleted."""
        return min(self.missing, self.deleted_records)

    @property
    def lost(self) -> int:
        """Missing events that retention cannot explain: at least this many are lost."""
        return self.missing - self.unverifiable

    @property
    def exit_code(self) -> int:
        if not self.complete:
            return ExitCode.UNAVAILABLE
        if self.lost:
            return ExitCode.DEGRADED
        return ExitCode.UNVERIFIABLE if self.unverifiable else ExitCode.OK

    def as_json(self) -> dict[str, Any]:
        return {
            "topic": self.topic,
            "run_id": self.run_id,
            "ok": self.exit_code == ExitCode.OK,
            "complete": self.complete,
            "expected": self.expected,
            "present": self.present,
            "missing": self.missing,
            "missing_ids": self.missing_ids,
            "lost": self.lost,
            "unverifiable": self.unverifiable,
            "deleted_records": self.deleted_records,
            "duplicates": self.duplicates,
            "beyond_expected": self.beyond_expected,
            "run_records": self.run_records,
            "records_read": self.stats_records,
            "foreign_records": self.foreign,
            "other_runs": self.other_runs,
            "partitions": self.partitions,
            "truncated_partitions": self.truncated_partitions,
            "read_errors": self.read_errors,
            "duration_seconds": round(self.duration_seconds, 3),
        }

    def render(self) -> str:
        lines = [
            f"verify {self.topic}: run {self.run_id or '-'}, read {self.stats_records:,} records "
            f"from {self.partitions} partitions in {self.duration_seconds:.1f} s",
            f"  expected     {self.expected:,}",
            f"  present      {self.present:,}",
            f"  missing      {self.missing:,}"
            + (f" (first: {', '.join(self.missing_ids)})" if self.missing_ids else ""),
            f"  duplicates   {self.duplicates:,} (allowed: at-least-once)",
        ]
        if self.beyond_expected:
            lines.append(f"  beyond --expect  {self.beyond_expected:,} distinct seqs >= expected")
        if self.other_runs:
            others = ", ".join(f"{r} ({n:,})" for r, n in sorted(self.other_runs.items()))
            lines.append(f"  other runs   {others}")
        if self.truncated_partitions:
            lines.append(
                f"  note         partitions {', '.join(map(str, self.truncated_partitions))} "
                f"no longer start at offset 0: retention deleted up to {self.deleted_records:,} "
                "records, which cannot be checked"
            )
        if self.read_errors:
            errors = ", ".join(f"{code} (x{n})" for code, n in sorted(self.read_errors.items()))
            lines.append(f"  read errors  {errors}")
        if not self.complete:
            lines.append("INCOMPLETE: not every partition was read to its end in time")
        elif self.lost:
            also = f" ({self.unverifiable:,} more unverifiable)" if self.unverifiable else ""
            lines.append(f"FAILED: {self.lost:,} events missing{also}")
        elif self.unverifiable:
            lines.append(
                f"UNVERIFIABLE: {self.unverifiable:,} events not found, no more than retention "
                "deleted: they cannot be told from lost ones"
            )
        else:
            lines.append("OK: every event is in the topic")
        return "\n".join(lines)


def select_run(runs: Mapping[str, SeqTally], run_id: str | None) -> str | None:
    """The run to check: the one asked for, else the only one in the topic."""
    if run_id is not None or len(runs) <= 1:
        return run_id if run_id is not None else next(iter(runs), None)
    found = ", ".join(f"{r} ({t.records:,} records)" for r, t in sorted(runs.items()))
    raise UsageError(f"the topic holds events of {len(runs)} runs: {found}; pass --run-id")


def judge(
    stats: ReadStats,
    topic: str,
    expected: int,
    run_id: str | None,
    duration_seconds: float,
) -> Verification:
    """The verification of `run_id` (or the only run) against `expected` events."""
    chosen = select_run(stats.runs, run_id)
    tally = stats.runs.get(chosen) if chosen is not None else None
    tally = tally or SeqTally()
    missing = tally.missing(expected)
    return Verification(
        topic=topic,
        run_id=chosen,
        expected=expected,
        present=expected - len(missing),
        missing=len(missing),
        missing_ids=[event_id(chosen or "?", s) for s in missing[:MISSING_SAMPLE]],
        duplicates=tally.duplicates,
        beyond_expected=tally.beyond(expected),
        run_records=tally.records,
        stats_records=stats.records,
        foreign=stats.foreign,
        other_runs={r: t.records for r, t in stats.runs.items() if r != chosen},
        partitions=stats.partitions,
        complete=stats.complete,
        duration_seconds=duration_seconds,
        truncated_partitions=stats.truncated,
        deleted_records=sum(stats.deleted.values()),
        read_errors=dict(stats.errors),
    )


def read_topic(
    bootstrap: str,
    topic: str,
    timeout_seconds: float,
    consumer_conf: Mapping[str, str] | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> ReadStats:
    """Read every partition of `topic` from the beginning to its current end."""
    deadline = clock() + timeout_seconds
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"hangwatch-verify-{uuid.uuid4().hex[:12]}",
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "auto.offset.reset": "earliest",
            "enable.partition.eof": True,
            "log_level": 0,  # connection errors are counted in `read_errors`, not logged
            **(consumer_conf or {}),
        }
    )
    stats = ReadStats()
    try:
        ends = partition_ends(consumer, topic, deadline, clock)
        stats.partitions = len(ends)
        stats.deleted = {p: low for p, (low, _) in ends.items() if low > 0}
        pending = {p: high for p, (low, high) in ends.items() if high > low}
        if pending:
            consumer.assign([TopicPartition(topic, p, ends[p][0]) for p in pending])
        while pending and clock() < deadline:
            for msg in consumer.consume(BATCH, timeout=min(0.5, max(0.0, deadline - clock()))):
                _take(msg, pending, stats)
        stats.complete = not pending
    finally:
        consumer.close()
    return stats


def _take(msg: Message, pending: dict[int, int], stats: ReadStats) -> None:
    """Count one consumed message; a partition is done once its start-time end is reached."""
    err = msg.error()
    if err is not None and err.code() != KafkaError._PARTITION_EOF:
        stats.errors[err.name()] = stats.errors.get(err.name(), 0) + 1
        return
    partition, offset = msg.partition(), msg.offset()
    if partition is None or offset is None or partition not in pending:
        return  # a partition already read to its end, or no position
    if err is not None:  # end of partition: done if it holds nothing newer to wait for
        if offset >= pending[partition]:
            del pending[partition]
        return
    if offset >= pending[partition]:
        del pending[partition]  # written after we started: not ours to judge
        return
    stats.add(msg.value())
    if offset >= pending[partition] - 1:
        del pending[partition]


def partition_ends(
    consumer: Consumer, topic: str, deadline: float, clock: Callable[[], float]
) -> dict[int, tuple[int, int]]:
    timeout = max(1.0, deadline - clock())
    try:
        metadata = consumer.list_topics(topic, timeout=timeout)
    except KafkaException as exc:
        raise VerifyError(f"cannot read the metadata of {topic!r}: {_text(exc)}") from None
    described = metadata.topics.get(topic)
    if described is None or described.error is not None:
        reason = described.error.str() if described is not None and described.error else "absent"
        raise VerifyError(f"topic {topic!r} cannot be read: {reason}")
    return {
        partition: watermarks(consumer, TopicPartition(topic, partition), deadline, clock)
        for partition in sorted(described.partitions)
    }


OFFSETS_RETRY_SECONDS = 0.5
"""Pause before asking a partition's offsets again after a retriable error."""


def watermarks(
    consumer: Consumer,
    partition: TopicPartition,
    deadline: float,
    clock: Callable[[], float],
    sleep: Callable[[float], None] = time.sleep,
) -> tuple[int, int]:
    """A partition's (low, high) offsets. A retriable error (a leader that just moved in an
    election: NOT_LEADER_OR_FOLLOWER, while the client's metadata catches up) is asked
    again until `deadline` (retriable as Apache Kafka flags it, `hangwatch.kafka_errors`:
    the client's own `KafkaError.retriable()` is False for these); any other error, or one
    outlasting the deadline, ends the read."""
    while True:
        try:
            low, high = consumer.get_watermark_offsets(
                partition, timeout=max(1.0, deadline - clock())
            )
            return low, high
        except KafkaException as exc:
            error = exc.args[0] if exc.args else None
            known = kafka_errors.by_code(error.code()) if isinstance(error, KafkaError) else None
            again = known is not None and known.retriable is True
            if not again or clock() + OFFSETS_RETRY_SECONDS >= deadline:
                where = f"{partition.topic}[{partition.partition}]"
                raise VerifyError(f"cannot read the offsets of {where}: {_text(exc)}") from None
        sleep(OFFSETS_RETRY_SECONDS)


def _text(exc: KafkaException) -> str:
    arg = exc.args[0] if exc.args else exc
    return str(arg.str()) if isinstance(arg, KafkaError) else str(arg)


def verify(
    bootstrap: str,
    topic: str,
    expected: int,
    run_id: str | None = None,
    timeout_seconds: float = 60.0,
    consumer_conf: Mapping[str, str] | None = None,
) -> Verification:
    """Read `topic` back and judge whether every event of the run is there."""
    started = time.monotonic()
    stats = read_topic(bootstrap, topic, timeout_seconds, consumer_conf)
    return judge(stats, topic, expected, run_id, time.monotonic() - started)
