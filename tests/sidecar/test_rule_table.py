"""The sidecar's judgement is one table of named rules, and extending it is one row.

Covers: a throwaway rule added as one row takes effect where the row stands - a
pod-level rule before the restart verdicts (every producer takes its verdict), a
producer's rule before the telemetry's stall rules, a new source's contribution to a
merged verdict (its reasons after the sources above it) - and changes nothing placed
after a rule that judges first; every row's function gives its row's verdict, and the
walk is total, on generated evidence (hypothesis: `evidence_strategies`); each sidecar
verdict of `hangwatch.verdicts` is some rule's, no rule gives an operator-only verdict;
the table refuses a name given twice and a verdict's merge rows standing apart, and a
table whose rules all pass says so; the module docstring shows the table in its order.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from hypothesis import given, settings

from hangwatch.contracts import Reachability
from hangwatch.contracts import Verdict as V
from hangwatch.verdicts import VERDICTS, JudgedBy
from hangwatch_sidecar import rules
from hangwatch_sidecar.assessment import Assessment, Thresholds
from hangwatch_sidecar.evidence import BrokerObservation
from hangwatch_sidecar.merge import Contribution
from hangwatch_sidecar.round import Round, RoundEvidence
from hangwatch_sidecar.rules import RULES, MergeRule, PodRule, ProducerRule, RuleTableError
from hangwatch_sidecar.telemetry.judge import ProducerRound
from tests.sidecar.builders import cluster, producer
from tests.sidecar.evidence_strategies import rounds, thresholds

T = Thresholds(stall_seconds=30, heartbeat_seconds=15, election_grace_seconds=15)
STUCK = {"pending": 100, "pending_seconds": 60, "progress_age_seconds": 60}
"""A producer with messages pending and no delivery for a minute: `producer_hung`."""


def _inserted(after: str, row: rules.Rule) -> tuple[rules.Rule, ...]:
    """RULES with `row` right after the row named `after`."""
    at = [r.name for r in RULES].index(after) + 1
    return (*RULES[:at], row, *RULES[at:])


def _judge(evidence: RoundEvidence, table: tuple[rules.Rule, ...] = RULES) -> Any:
    return rules.evaluate(evidence, thresholds=T, now=100.0, rules=table)


def _unwritable(r: Round) -> Assessment | None:
    """A throwaway pod-level rule: the cluster's metadata is a day old."""
    age = r.cluster.metadata_age_seconds
    if age is None or age < 86400:
        return None
    return Assessment(V.BROKER_DEGRADED, ("the cluster's metadata is a day old",))


def test_a_pod_level_row_takes_effect_where_it_stands() -> None:
    row = PodRule("metadata_a_day_old", V.BROKER_DEGRADED, "a throwaway", _unwritable, shared=True)
    table = _inserted("leader_election", row)
    old = RoundEvidence(cluster(metadata_age_seconds=90000.0), [producer(**STUCK)])
    fresh = RoundEvidence(cluster(metadata_age_seconds=5.0), [producer(**STUCK)])
    assert _judge(old).pod.verdict is V.PRODUCER_HUNG  # without the row
    found = _judge(old, table)
    assert found.pod.verdict is V.BROKER_DEGRADED
    assert found.pod.reasons == ("the cluster's metadata is a day old",)
    assert found.producers["producer-42-1"] == found.pod  # shared: every producer's
    assert _judge(fresh, table) == _judge(fresh)  # a row that does not judge changes nothing


def test_a_pod_level_row_after_a_rule_that_judges_is_never_reached() -> None:
    row = PodRule("metadata_a_day_old", V.BROKER_DEGRADED, "a throwaway", _unwritable)
    evidence = RoundEvidence(cluster(metadata_age_seconds=90000.0), [producer(**STUCK)])
    assert _judge(evidence, _inserted("jvm_thread_held", row)).pod.verdict is V.PRODUCER_HUNG
    assert _judge(evidence, _inserted("connections_degraded", row)).pod.verdict is (V.PRODUCER_HUNG)


def _many_failures(r: ProducerRound) -> Assessment | None:
    """A throwaway producer rule: a hundred failed messages."""
    if r.producer.failed_total < 100:
        return None
    return Assessment(V.METADATA_STALE, ("a hundred messages failed",), {"failed": 100})


