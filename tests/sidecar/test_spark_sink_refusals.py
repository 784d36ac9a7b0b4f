"""Spark's own Kafka sink refused by the cluster is never called a restart-class verdict.

On the lab's real Apache Kafka (`hangwatch_testing.clients.refusals`, the same lab and
refusals as tests/sidecar/test_refused_writes_are_not_restarted.py), a real Spark job
(`hangwatch_testing.clients.spark_producer`: `local-cluster`, one executor JVM) writes a
DataFrame with `df.write.format("kafka")` (spark-sql-kafka-0-10, the Java client) again
and again, Spark retrying each failed task; a real `hangwatch sidecar` process watches
that executor as the webhook would set it up (Spark's view through the driver's REST
API: the executor's thread dump and failed task attempts; its socket view narrowed to
the executor JVM; probing the topic), stall 5 s, until 20 s past the first failed task
attempt:

- message too large (`max.message.bytes` 200, 1 KiB records): RecordTooLargeException;
- topic authorization failed (a SASL user with no ACL on the topic):
  TopicAuthorizationException;
- SASL login failed (a wrong password): SaslAuthenticationException;
- unknown topic with automatic creation off: the Java client waits max.block.ms (60 s)
  for the topic's metadata, then the send fails with a TimeoutException ("... not present
  in metadata");

each: the sink met the refusal (the failed attempts' exceptions say so, as the driver
reports them), the sidecar never said `producer_hung` or `metadata_stale` (pod or
producer verdict), whose policy default is a restart, and it said `writes_rejected`
naming the exception (for the unknown topic: UNKNOWN_TOPIC, from its own metadata). A
`producer_byte_rate` quota that throttles the sink's producer (the executor's Java
client logs each throttle time the broker gives it): it kept delivering after the first
throttle, no task failed, and the sidecar said only `healthy` (after its first round's
`unknown`).

Issue 43's ISR case on the same lab (`hangwatch_testing.clients.unwritable`): topic `isr`
(three replicas, `min.insync.replicas` 3), the sink writing with the Java client's
default acks (all) and a 20 s `delivery.timeout.ms`, broker 3 stopped for 30 s and
started again; one Spark run with hangwatch's reporter in the sink's Java client,
watched by two sidecars at once (one reading the reporter's telemetry, one with none:
what a sidecar knows of a sink without the jar). Both say `healthy` (after a first
`unknown`) with every broker up, `partitions_unwritable` naming the ISR against
min.insync.replicas and broker 3 while it is down, never `producer_hung` or
`metadata_stale`, and the sink delivers again once the broker is back. In `make test`.

With hangwatch's telemetry in the sink's Java client (`hangwatch_pipeline.kafka_telemetry`,
kind `spark-telemetry`): the record too large is `writes_rejected` naming
MESSAGE_TOO_LARGE, from the client's batch splits or its failures, no later than 5 s after
the first failed task attempt (whatever that attempt's exception: a batch expiry names no
cause), and never a restart verdict; the throttled sink is `healthy` (the client's
throttle times are in its telemetry).

In `make test`: the failed login and the unknown topic (each Spark run costs 2-3 min;
the failed login's fresh producer once waited 6 s for its first metadata at load 25 and
was `metadata_stale`, before `spark.judge.had_a_view`). The other three run in the
false-restart benchmark (`benchmarks/false_restarts.py --refusal-producers spark`,
docs/performance.md), because what they show depends on load or is an open finding
(docs/sidecar.md "Which refusals are restarted, and why"): the record too large is named
only once an attempt fails with RecordTooLargeException (in one of three runs the first
two attempts both failed with a batch expiry, "Expiring 15 record(s)", and the sidecar
said only `healthy`, never a restart verdict); the forbidden topic's fresh producer waited
for its first metadata longer than the 5 s stall threshold in one of two runs at load
average 25-30 and was `metadata_stale` until the attempt failed (no more: a metadata wait
before the executor's first finished task only corroborates); a `producer_byte_rate`
quota is `producer_silent` (a task thread in `flush` while every connection of the
executor is silent and the producer's I/O thread loops, waiting out a throttle of up to
10 s: the Java client's throttle times stay in the JVM, where no sidecar view reads them;
it was `producer_hung` before `spark.judge.io_thread_in_its_loop`); both are
`make test`'s with hangwatch's telemetry in the sink (above). The unknown topic
was `metadata_stale` 4.6 s into each attempt until the Spark view's metadata wait
consulted the cluster's metadata; it is `writes_rejected` naming UNKNOWN_TOPIC_OR_PART
now.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from hangwatch_lab import Lab
from hangwatch_testing.clients.refusals import (
    REFUSALS,
    RESTART_CLASS,
    SPARK,
    SPARK_TELEMETRY,
    check_throttled_and_healthy,
    refusals_lab,
    watch_refusal,
)
from hangwatch_testing.clients.unwritable import NAMED, said, watch_unwritable

REFUSED = ("login-failed", "unknown-topic")
"""The cases `make test` runs (see the module's docstring)."""


@pytest.fixture(scope="module")
def lab() -> Iterator[Lab]:
    with refusals_lab() as running:
        yield running


@pytest.mark.timeout(600)
@pytest.mark.parametrize("refusal", REFUSED)
def test_a_refused_spark_sink_is_writes_rejected_never_restarted(lab: Lab, refusal: str) -> None:
    case = REFUSALS[refusal]
    seen = watch_refusal(lab, case, SPARK)
    print(seen.describe())  # what the sidecar said, for the record (pytest -s)
    assert seen.first_error_seconds is not None, f"the sink met no refusal: {seen.describe()}"
    assert any(case.java in error for error in seen.errors), seen.describe()
    assert not seen.verdicts & RESTART_CLASS, seen.describe()
    assert "writes_rejected" in seen.verdicts, seen.describe()
    assert case.spark_named in seen.sidecar_text(), seen.describe()


@pytest.mark.timeout(600)
def test_with_hangwatchs_telemetry_a_record_too_large_is_named_before_any_attempt_fails(
    lab: Lab,
) -> None:
    seen = watch_refusal(lab, REFUSALS["too-large"], SPARK_TELEMETRY)
    print(seen.describe())
    assert seen.first_error_seconds is not None, f"the sink met no refusal: {seen.describe()}"
    assert not seen.verdicts & RESTART_CLASS, seen.describe()
    named = [
        t
        for t, verdict, reasons in seen.changes
        if verdict == "writes_rejected" and any("MESSAGE_TOO_LARGE" in r for r in reasons)
    ]
    assert named, seen.describe()
    # the telemetry names it from the broker's answers, not from a failed task attempt
    assert named[0] <= seen.first_error_seconds + 5.0, seen.describe()


@pytest.mark.timeout(600)
def test_with_hangwatchs_telemetry_a_throttled_sink_stays_healthy(lab: Lab) -> None:
    seen = watch_refusal(lab, REFUSALS["quota"], SPARK_TELEMETRY)
    print(seen.describe())
    check_throttled_and_healthy(seen)


@pytest.mark.timeout(600)
def test_the_isr_case_is_the_clusters_refusal_with_and_without_the_telemetry_jar(
    lab: Lab,
) -> None:
    """Issue 43's ISR case (`hangwatch_testing.clients.unwritable`): one Spark sink with
    hangwatch's reporter in its Java client, watched by a sidecar reading the reporter's
    telemetry and one without it (what a sidecar knows of a sink without the jar)."""
    watched = watch_unwritable(lab, SPARK_TELEMETRY)
    print(watched.describe())
    for view in (SPARK_TELEMETRY, SPARK):
        seen = watched.seen[view]
        assert seen.verdicts("control") <= {"unknown", "healthy"}, (view, watched.describe())
        assert "partitions_unwritable" in seen.verdicts("fault"), (view, watched.describe())
        assert said(seen, NAMED), (view, watched.describe())
        for phase in ("control", "fault", "back"):
            assert not seen.verdicts(phase) & RESTART_CLASS, (view, phase, watched.describe())
    assert watched.delivered["back"] > watched.delivered["fault"], watched.describe()
