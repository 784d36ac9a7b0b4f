"""The /status wire format: one typed definition, round trips and a size bound that holds.

Covers: the document a real `SidecarState` gives survives encode -> decode; unknown
fields are ignored and another schema is refused; however much a pod's producers put
into their telemetry (250 kB client ids in evidence, hundreds of producers and brokers,
deep evidence), the encoded document stays within `MAX_BYTES`, keeps the verdict,
reasons and brokers first, and decodes; property: any evidence at all encodes within
the bound to a document that decodes.
"""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hangwatch.contracts import Reachability, Verdict
from hangwatch.wire import status
from hangwatch_producer.wire.schema import Problem, WireFormatError
from hangwatch_sidecar.assessment import Assessment, PodAssessment
from hangwatch_sidecar.evidence import BrokerObservation, ClusterObservation
from hangwatch_sidecar.state import SidecarState, status_document

from .documents import json_values


def state(
    evidence: dict[str, Any] | None = None, producers: int = 2, brokers: int = 3
) -> SidecarState:
    now = time.time()
    per_producer = {
        f"producer-{i}-1": Assessment(Verdict.HEALTHY, (), dict(evidence or {}))
        for i in range(producers)
    }
    return SidecarState(
        started_ts=now - 60,
        verdict=Verdict.PRODUCER_HUNG,
        since_ts=now - 5,
        assessment=PodAssessment(
            Assessment(Verdict.PRODUCER_HUNG, ("producer x is stuck",), dict(evidence or {})),
            per_producer,
        ),
        cluster=ClusterObservation(
            at=1.0,
            brokers=tuple(
                BrokerObservation(f"10.0.0.{i}:9092", Reachability.OK, node_id=i)
                for i in range(brokers)
            ),
            metadata_ok=True,
        ),
        cluster_ts=now,
        rounds=12,
        evaluated_ts=now,
        identity={"pod": "etl-exec-1"},
        settings={"stall_seconds": 30.0},
    )


def test_a_sidecars_document_round_trips() -> None:
    doc = status_document(state({"pending": 4}))
    decoded = status.decode(status.encode(doc))
    assert decoded == doc
    assert decoded.verdict == "producer_hung" and decoded.reasons == ["producer x is stuck"]
    assert [b.address for b in decoded.brokers] == [
        "10.0.0.0:9092",
        "10.0.0.1:9092",
        "10.0.0.2:9092",
    ]


def test_unknown_fields_are_ignored_and_another_schema_refused() -> None:
    body = json.loads(status.encode(status_document(state())))
    assert status.from_builtins({**body, "added_later": [1]}) == status.from_builtins(body)
    with pytest.raises(WireFormatError) as newer:
        status.from_builtins({**body, "schema": 2})
    assert newer.value.problem is Problem.UNSUPPORTED_SCHEMA


@pytest.mark.parametrize(
    ("evidence", "producers", "brokers"),
    [
        ({"client_id": "c" * 250_000}, 8, 3),
        ({"client_id": "c" * 250_000}, 64, 3),
        ({"deep": [[[[[[[[[[[[["x" * 5000]]]]]]]]]]]]]}, 64, 3),
        ({f"k{i}": "v" * 900 for i in range(1000)}, 300, 1000),
    ],
    ids=["client-ids", "64-producers", "deep", "everything"],
)
def test_the_size_bound_holds_and_keeps_what_the_operator_reads(
    evidence: dict[str, Any], producers: int, brokers: int
) -> None:
    body = status.encode(status_document(state(evidence, producers, brokers)))
    assert len(body) <= status.MAX_BYTES
    decoded = status.decode(body)
    assert decoded.verdict == "producer_hung" and decoded.reasons == ["producer x is stuck"]
    assert decoded.sidecar.evaluated_ts is not None and decoded.brokers


@settings(max_examples=200)
@given(evidence=st.dictionaries(st.text(max_size=30), json_values, max_size=6))
def test_any_evidence_encodes_within_the_bound(evidence: dict[str, Any]) -> None:
    body = status.encode(status_document(state(evidence)))
    assert len(body) <= status.MAX_BYTES
    assert status.decode(body).verdict == "producer_hung"