def test_a_producer_row_gives_that_producer_its_verdict() -> None:
    row = ProducerRule("many_failures", V.METADATA_STALE, "a throwaway", _many_failures)
    table = _inserted("java_client", row)
    failing = producer(key="failing", failed_total=100, **STUCK)
    other = producer(key="other")
    found = _judge(RoundEvidence(cluster(), [failing, other]), table)
    assert found.producers["failing"].verdict is V.METADATA_STALE
    assert found.producers["failing"].evidence["failed"] == 100
    assert found.producers["failing"].evidence["pending"] == 100  # the producer's own too
    assert found.producers["other"].verdict is V.HEALTHY
    assert found.pod.verdict is V.METADATA_STALE
    assert found.pod.reasons == ("producer failing: a hundred messages failed",)
    assert _judge(RoundEvidence(cluster(), [failing, other])).pod.verdict is V.PRODUCER_HUNG


def _new_source(r: Round, verdict: V) -> Contribution | None:
    """A throwaway source: a broker whose detail says so."""
    named = [b.address for b in r.cluster.brokers if b.detail == "frozen"]
    if not named:
        return None
    return Contribution((f"new source: {', '.join(named)} is frozen",))


def test_a_merge_row_adds_a_source_to_its_verdict() -> None:
    row = MergeRule("frozen_brokers", V.PRODUCER_HUNG, "a throwaway", _new_source)
    table = _inserted("telemetry_hung", row)
    frozen = replace(
        cluster(),
        brokers=(BrokerObservation("10.0.0.1:9092", Reachability.OK, 1, detail="frozen"),),
    )
    alone = _judge(RoundEvidence(frozen, [producer()]), table)
    assert alone.pod.verdict is V.PRODUCER_HUNG
    assert alone.pod.reasons == ("new source: 10.0.0.1:9092 is frozen",)
    assert alone.producers["producer-42-1"].verdict is V.HEALTHY  # a producer keeps its own
    both = _judge(RoundEvidence(frozen, [producer(**STUCK)]), table)
    assert both.pod.reasons[0].startswith("producer producer-42-1: 100 messages pending")
    assert both.pod.reasons[1] == "new source: 10.0.0.1:9092 is frozen"
    assert _judge(RoundEvidence(frozen, [producer()])).pod.verdict is V.HEALTHY


def _checked(rule: rules.Rule) -> rules.Rule:
    """`rule`, asserting that whatever its function gives is its row's verdict."""
    if isinstance(rule, MergeRule):
        return rule
    judge: Any = rule.judge

    def checked(judged: Any) -> Assessment | None:
        found = judge(judged)
        assert found is None or found.verdict is rule.verdict, (rule.name, found)
        return found

    return replace(rule, judge=checked)


@given(rounds, thresholds())
@settings(max_examples=300, deadline=None)
def test_every_row_gives_its_own_verdict_and_the_walk_is_total(
    fields: dict[str, Any], limits: dict[str, Any]
) -> None:
    table = tuple(_checked(r) for r in RULES)
    found = rules.evaluate(RoundEvidence(**fields), thresholds=Thresholds(**limits), now=100.0)
    again = rules.evaluate(
        RoundEvidence(**fields), thresholds=Thresholds(**limits), now=100.0, rules=table
    )
    assert found == again
    given_by = {r.verdict for r in RULES if not isinstance(r, ProducerRule)}
    assert found.pod.verdict in given_by
    assert set(found.producers) <= {p.key for p in fields["producers"]}


def test_each_sidecar_verdict_is_some_rules_and_none_is_the_operators() -> None:
    sidecar = {p.verdict for p in VERDICTS if p.judged_by is JudgedBy.SIDECAR}
    assert {r.verdict for r in RULES} == sidecar


def test_the_table_refuses_what_it_cannot_walk() -> None:
    with pytest.raises(RuleTableError, match="unique"):
        rules.steps((*RULES, RULES[0]))
    apart = next(r for r in RULES if isinstance(r, MergeRule) and r.verdict is V.PRODUCER_HUNG)
    with pytest.raises(RuleTableError, match="stand apart"):
        rules.steps((*RULES, replace(apart, name="late")))
    passing = PodRule("never", V.HEALTHY, "never judges", lambda r: None)
    with pytest.raises(RuleTableError, match="no rule judged"):
        rules.evaluate(RoundEvidence(cluster()), thresholds=T, now=0.0, rules=(passing,))


def test_the_module_docstring_shows_the_table_in_its_order() -> None:
    assert rules.__doc__ is not None
    assert rules.precedence_list() in rules.__doc__
    shown = [
        line.split(". ", 1)[1].split(" ->")[0]
        for line in rules.__doc__.splitlines()
        if line[:3].strip().rstrip(".").isdigit()
    ]
    assert shown == [r.name for r in RULES]
