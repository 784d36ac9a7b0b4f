"""The reference pipeline's records: generated or parsed, enriched, encoded as Kafka messages.

Pure functions the Spark job (`hangwatch_pipeline.job`) maps over its partitions and
`hangwatch pipeline verify` uses to read messages back. Nothing here imports pyspark,
so every transform is unit-tested without a Spark session.

An event is a flat JSON object. `run_id` and `seq` identify it: `seq` runs 0..N-1
within one run (the generator's counter, or the record's position in the input files)
and `event_id` is `<run_id>-<seq>`, unique per run. The message key is `entity_id`, so
every event of one entity lands in one partition, in order. The enrichment adds two
derived fields: `amount_band` and `amount_eur_cents` (fixed reference rates).
"""

from __future__ import annotations

import csv
import datetime as dt
import json
import time
import zlib
from collections.abc import Callable, Mapping
from typing import Any

CURRENCIES = ("EUR", "USD", "GBP")
"""Currencies the generator uses (the enrichment knows their reference rates)."""

EUR_RATES = {"EUR": 1.0, "USD": 0.92, "GBP": 1.17, "CHF": 1.05, "JPY": 0.0061}
"""Fixed reference rates to EUR of the enrichment; other currencies get no EUR amount."""

BANDS = ((10_00, "small"), (100_00, "medium"))
"""Upper bounds (exclusive, cents) of the amount bands; anything above is `large`."""

ENTITY_COUNT = 10_000
"""Distinct entities (message keys) of generated events."""

REQUIRED_FIELDS = ("entity_id", "amount_cents")
"""Fields an input record must have."""

PIPELINE_FIELDS = frozenset(
    {"run_id", "seq", "event_id", "amount_band", "amount_eur_cents", "attributes"}
)
"""Fields the pipeline sets; an input record must not bring its own."""

_KNOWN_INPUT_FIELDS = frozenset({"entity_id", "amount_cents", "currency", "event_ts"})


class InvalidRecordError(ValueError):
    """An input record cannot be turned into an event; the message names the record."""


def event_id(run_id: str, seq: int) -> str:
    """The unique id of event `seq` of run `run_id`."""
    return f"{run_id}-{seq}"


