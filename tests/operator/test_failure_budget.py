"""A restart that would exhaust the application's Spark failure budget is refused (pure).

Covers `decisions.decide` with the budget the pod's sidecar reports: a restart the
budget takes goes ahead; one that would be the failure Spark ends the application on
(remaining 0, or 1 with another restart of the same application already planned this
round) is suppressed as `failure_budget` with a sentence naming the failure count, the
setting (set or Spark's default, with its validity interval) and what is done instead,
and an alert is raised in its place (the policy's restart-only actions); an unknown or
unlimited budget never refuses; driver protection still comes first; a budget read by
the sidecar crosses /status (the wire) into the operator's report intact.
"""

from __future__ import annotations

import dataclasses

import msgspec

from hangwatch.contracts import Verdict
from hangwatch.wire import status
from hangwatch.wire.status import FailureBudget
from hangwatch_operator.correlation import correlate
from hangwatch_operator.decisions import budget_exhausted, decide
from hangwatch_operator.history import History
from hangwatch_operator.operations import Operation, Outcome, Suppression
from hangwatch_operator.sidecar_status import PodReport, parse_status
from hangwatch_operator.watched import WatchedPod
from tests.operator.builders import NOW, pod, policy, report

HUNG = Verdict.PRODUCER_HUNG


def _budget(remaining: int, *, limit: int = 4, configured: bool = True) -> FailureBudget:
    return FailureBudget(
        spark_version="4.2.0",
        max_failures=limit,
        configured=configured,
        validity_seconds=None,
        failures=limit - remaining,
        remaining=remaining,
    )


def _hung(the_pod: WatchedPod, budget: FailureBudget | None) -> PodReport:
    return PodReport(the_pod, dataclasses.replace(report(HUNG), failure_budget=budget))


def _decide(*budgets: FailureBudget | None, **spec: object) -> list[tuple[str, str, Outcome, str]]:
    reports = [_hung(pod(f"exec-{i}"), b) for i, b in enumerate(budgets, start=1)]
    healthy = [PodReport(pod(f"ok-{i}"), report(Verdict.HEALTHY)) for i in range(8)]
    found = correlate(reports + healthy)
    chosen = policy(safety={"maxConcurrent": 5, "maxUnhealthyShare": 0.9}, **spec)
    out = decide(found, chosen, History(), NOW)
    return [(d.target, d.operation, d.outcome, d.suppression or d.limit) for d in out]


def test_a_restart_the_budget_takes_goes_ahead() -> None:
    assert _decide(_budget(1)) == [("jobs/exec-1", Operation.RESTART, Outcome.ACTED, "")]


def test_a_restart_that_would_end_the_application_is_refused_with_an_alert_instead() -> None:
    found = correlate([_hung(pod("exec-1"), _budget(0))])
    out = decide(found, policy(), History(), NOW)
    restart, alert = out
    assert (restart.operation, restart.outcome) == (Operation.RESTART, Outcome.SUPPRESSED)
    assert restart.suppression is Suppression.FAILURE_BUDGET
    assert restart.limit == (
        "restarting would be executor failure 5 of the application, whose "
        "spark.executor.maxNumFailures is 4: Spark would end the application; alerting instead"
    )
    assert (alert.operation, alert.outcome, alert.suppression) == (
        Operation.ALERT, Outcome.ACTED, None,
    )  # fmt: skip
    assert alert.reasons == restart.reasons == ("sidecar says producer_hung",)


def test_restarts_planned_this_round_spend_the_same_budget() -> None:
    # two hung executors of one application, one failure left: the first is restarted,
    # the second would be the failure past the limit
    out = _decide(_budget(1), _budget(1))
    assert out[0] == ("jobs/exec-1", Operation.RESTART, Outcome.ACTED, "")
    assert out[1][:3] == ("jobs/exec-2", Operation.RESTART, Outcome.SUPPRESSED)
    assert out[1][3] == Suppression.FAILURE_BUDGET
    assert out[2][:3] == ("jobs/exec-2", Operation.ALERT, Outcome.ACTED)


def test_a_policy_alert_is_not_doubled() -> None:
    out = _decide(_budget(0), actions={"producerHung": ["alert", "restart"]})
    assert [(o[1], o[2]) for o in out] == [
        (Operation.ALERT, Outcome.ACTED), (Operation.RESTART, Outcome.SUPPRESSED),
    ]  # fmt: skip


def test_an_unknown_or_unlimited_budget_never_refuses() -> None:
    unlimited = FailureBudget(spark_version="3.4.1", max_failures=None, remaining=None)
    assert _decide(None) == [("jobs/exec-1", Operation.RESTART, Outcome.ACTED, "")]
    assert _decide(unlimited) == [("jobs/exec-1", Operation.RESTART, Outcome.ACTED, "")]


def test_the_sentence_names_the_default_and_the_validity_interval() -> None:
    budget = msgspec.structs.replace(_budget(0, limit=3, configured=False), validity_seconds=3600.0)
    assert budget_exhausted(budget, 0) == (
        "restarting would be executor failure 4 of the application, whose "
        "spark.executor.maxNumFailures (Spark's default) is 3 within "
        "spark.executor.failuresValidityInterval 3600 s: Spark would end the application; "
        "alerting instead"
    )
    assert budget_exhausted(_budget(2), 1) is None
    assert budget_exhausted(_budget(2), 2) is not None


def test_driver_protection_comes_before_the_budget() -> None:
    driver = pod("driver-1", role="driver")
    found = correlate([_hung(driver, _budget(0))])
    out = decide(found, policy(roles=["executor", "driver"]), History(), NOW)
    assert [(d.operation, d.suppression) for d in out] == [
        (Operation.RESTART, Suppression.DRIVER_PROTECTED)
    ]


def test_the_budget_crosses_the_wire_into_the_operators_report() -> None:
    doc = status.StatusDocument(
        verdict="producer_hung",
        sidecar=status.SidecarInfo(evaluated_ts=NOW - 1),
        spark=status.SparkStatus(driver_ui="http://driver:4040", failure_budget=_budget(0)),
    )
    parsed = parse_status(status.encode(doc), now=NOW, stale_after_seconds=30)
    assert parsed.failure_budget == _budget(0)
