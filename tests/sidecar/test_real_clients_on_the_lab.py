"""Real clients nobody on this project wrote, next to a real sidecar with EMPTY telemetry.

Each test runs the lab, one client (sarama 1.22.1 and segmentio kafka-go 0.2.1 from
Debian built from testing/clients, kcat, a plain confluent-kafka producer) and a real
`hangwatch sidecar` process whose telemetry directory stays empty: the verdict comes
from the sidecar's probes and the socket view of the pod's own connections. Sidecar
timing: 1 s probes, 5 s stall, 1 s timeouts, hysteresis 2. Covered:

- S2's pattern for every client: a Produce request the broker never answers
  (stall-produce) -> first broker_degraded naming the connection and broker (a broker
  may hold a write until the request's timeout, 30 s by default); the librdkafka clients
  (kcat, confluent-kafka) keep waiting on the wedged connection (their own limit is
  socket.timeout.ms, 60 s) -> producer_hung once the wait passes that request timeout;
  sarama 1.22.1 (Net.ReadTimeout 30 s) and kafka-go 0.2.1 (10 s) drop the connection by
  themselves -> healthy again, never producer_hung;
- S0 all brokers blackholed (sarama) -> cluster_unreachable; S3 the leader blackholed
  (kafka-go) -> broker_degraded naming that broker; every broker down (kcat) ->
  cluster_unreachable; one broker down (confluent-kafka) -> broker_degraded naming it;
- controls, never producer_hung: a 2 s election (sarama, confluent-kafka); an idle
  producer between bursts (kafka-go); a consumer group in the same pod next to a
  producer (kcat consumer + confluent-kafka);
- S4's pattern with a plain confluent-kafka producer whose delivery callback blocks
  forever: the socket view sees silence; with Spark's view saying a task of the
  executor runs (a view constructed here; the real one is read from a real driver in
  test_spark_view_on_a_real_driver.py) and the Python stack view reading the client's
  process with the real py-spy -> producer_hung naming the callback and the silence;
  the same silence without the stack view -> producer_silent only (alert, never a
  restart verdict); with no Spark view -> never flagged.

Timing-sensitive: they share the `lab-timing` xdist group (one worker runs them in turn).
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from hangwatch.contracts import Verdict
from hangwatch_lab import Lab
from hangwatch_sidecar.pystacks.reader import StackReader
from hangwatch_sidecar.pystacks.watch import StackWatch
from hangwatch_sidecar.sockets.owners import ProcessRoot
from hangwatch_sidecar.spark.types import ExecutorCounts, ReadStats, SparkView
from hangwatch_testing.clients.build import built
from hangwatch_testing.clients.runs import TOPIC, on_each_broker, on_the_leader, run
from hangwatch_testing.clients.workloads import CLIENTS, PROGRAMS, Rhythm, Workload
from tests.sidecar.lab_loop import fast_loop

pytestmark = pytest.mark.xdist_group("lab-timing")

CLUSTER_FAULT_WATCH_SECONDS = 15
"""Liveness window for a cluster fault's verdict (two 1 s rounds + the 1 s connect timeout
unloaded, about 3 s: `benchmarks/real_clients.py` measures it); not a timing bound."""


@pytest.fixture(scope="module", autouse=True)
def go_clients(pytestconfig: pytest.Config) -> None:
    """Builds the Go producers into the cache when missing (a fresh CI machine), with the
    build's progress on the terminal: a first build takes about half a minute."""
    capture = pytestconfig.pluginmanager.getplugin("capturemanager")
    with capture.global_and_fixture_disabled():
        for program in PROGRAMS.values():
            built(program)


GIVES_UP_BY_ITSELF = {"sarama": 30.0, "kafka-go": 10.0}
"""Clients that drop a connection whose request goes unanswered, after these seconds
(sarama's Net.ReadTimeout, kafka-go 0.2.1's read deadline): measured to return to
healthy at 31.6 s and 11.4 s. The librdkafka clients wait up to socket.timeout.ms (60 s)."""

