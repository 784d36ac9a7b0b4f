"""What the socket view concludes (`sockets.judge`), on constructed evidence.

Covered: an unanswered request on a live connection past the threshold -> producer_hung
naming the connection and broker when the cluster is healthy and it has waited longer
than the producers' request timeout, broker_degraded naming the broker while it is
within that timeout (a broker may hold a write that long; the rule for any wait and
timeout is a property), broker_degraded (never a producer fault) when brokers fail;
blackholed connections and unanswered connects -> broker_degraded naming the broker,
grouped per broker; silence (every connection idle past the threshold) -> producer_hung
only when Spark says a task of this executor runs (`spark_task_running=True`), never
when no task runs or Spark's view is unknown, never while the cluster is unhealthy,
never with a request outstanding; with a declared write interval (a policy's
`expectedWriteIntervalSeconds`), silence past it is producer_silent with Spark's view
unknown or saying a task runs, never while Spark says no task runs (a property over
silence, interval, stall, Spark's answer, the cluster's health and a request
outstanding); an unavailable view yields nothing; failed connects
corroborate refusing entries only; long lists of connections are capped in reasons.
"""

from __future__ import annotations

from dataclasses import replace
from functools import partial

from hypothesis import given
from hypothesis import strategies as st

from hangwatch.contracts import Verdict as V
from hangwatch_sidecar.sockets.judge import (
    MAX_NAMED,
    TIMEOUT_MARGIN_SECONDS,
    failed_connects_reason,
)
from hangwatch_sidecar.sockets.judge import judge_sockets as judge_with_timeout
from hangwatch_sidecar.sockets.types import ConnectionEvidence, Pattern, TcpState
from tests.sidecar.builders import connection, socket_view

C = connection(quiet_seconds=40.0, last_received_seconds=40.0)
view = socket_view
REQUEST_TIMEOUT_SECONDS = 30.0
judge_sockets = partial(judge_with_timeout, request_timeout_seconds=REQUEST_TIMEOUT_SECONDS)


def unanswered(waiting: float = 45.0, **kw: object) -> ConnectionEvidence:
    return replace(C, pattern=Pattern.UNANSWERED, waiting_seconds=waiting, **kw)  # type: ignore[arg-type]


def test_unanswered_request_with_healthy_cluster_is_producer_hung_naming_it() -> None:
    (finding,) = judge_sockets(view(unanswered()), stall_seconds=30, cluster_healthy=True)
    assert finding.verdict is V.PRODUCER_HUNG
    assert C.connection in finding.reason and "broker 10.0.0.1:9092" in finding.reason
    assert "45 s" in finding.reason and finding.brokers == ("10.0.0.1:9092",)
    assert "past the producers' request timeout (30 s + 5 s)" in finding.reason


def test_unanswered_request_within_the_producers_request_timeout_is_the_brokers() -> None:
    (finding,) = judge_sockets(view(unanswered(12.0)), stall_seconds=5, cluster_healthy=True)
    assert finding.verdict is V.BROKER_DEGRADED and finding.brokers == ("10.0.0.1:9092",)
    assert "within the producers' request timeout (30 s)" in finding.reason
    assert C.connection in finding.reason and "12 s" in finding.reason


@given(
    waiting=st.floats(0.0, 1e6, allow_nan=False),
    timeout=st.floats(0.1, 1e5, allow_nan=False),
    healthy=st.booleans(),
    own_broker_failing=st.booleans(),
)
def test_only_a_wait_past_the_request_timeout_on_a_healthy_cluster_is_producer_hung(
    waiting: float, timeout: float, healthy: bool, own_broker_failing: bool
) -> None:
    failing = frozenset({"10.0.0.1:9092"}) if own_broker_failing else frozenset()
    (finding,) = judge_with_timeout(
        view(unanswered(waiting)),
        stall_seconds=5,
        cluster_healthy=healthy,
        request_timeout_seconds=timeout,
        failing_brokers=failing,
    )
    hung = healthy and not own_broker_failing and waiting > timeout + TIMEOUT_MARGIN_SECONDS
    assert finding.verdict is (V.PRODUCER_HUNG if hung else V.BROKER_DEGRADED)
    assert finding.brokers == ("10.0.0.1:9092",)


def test_unanswered_request_while_brokers_fail_is_not_a_producer_fault() -> None:
    (finding,) = judge_sockets(view(unanswered()), stall_seconds=30, cluster_healthy=False)
    assert finding.verdict is V.BROKER_DEGRADED
    assert "not judged a producer fault" in finding.reason


def test_blackholed_connections_are_broker_degraded_per_broker() -> None:
    black = replace(C, pattern=Pattern.BLACKHOLED, unacked=2, retransmits=4, waiting_seconds=3.0)
    syn = replace(
        C,
        connection="10.0.0.9:40001->10.0.0.2:9092",
        broker="10.0.0.2:9092",
        pattern=Pattern.CONNECT_UNANSWERED,
        state=TcpState.SYN_SENT,
    )
    findings = judge_sockets(view(black, syn), stall_seconds=30, cluster_healthy=False)
    assert [f.verdict for f in findings] == [V.BROKER_DEGRADED, V.BROKER_DEGRADED]
    assert [f.brokers for f in findings] == [("10.0.0.1:9092",), ("10.0.0.2:9092",)]
    assert "4 retransmissions" in findings[0].reason
    assert "connects unanswered past a second" in findings[1].reason


