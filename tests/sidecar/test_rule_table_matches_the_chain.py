"""The rule table gives what the chain it replaces gave, on any evidence.

Covers: `hangwatch_sidecar.rules.evaluate` (the ordered table of named rules) and
`hangwatch_sidecar.verdicts.evaluate` (the chain of early returns, `assess_producer`,
`_assess_metadata` and `_PRODUCER_ORDER` it replaces) give the same pod verdict, reasons,
evidence and `held`, and the same verdict, reasons and evidence for each producer, on
generated rounds (hypothesis, `evidence_strategies`): cluster observations of every shape
(none yet, unreachable, elections, failing members and dead bootstrap entries, absent
topics), producers with and without telemetry quirks, and the socket, Spark and stack
views' findings; with and without a declared write interval.
"""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings

from hangwatch_sidecar import rules, verdicts
from hangwatch_sidecar.assessment import Thresholds
from hangwatch_sidecar.round import RoundEvidence
from tests.sidecar.evidence_strategies import rounds, thresholds


def _plain(assessment: Any) -> tuple[Any, ...]:
    return (assessment.verdict, assessment.reasons, assessment.evidence, assessment.held)


@given(rounds, thresholds())
@settings(max_examples=600, deadline=None)
def test_the_table_judges_as_the_chain_did(fields: dict[str, Any], limits: dict[str, Any]) -> None:
    old = verdicts.evaluate(
        verdicts.RoundEvidence(**fields), thresholds=verdicts.Thresholds(**limits), now=100.0
    )
    new = rules.evaluate(RoundEvidence(**fields), thresholds=Thresholds(**limits), now=100.0)
    assert _plain(new.pod) == _plain(old.pod)
    assert {k: _plain(a) for k, a in new.producers.items()} == {
        k: _plain(a) for k, a in old.producers.items()
    }