UNANSWERED_WATCH_SECONDS = 60
"""Liveness window for a librdkafka client's producer_hung (30 s request timeout + 5 s
margin + rounds: 36-45 s measured); not a timing bound."""

GIVES_UP_WATCH_SECONDS = 45
"""Long enough to see a hung verdict if one came: 35 s + two 1 s rounds + the client's
own wait before its first request stalled."""


@pytest.mark.parametrize("client", CLIENTS)
def test_unanswered_produce_is_the_brokers_then_hung_only_past_the_request_timeout(
    client: str,
) -> None:
    gives_up = client in GIVES_UP_BY_ITSELF
    result = run(
        client,
        "stall-produce",
        on_each_broker(Lab.stall_produce),
        expect=None if gives_up else "producer_hung",
        seconds=GIVES_UP_WATCH_SECONDS if gives_up else UNANSWERED_WATCH_SECONDS,
    )
    first_time, first, first_reasons = result.changes[0]
    assert first == "broker_degraded", result.describe()
    reasons = " ".join(first_reasons)
    assert "a request unanswered for" in reasons and "connection 127.0.0.1:" in reasons
    assert "within the producers' request timeout (30 s)" in reasons, reasons
    assert result.verdicts <= {"healthy", "broker_degraded", "producer_hung"}, result.describe()
    if gives_up:
        # the client dropped the wedged connection itself: healthy again, never hung
        assert "producer_hung" not in result.verdicts, result.describe()
        assert any(v == "healthy" and t > first_time for t, v, _ in result.changes), (
            result.describe()
        )
        return
    assert result.detected_seconds is not None, result.describe()
    hung = " ".join(result.changes[-1][2])
    assert "past the producers' request timeout (30 s + 5 s)" in hung, hung
    assert "to broker 127.0.0.1:" in hung
    if result.client_error_seconds is not None:
        assert result.detected_seconds < result.client_error_seconds, result.describe()


@pytest.mark.parametrize(
    ("client", "fault", "kernel"),
    [("sarama", Lab.blackhole, True), ("kcat", Lab.down, False)],
    ids=["s0-all-blackholed-sarama", "all-down-kcat"],
)
def test_every_broker_cut_off_is_cluster_unreachable(
    client: str, fault: Callable[[Lab, int], None], kernel: bool, request: pytest.FixtureRequest
) -> None:
    if kernel:
        request.getfixturevalue("kernel_faults")
    result = run(
        client,
        f"{fault.__name__}-all",
        on_each_broker(fault),
        expect="cluster_unreachable",
        seconds=CLUSTER_FAULT_WATCH_SECONDS,
    )
    assert result.detected_seconds is not None, result.describe()
    assert "producer_hung" not in result.verdicts


def test_s3_blackholed_leader_is_broker_degraded_naming_it_kafka_go(kernel_faults: None) -> None:
    named: list[str] = []
    result = run(
        "kafka-go",
        "blackhole-leader",
        on_the_leader(Lab.blackhole, named),
        expect="broker_degraded",
        seconds=CLUSTER_FAULT_WATCH_SECONDS,
    )
    assert result.detected_seconds is not None, result.describe()
    reasons = " ".join(result.changes[-1][2])
    assert f"broker {named[0]}" in reasons and "timeout" in reasons, reasons
    assert "producer_hung" not in result.verdicts


def test_one_broker_down_is_broker_degraded_naming_it_confluent() -> None:
    named: list[str] = []
    result = run(
        "confluent-kafka",
        "down-leader",
        on_the_leader(Lab.down, named),
        expect="broker_degraded",
        seconds=CLUSTER_FAULT_WATCH_SECONDS,
    )
    assert result.detected_seconds is not None, result.describe()
    assert named[0] in " ".join(result.changes[-1][2])
    assert "producer_hung" not in result.verdicts


@pytest.mark.parametrize("client", ["sarama", "confluent-kafka"])
def test_control_a_two_second_election_is_never_producer_hung(client: str) -> None:
    result = run(
        client, "election-2s", lambda lab: lab.election(TOPIC, 2.0), expect=None, seconds=20
    )
    assert "producer_hung" not in result.verdicts, result.describe()
    assert result.final["verdict"] == "healthy", result.describe()