def iso_time(epoch_seconds: float) -> str:
    """`2026-05-09T10:15:00.123Z`: event times in UTC, millisecond precision."""
    moment = dt.datetime.fromtimestamp(epoch_seconds, tz=dt.UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def generate_event(seq: int, run_id: str, now: float) -> dict[str, Any]:
    """Event `seq` of a generated run: deterministic entity, amount and currency, time `now`."""
    digest = zlib.crc32(f"{run_id}:{seq}".encode())
    return {
        "run_id": run_id,
        "seq": seq,
        "entity_id": f"customer-{digest % ENTITY_COUNT:05d}",
        "amount_cents": (digest >> 14) % 250_00,
        "currency": CURRENCIES[seq % len(CURRENCIES)],
        "event_ts": iso_time(now),
    }


def parse_json_line(line: str, seq: int, run_id: str) -> dict[str, Any]:
    """An input record from one JSON line (an object with `entity_id` and `amount_cents`)."""
    try:
        record = json.loads(line)
    except ValueError as exc:
        raise InvalidRecordError(f"record {seq}: not valid JSON ({exc})") from None
    if not isinstance(record, dict):
        raise InvalidRecordError(
            f"record {seq}: expected a JSON object, got {type(record).__name__}"
        )
    return _from_record(record, seq, run_id)


def csv_header(line: str) -> list[str]:
    """The column names of a CSV header line."""
    columns = [c.strip() for c in next(csv.reader([line]), [])]
    missing = [f for f in REQUIRED_FIELDS if f not in columns]
    if missing:
        raise InvalidRecordError(
            f"CSV header lacks column(s) {', '.join(missing)}: {line.strip()!r}"
        )
    return columns


def parse_csv_line(line: str, columns: list[str], seq: int, run_id: str) -> dict[str, Any]:
    """An input record from one CSV line, with the header's `columns`."""
    values = next(csv.reader([line]), [])
    if len(values) != len(columns):
        raise InvalidRecordError(
            f"record {seq}: {len(values)} CSV fields, header has {len(columns)}"
        )
    return _from_record(dict(zip(columns, values, strict=True)), seq, run_id)


def _from_record(record: Mapping[str, Any], seq: int, run_id: str) -> dict[str, Any]:
    for name in REQUIRED_FIELDS:
        if record.get(name) in (None, ""):
            raise InvalidRecordError(f"record {seq}: missing {name!r}")
    clash = sorted(PIPELINE_FIELDS & record.keys())
    if clash:
        raise InvalidRecordError(
            f"record {seq}: field(s) {', '.join(clash)} are set by the pipeline"
        )
    amount = record["amount_cents"]
    try:
        cents = int(amount)
    except (TypeError, ValueError):
        raise InvalidRecordError(
            f"record {seq}: amount_cents must be an integer, got {amount!r}"
        ) from None
    if cents < 0 or isinstance(amount, bool | float):
        raise InvalidRecordError(
            f"record {seq}: amount_cents must be an integer >= 0, got {amount!r}"
        )
    event: dict[str, Any] = {
        "run_id": run_id,
        "seq": seq,
        "entity_id": str(record["entity_id"]),
        "amount_cents": cents,
        "currency": str(record.get("currency") or "EUR").upper(),
        "event_ts": record.get("event_ts") or None,
    }
    extra = {k: v for k, v in record.items() if k not in _KNOWN_INPUT_FIELDS}
    if extra:
        event["attributes"] = extra
    return event


def amount_band(cents: int) -> str:
    """`small` below 10.00, `medium` below 100.00, else `large`."""
    return next((band for bound, band in BANDS if cents < bound), "large")


def enrich(event: Mapping[str, Any]) -> dict[str, Any]:
    """The event with `event_id`, `amount_band` and `amount_eur_cents` (None if no rate)."""
    rate = EUR_RATES.get(str(event.get("currency")))
    cents = int(event["amount_cents"])
    return {
        **event,
        "event_id": event_id(str(event["run_id"]), int(event["seq"])),
        "amount_band": amount_band(cents),
        "amount_eur_cents": None if rate is None else round(cents * rate),
    }


def to_message(event: Mapping[str, Any]) -> tuple[bytes, bytes]:
    """(key, value) of the Kafka message: keyed by entity, compact JSON value."""
    value = json.dumps(event, separators=(",", ":"), ensure_ascii=False)
    return str(event["entity_id"]).encode(), value.encode()


def identify(value: bytes | None) -> tuple[str, int] | None:
    """(run_id, seq) of a message written by the pipeline, None for anything else."""
    if not value:
        return None
    try:
        event = json.loads(value)
    except ValueError:
        return None
    if not isinstance(event, dict):
        return None
    run_id, seq = event.get("run_id"), event.get("seq")
    if not isinstance(run_id, str) or not isinstance(seq, int) or isinstance(seq, bool):
        return None
    return run_id, seq


class Pacer:
    """Holds a sender to `rate_per_second` on average: call `tick()` after each message.

    Sleeps only every few messages (about every 10 ms of schedule), so pacing costs
    next to nothing at high rates. The schedule starts at the first tick's time.
    """

    def __init__(
        self,
        rate_per_second: float,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        if rate_per_second <= 0:
            raise ValueError(f"rate must be > 0, got {rate_per_second}")
        self.rate = rate_per_second
        self._clock, self._sleep = clock, sleep
        self._every = max(1, min(64, int(rate_per_second / 100)))
        self._start: float | None = None
        self.count = 0

    def tick(self) -> None:
        """One message sent; sleep if the sender is ahead of the schedule."""
        if self._start is None:
            self._start = self._clock()
        self.count += 1
        if self.count % self._every:
            return
        delay = self._start + self.count / self.rate - self._clock()
        if delay > 0:
            self._sleep(delay)
