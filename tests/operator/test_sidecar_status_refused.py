"""The operator refuses a /status it cannot trust, and never crashes on one.

Covers `sidecar_status.parse_status` on bodies as they come off the wire: a NaN,
infinite, missing or future (beyond the clock-skew allowance) evaluation time and the
verdict `node_network_fault` that only the operator may give are refused with a
reason, while a clock a few seconds ahead is accepted; a body over the read limit is
refused; property: any JSON value at any field of a real sidecar's /status, and any
bytes at all, give a report or a `StatusFormatError` - never another exception.
"""

from __future__ import annotations

import contextlib
import json
import math
import time
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hangwatch.contracts import Verdict
from hangwatch.wire import status
from hangwatch_operator.sidecar_status import (
    CLOCK_SKEW_SECONDS,
    SidecarReport,
    StatusFormatError,
    parse_status,
)
from hangwatch_sidecar.state import status_document
from hangwatch_testing.remediation_cluster import FakeSidecar
from tests.wire.documents import dumps, json_values, paths, replaced

NOW = time.time()


def body(**changes: Any) -> dict[str, Any]:
    """A real sidecar's /status as JSON values, with top-level or sidecar changes."""
    sidecar = FakeSidecar(verdict=Verdict.PRODUCER_HUNG)
    doc: dict[str, Any] = json.loads(status.encode(status_document(sidecar.state())))
    doc["sidecar"]["evaluated_ts"] = NOW
    for key, value in changes.items():
        if key == "evaluated_ts":
            doc["sidecar"][key] = value
        else:
            doc[key] = value
    return doc


def parse(raw: bytes) -> SidecarReport:
    return parse_status(raw, now=NOW, stale_after_seconds=60)


def test_a_real_status_is_accepted_and_a_clock_slightly_ahead_too() -> None:
    assert parse(dumps(body())).verdict is Verdict.PRODUCER_HUNG
    assert parse(dumps(body(evaluated_ts=NOW + 10))).evaluated_ts == NOW + 10


@pytest.mark.parametrize(
    ("changes", "reason"),
    [
        ({"evaluated_ts": math.nan}, "not valid JSON"),
        ({"evaluated_ts": math.inf}, "not valid JSON"),
        ({"evaluated_ts": None}, "evaluated_ts is missing"),
        ({"evaluated_ts": "soon"}, "evaluated_ts"),
        ({"evaluated_ts": NOW + CLOCK_SKEW_SECONDS + 60}, "ahead"),
        ({"evaluated_ts": NOW + 10**9}, "ahead"),
        ({"verdict": "node_network_fault"}, "operator's"),
        ({"since": math.inf}, "not valid JSON"),
        ({"since": -5}, "since"),
        ({"reasons": "x"}, "reasons"),
    ],
    ids=["nan", "infinite", "missing", "text", "future", "far-future", "operator-only",
         "infinite-since", "negative-since", "reasons-not-list"],
)  # fmt: skip
def test_untrustworthy_status_is_refused(changes: dict[str, Any], reason: str) -> None:
    with pytest.raises(StatusFormatError) as refused:
        parse(dumps(body(**changes)))
    assert reason in str(refused.value)


def test_nan_in_already_decoded_json_is_refused() -> None:
    doc = body()
    doc["sidecar"]["evaluated_ts"] = math.nan  # json.loads accepts NaN tokens
    with pytest.raises(StatusFormatError, match="evaluated_ts"):
        parse_status(doc, now=NOW, stale_after_seconds=60)


def test_a_body_over_the_read_limit_is_refused() -> None:
    huge = dumps(body(reasons=["x" * 1000] * 1100))
    assert len(huge) > status.READ_LIMIT_BYTES
    with pytest.raises(StatusFormatError, match="larger than"):
        parse(huge)


STATUS_PATHS = paths(body())


@settings(max_examples=400)
@given(path=st.sampled_from(STATUS_PATHS), value=json_values)
def test_any_value_anywhere_gives_a_report_or_a_refusal(path: tuple[Any, ...], value: Any) -> None:
    try:
        report = parse(dumps(replaced(body(), path, value)))
    except StatusFormatError as exc:
        assert str(exc)
        return
    assert report.verdict is not Verdict.NODE_NETWORK_FAULT
    assert report.evaluated_ts is not None and math.isfinite(report.evaluated_ts)


@settings(max_examples=200)
@given(raw=st.binary(max_size=3000) | json_values.map(dumps))
def test_any_bytes_give_a_report_or_a_refusal(raw: bytes) -> None:
    with contextlib.suppress(StatusFormatError):
        parse(raw)