def test_control_an_idle_producer_between_bursts_is_never_producer_hung() -> None:
    rhythm = Rhythm(rate=20.0, burst_seconds=2.0, idle_seconds=12.0)
    result = run("kafka-go", "idle", lambda lab: None, expect=None, seconds=30, rhythm=rhythm)
    assert result.verdicts == {"healthy"}, result.describe()
    assert (result.final["sockets"] or {})["connections_total"] > 0


def test_control_a_consumer_group_in_the_same_pod_is_never_producer_hung() -> None:
    consumer = "kcat -C -q -b {bootstrap} -G hangwatch-control-group " + TOPIC
    result = run(
        "confluent-kafka",
        "consumer-alongside",
        lambda lab: None,
        expect=None,
        seconds=30,
        extra_clients=(consumer,),
    )
    assert result.verdicts == {"healthy"}, result.describe()


class _TaskRunning:
    """Spark's view of the executor, constructed for this test: one of its tasks runs and
    the JVM holds no Kafka thread (a Python producer). The real view is read from a real
    driver in test_spark_view_on_a_real_driver.py."""

    stats = ReadStats()
    budget = None  # no failure budget read
    classpath: tuple[str, ...] = ()  # no classpath read from a driver

    def poll(self) -> SparkView:
        counts = ExecutorCounts(active_tasks=1, failed_tasks=0, completed_tasks=0)
        return SparkView(at=time.monotonic(), available=True, thread_dump=False, counts=counts)

    def close(self) -> None:
        pass


def test_s4_blocked_callback_is_hung_on_evidence_and_silence_alone_only_alerts() -> None:
    with Lab(brokers=3, topics={TOPIC: 3}) as lab, tempfile.TemporaryDirectory() as tmp:
        telemetry, wedge = Path(tmp) / "telemetry", Path(tmp) / "wedge"
        telemetry.mkdir()
        workload = Workload("confluent-kafka", lab.bootstrap, TOPIC, wedge=wedge)
        unknown, running, silent = (fast_loop(lab.bootstrap, TOPIC, telemetry) for _ in range(3))
        for loop in (running, silent):
            loop.spark = _TaskRunning()  # type: ignore[assignment]
        reader = StackReader(
            ProcessRoot(pid=workload.proc.pid), running._stack_pool, 10.0, time.monotonic
        )
        running.stacks = StackWatch(reader, running.settings.stall_seconds)
        loops = (running, silent, unknown)
        try:
            deadline = time.monotonic() + 30
            while any(loop.state().verdict is not Verdict.HEALTHY for loop in loops):
                for loop in loops:
                    loop.round()
                assert time.monotonic() < deadline, running.state().assessment
                time.sleep(0.5)
            wedge.touch()  # the next delivery callback blocks the producer's poll thread
            wedged_at = time.monotonic()
            seen: dict[str, set[Verdict]] = {"running": set(), "silent": set(), "unknown": set()}
            wanted = {"running": Verdict.PRODUCER_HUNG, "silent": Verdict.PRODUCER_SILENT}
            while time.monotonic() - wedged_at < 40 and any(
                verdict not in seen[name] for name, verdict in wanted.items()
            ):
                for name, loop in zip(seen, loops, strict=True):
                    seen[name].add(loop.round().verdict)
                time.sleep(0.5)
            assert Verdict.PRODUCER_HUNG in seen["running"], running.state().assessment
            reasons = " ".join(running.state().assessment.pod.reasons)  # type: ignore[union-attr]
            assert "python stacks:" in reasons, reasons
            assert "that the Kafka client called from Producer_" in reasons, reasons
            assert "silent for" in reasons
            assert Verdict.PRODUCER_SILENT in seen["silent"], silent.state().assessment
            assert Verdict.PRODUCER_HUNG not in seen["silent"]
            assert seen["unknown"] == {Verdict.HEALTHY}
        finally:
            for loop in loops:
                loop.close()
            workload.stop()
