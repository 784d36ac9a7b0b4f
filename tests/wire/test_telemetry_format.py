"""The telemetry wire format: one typed definition, round trips, bounds and the version rule.

Covers: a full document survives encode -> decode -> encode unchanged, and so does one
the producer wrapper builds; unknown fields are ignored (new fields within schema 1),
another schema is refused naming both versions; each hostile value the issue lists
(`"stats": "oops"`, `"topics": 5`, NaN, infinities, negative or huge counters, deep
nesting, over-long identity strings) is refused with a `Problem` kind and a short
reason; property: any JSON value at any field of a valid document, and any bytes at
all, decode to a document or to `WireFormatError` - never another exception - and
every document that decodes survives a round trip; file names map to producer keys.
"""

from __future__ import annotations

import math
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hangwatch_producer.wire import telemetry as wire
from hangwatch_producer.wire.schema import MAX_REASON, Problem, WireFormatError

from .documents import TELEMETRY_PATHS, dumps, json_values, nested_json, replaced, telemetry


def test_a_full_document_round_trips() -> None:
    doc = wire.decode(dumps(telemetry()))
    assert wire.decode(wire.encode(doc)) == doc
    assert wire.to_builtins(doc) == telemetry()
    assert doc.identity.client_id == "hangwatch-etl-exec-1-77-1"
    assert doc.stats is not None and doc.stats.topics["t"].partitions is not None
    assert doc.stats.topics["t"].partitions["0"].leader == 1


def test_the_wrappers_own_document_round_trips() -> None:
    from hangwatch_producer.telemetry import document, trim_statistics
    from tests.pipeline.test_telemetry_document import SNAPSHOT

    raw_stats = telemetry()["stats"]
    for level in wire.DETAIL_LEVELS:
        doc = document(SNAPSHOT, trim_statistics(raw_stats, level), level)
        assert wire.decode(wire.encode(doc)) == doc, level


def test_unknown_fields_are_ignored_and_absent_ones_default() -> None:
    doc = wire.decode(dumps({**telemetry(), "added_in_a_later_release": {"x": [1, 2]}}))
    assert doc == wire.decode(dumps(telemetry()))
    bare = wire.decode(dumps({"schema": 1, "seq": 1, "counters": {}}))
    assert bare.counters.pending == 0 and bare.stats is None and bare.identity.pod is None


def test_another_schema_is_refused_naming_both() -> None:
    with pytest.raises(WireFormatError) as newer:
        wire.decode(dumps(telemetry(schema=2)))
    assert newer.value.problem is Problem.UNSUPPORTED_SCHEMA
    assert str(newer.value) == "unsupported telemetry schema 2 (this reader knows 1)"
    with pytest.raises(WireFormatError) as foreign:
        wire.decode(dumps(telemetry(kind="something.else")))
    assert foreign.value.problem is Problem.FOREIGN_FILE


HOSTILE: list[tuple[str, tuple[Any, ...], Any, Problem]] = [
    ("stats is a string", ("stats",), "oops", Problem.BAD_FIELD),
    ("topics is a number", ("topics",), 5, Problem.BAD_FIELD),
    ("NaN counter", ("counters", "delivered"), math.nan, Problem.INVALID_JSON),
    ("infinite timestamp", ("ts",), math.inf, Problem.INVALID_JSON),
    ("negative counter", ("counters", "failed"), -1, Problem.BAD_FIELD),
    ("huge counter", ("counters", "enqueued"), 2**64, Problem.BAD_FIELD),
    ("huge seq", ("seq",), 10**30, Problem.MISSING_FIELDS),
    ("negative heartbeat", ("seq",), -3, Problem.MISSING_FIELDS),
    ("250 kB client id", ("identity", "client_id"), "c" * 250_000, Problem.BAD_FIELD),
    ("long topic name", ("topics",), ["t" * 300], Problem.BAD_FIELD),
    ("too many topics", ("topics",), [f"t{i}" for i in range(101)], Problem.BAD_FIELD),
    ("broker is a list", ("stats", "brokers", "10.0.0.1:9092/1"), [1], Problem.BAD_FIELD),
    ("partition key", ("stats", "topics", "t", "partitions"), {"x": {}}, Problem.BAD_FIELD),
    ("leader below -1", ("stats", "topics", "t", "partitions", "0", "leader"), -7,
     Problem.BAD_FIELD),
    ("nested config", ("config",), {"a": {"b": 1}}, Problem.BAD_FIELD),
    ("boolean counter", ("counters", "delivered"), True, Problem.BAD_FIELD),
    ("counters missing", ("counters",), None, Problem.MISSING_FIELDS),
]  # fmt: skip


@pytest.mark.parametrize(("path", "value", "problem"), [h[1:] for h in HOSTILE],
                         ids=[h[0] for h in HOSTILE])  # fmt: skip
def test_hostile_values_are_refused_with_a_kind_and_a_short_reason(
    path: tuple[Any, ...], value: Any, problem: Problem
) -> None:
    with pytest.raises(WireFormatError) as refused:
        wire.decode(dumps(replaced(telemetry(), path, value)))
    assert refused.value.problem is problem
    assert 0 < len(str(refused.value)) <= MAX_REASON


@pytest.mark.parametrize("where", ["top", "stats", "unknown"])
def test_deep_nesting_is_refused(where: str) -> None:
    deep = nested_json(100_000)
    base = dumps(telemetry())[:-1]
    raw = {
        "top": deep,
        "stats": base.replace(b'"stats":{', b'"stats":{"brokers":' + deep + b",", 1) + b"}",
        "unknown": base + b',"later":' + deep + b"}",
    }[where]
    with pytest.raises(WireFormatError) as refused:
        wire.decode(raw)
    assert refused.value.problem in (Problem.INVALID_JSON, Problem.NOT_AN_OBJECT)


@settings(max_examples=400)
@given(path=st.sampled_from(TELEMETRY_PATHS), value=json_values)
def test_any_value_anywhere_decodes_or_is_refused(path: tuple[Any, ...], value: Any) -> None:
    try:
        doc = wire.decode(dumps(replaced(telemetry(), path, value)))
    except WireFormatError as exc:
        assert isinstance(exc.problem, Problem) and len(str(exc)) <= MAX_REASON
        return
    assert wire.decode(wire.encode(doc)) == doc


@settings(max_examples=300)
@given(raw=st.binary(max_size=2000) | json_values.map(dumps))
def test_any_bytes_decode_or_are_refused(raw: bytes) -> None:
    try:
        doc = wire.decode(raw)
    except WireFormatError:
        return
    assert wire.decode(wire.encode(doc)) == doc


def test_file_names_and_keys() -> None:
    name = wire.file_name(77, 2)
    assert name == "producer-77-2.json" and wire.key_of(name) == "producer-77-2"
    assert wire.lock_name("producer-77-2") == "producer-77-2.lock"
    assert wire.temp_name(name) == ".producer-77-2.json.tmp"
    assert wire.key_of(wire.temp_name(name)) is None and wire.key_of("producer-1.lock") is None
