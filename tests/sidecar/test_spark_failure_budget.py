"""The failure budget from the driver's answers: Spark's defaults, counting, refusals (pure).

Covers `hangwatch_sidecar.spark.failures`: Spark's default `maxNumFailures` for each
way an application sizes itself (static instances, dynamic allocation with and
without a maximum, DStream dynamic allocation) and the value the application set;
Spark before 3.5 has no budget; `failuresValidityInterval` in Spark's time syntax
(bare numbers are milliseconds); dead executors count, active ones, the driver and
decommissioned ones do not, and only those removed within the validity interval; and,
with hypothesis, any JSON the driver may send (the trust boundary) either gives a
budget that fits /status and is consistent (failures never more than the executors
listed, remaining = limit - failures) or is refused as an `AnswerError`, never another
exception.
"""

from __future__ import annotations

import datetime
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hangwatch.wire import status
from hangwatch_sidecar.spark import failures
from hangwatch_sidecar.spark.answers import AnswerError

V4 = ("4.2.0", (4, 2))
NOW = 1_800_000_000.0


def _env(**props: str) -> dict[str, Any]:
    return {"runtime": {}, "sparkProperties": [[k, v] for k, v in props.items()]}


def _props(**props: str) -> dict[str, str]:
    return {k.replace("_", "."): v for k, v in props.items()}


def _stamp(epoch: float) -> str:
    moment = datetime.datetime.fromtimestamp(epoch, tz=datetime.UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}GMT"


LIMITS: list[tuple[dict[str, str], int]] = [
    ({}, 3),
    ({"spark.executor.instances": "1"}, 3),
    ({"spark.executor.instances": "5"}, 10),
    ({"spark.dynamicAllocation.enabled": "true"}, failures.INT_MAX),
    ({"spark.dynamicAllocation.enabled": "true", "spark.dynamicAllocation.maxExecutors": "4",
      "spark.executor.instances": "50"}, 8),
    ({"spark.streaming.dynamicAllocation.enabled": "true",
      "spark.streaming.dynamicAllocation.maxExecutors": "6"}, 12),
    ({"spark.executor.instances": "5", "spark.executor.maxNumFailures": "1"}, 1),
]  # fmt: skip
"""Settings and the budget Spark gives them; test_failure_budget_on_a_real_driver asks each
Spark line's own `ExecutorFailureTracker` for the same."""


@pytest.mark.parametrize(("props", "limit"), LIMITS)
def test_the_limit_is_the_applications_or_sparks_default(props: dict[str, str], limit: int) -> None:
    settings_ = failures.budget_settings(V4, _env(**{k: v for k, v in props.items()}))
    assert settings_.max_failures == limit
    assert settings_.configured == ("spark.executor.maxNumFailures" in props)


def test_an_unbounded_default_has_no_remaining_count() -> None:
    settings_ = failures.budget_settings(V4, _env(**{"spark.dynamicAllocation.enabled": "true"}))
    assert failures.failure_budget(settings_, 7).remaining is None


def test_spark_before_3_5_ends_no_application_for_executor_failures() -> None:
    settings_ = failures.budget_settings(("3.4.1", (3, 4)), _env())
    assert settings_.max_failures is None
    assert failures.failure_budget(settings_, 9).remaining is None


@pytest.mark.parametrize(
    ("text", "seconds"), [("1h", 3600.0), ("30s", 30.0), ("500", 0.5), ("2min", 120.0),
                          ("1d", 86400.0), ("250ms", 0.25)],
)  # fmt: skip
def test_the_validity_interval_reads_sparks_time_syntax(text: str, seconds: float) -> None:
    env = _env(**{"spark.executor.failuresValidityInterval": text})
    assert failures.budget_settings(V4, env).validity_seconds == seconds


@pytest.mark.parametrize("text", ["soon", "-5s", "1 fortnight", ""])
def test_a_malformed_interval_is_refused(text: str) -> None:
    with pytest.raises(AnswerError, match="failuresValidityInterval"):
        failures.budget_settings(V4, _env(**{"spark.executor.failuresValidityInterval": text}))


def test_dead_executors_count_within_the_interval_and_unless_decommissioned() -> None:
    executors = [
        {"id": "driver", "isActive": True},
        {"id": "1", "isActive": False, "removeTime": _stamp(NOW - 7200),
         "removeReason": "Executor heartbeat timed out"},
        {"id": "2", "isActive": False, "removeTime": _stamp(NOW - 60),
         "removeReason": "The executor with id 2 exited with exit code 143"},
        {"id": "3", "isActive": False, "removeTime": _stamp(NOW - 30),
         "removeReason": "Executor decommission."},
        {"id": "4", "isActive": True},
    ]  # fmt: skip
    assert failures.failed_executors(executors, NOW, None) == 2
    assert failures.failed_executors(executors, NOW, 3600.0) == 1
    settings_ = failures.budget_settings(V4, _env(**{"spark.executor.maxNumFailures": "2"}))
    budget = failures.failure_budget(settings_, 2)
    assert (budget.max_failures, budget.failures, budget.remaining) == (2, 2, 0)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=30),
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(st.text(max_size=10), inner,
                                                                 max_size=5),
    max_leaves=20,
)  # fmt: skip
property_names = st.sampled_from([
    failures.MAX_FAILURES, failures.VALIDITY_INTERVAL, "spark.executor.instances",
    "spark.dynamicAllocation.enabled", "spark.dynamicAllocation.maxExecutors",
    "spark.streaming.dynamicAllocation.enabled", "spark.app.name",
])  # fmt: skip
property_values = st.one_of(
    st.integers(-(2**40), 2**40).map(str),
    st.sampled_from(["true", "false", "1h", "500", "x"]),
    st.text(max_size=12),
)
executor_entries = st.fixed_dictionaries(
    {"id": st.one_of(st.just("driver"), st.integers(0, 50).map(str))},
    optional={
        "isActive": st.one_of(st.booleans(), json_values),
        "removeTime": st.one_of(st.floats(NOW - 10**6, NOW).map(_stamp), st.text(max_size=20)),
        "removeReason": st.one_of(st.text(max_size=30), st.just("decommissioned"), json_values),
    },
)


@settings(max_examples=300)
@given(
    version=st.one_of(st.fixed_dictionaries({"spark": st.text(max_size=12)}),
                      st.sampled_from(["3.4.1", "3.5.0", "4.2.0", "4.0.0-preview2"])
                      .map(lambda v: {"spark": v}), json_values),
    environment=st.one_of(
        st.lists(st.tuples(property_names, property_values).map(list), max_size=6)
        .map(lambda pairs: {"sparkProperties": pairs}),
        json_values,
    ),
    executors=st.one_of(st.lists(executor_entries, max_size=8), json_values),
)  # fmt: skip
def test_any_driver_answer_gives_a_consistent_budget_or_a_refusal(
    version: Any, environment: Any, executors: Any
) -> None:
    try:
        settings_ = failures.budget_settings(failures.spark_version(version), environment)
        validity = settings_.validity_seconds
        failed = failures.failed_executors(executors, NOW, validity)
    except AnswerError as exc:
        assert "\n" not in str(exc)
        return
    assert 0 <= failed <= len(executors)
    budget = failures.failure_budget(settings_, failed)
    if budget.max_failures is not None and budget.max_failures < failures.INT_MAX:
        assert budget.remaining == budget.max_failures - failed
    else:
        assert budget.remaining is None
    document = status.StatusDocument(
        verdict="healthy",
        spark=status.SparkStatus(driver_ui="http://d:4040", failure_budget=budget),
    )
    assert status.decode(status.encode(document)).spark == document.spark