def test_silence_is_producer_silent_only_while_spark_runs_a_task() -> None:
    quiet = view(C, replace(C, connection="b", quiet_seconds=35.0))
    for running in (None, False):
        assert (
            judge_sockets(quiet, stall_seconds=30, cluster_healthy=True, spark_task_running=running)
            == ()
        )
    (finding,) = judge_sockets(
        quiet, stall_seconds=30, cluster_healthy=True, spark_task_running=True
    )
    assert finding.verdict is V.PRODUCER_SILENT
    assert "silent for 35 s" in finding.reason and "Spark runs a task" in finding.reason


def test_silence_needs_the_threshold_every_connection_idle_and_a_healthy_cluster() -> None:
    short = view(replace(C, quiet_seconds=10.0))
    busy = view(C, replace(C, connection="b", pattern=Pattern.AWAITING, waiting_seconds=1.0))
    for v, healthy in ((short, True), (busy, True), (view(C), False), (view(), True)):
        assert (
            judge_sockets(v, stall_seconds=30, cluster_healthy=healthy, spark_task_running=True)
            == ()
        )


def test_silence_past_a_declared_write_interval_is_producer_silent_without_spark() -> None:
    quiet = view(replace(C, quiet_seconds=12.0), replace(C, connection="b", quiet_seconds=11.0))
    (finding,) = judge_sockets(
        quiet, stall_seconds=30, cluster_healthy=True, write_interval_seconds=10.0
    )
    assert finding.verdict is V.PRODUCER_SILENT
    assert "silent for 11 s" in finding.reason
    assert "longer than the expected write interval (10 s" in finding.reason
    assert set(finding.connections) == {C.connection, "b"}
    # an executor between tasks writes nothing: Spark's view saying so wins
    assert (
        judge_sockets(
            quiet,
            stall_seconds=30,
            cluster_healthy=True,
            spark_task_running=False,
            write_interval_seconds=10.0,
        )
        == ()
    )


@given(
    silent=st.floats(0.0, 1e6, allow_nan=False),
    interval=st.none() | st.floats(0.1, 1e5, allow_nan=False),
    stall=st.floats(0.1, 1e5, allow_nan=False),
    running=st.sampled_from([True, False, None]),
    healthy=st.booleans(),
    outstanding=st.booleans(),
)
def test_silence_is_judged_only_past_the_stall_with_a_task_or_past_the_declared_interval(
    silent: float,
    interval: float | None,
    stall: float,
    running: bool | None,
    healthy: bool,
    outstanding: bool,
) -> None:
    quiet = replace(C, quiet_seconds=silent)
    other = (
        replace(C, connection="b", pattern=Pattern.AWAITING, waiting_seconds=0.5)
        if outstanding
        else replace(C, connection="b", quiet_seconds=silent + 1.0)
    )
    found = judge_sockets(
        view(quiet, other),
        stall_seconds=stall,
        cluster_healthy=healthy,
        spark_task_running=running,
        write_interval_seconds=interval,
    )
    silent_found = [f for f in found if f.verdict is V.PRODUCER_SILENT]
    task_says = running is True and silent >= stall
    interval_says = interval is not None and running is not False and silent >= interval
    expected = healthy and not outstanding and (task_says or interval_says)
    assert len(silent_found) == (1 if expected else 0)
    assert all(f.verdict is not V.PRODUCER_HUNG for f in found)  # silence never restarts


def test_nothing_from_an_unavailable_or_missing_view() -> None:
    broken = view(unanswered(), error="sock_diag netlink unavailable: Permission denied")
    assert judge_sockets(broken, stall_seconds=30, cluster_healthy=True) == ()
    assert judge_sockets(None, stall_seconds=30, cluster_healthy=True) == ()


def test_failed_connects_only_corroborate_refusing_entries() -> None:
    v = view(failed_connects=12, failed_connects_seconds=5.0)
    assert failed_connects_reason(v, []) is None
    assert failed_connects_reason(view(failed_connects=0), ["10.0.0.7:9092"]) is None
    text = failed_connects_reason(v, ["10.0.0.7:9092"])
    assert text is not None and "12 connects" in text and "10.0.0.7:9092" in text


def test_reasons_name_a_bounded_number_of_connections() -> None:
    many = [unanswered(connection=f"10.0.0.9:{40000 + i}->10.0.0.1:9092") for i in range(50)]
    (finding,) = judge_sockets(view(*many), stall_seconds=30, cluster_healthy=True)
    assert f"and {50 - MAX_NAMED} more" in finding.reason
    assert len(finding.reason) < 600
