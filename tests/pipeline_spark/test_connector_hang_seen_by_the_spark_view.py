"""A hang of the connector's JVM producer as the sidecar's Spark view sees it (engine: kafka).

Engine: the lab's real Apache Kafka engine (the connector's Java client cannot use the
mock, see test_connector_sink). One `local-cluster[1,2,1024]` application (the
executor a separate JVM) loads the connector's cached jars; `--sink connector` writes
at a steady pace with acks=all. Covers: healthy, the view shows the producer's
`kafka-producer-network-thread` and no stalled task thread; with one broker
blackholed (its leadership kept, every packet dropped) the real thread dump read
through the driver shows a task thread of the connector held in `flush` or waiting for
buffer memory past the stall threshold, and the Spark judge reports it as
corroborating evidence naming the task and its thread, never a verdict on its own
(the verdict needs the socket view, not part of this test); once the blackhole is
lifted the run finishes and `verify` finds every event (duplicates allowed).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from hangwatch_lab import Lab
from hangwatch_pipeline import spark_kafka
from hangwatch_pipeline.job import run_pipeline
from hangwatch_pipeline.run_options import SINK_CONNECTOR, RunOptions, new_run_id
from hangwatch_pipeline.run_report import Summary
from hangwatch_pipeline.verify import verify
from hangwatch_sidecar.spark.client import DriverClient, DriverReader
from hangwatch_sidecar.spark.judge import judge_spark
from hangwatch_sidecar.spark.tracking import SparkTracker
from hangwatch_sidecar.spark.types import Activity, SparkView, ThreadRole
from hangwatch_testing.spark_driver import Driver, local_cluster_driver
from hangwatch_testing.waiting import wait_for

STALL = 10.0
EVENTS = 300_000


@pytest.fixture(scope="module")
def lab() -> Iterator[Lab]:
    with Lab(brokers=3, topics={"hang": 3}, engine="kafka") as running:
        yield running


@pytest.fixture(scope="module")
def driver(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Driver]:
    work = tmp_path_factory.mktemp("connector-hang")
    with local_cluster_driver(work, "hangwatch-connector-hang", spark_kafka.jars()) as live:
        yield live


def _stalled(view: SparkView) -> list[str]:
    return [
        o.thread.name
        for o in view.threads
        if o.thread.role is ThreadRole.TASK
        and o.thread.activity in {Activity.FLUSHING, Activity.AWAITING_BUFFER}
        and o.held_seconds >= STALL
    ]


@pytest.mark.timeout(600)  # its own bounds (120 + 90 + 300 + 60 s) say when it failed
def test_a_blackholed_broker_holds_a_connector_task_in_the_producer_and_the_view_says_so(
    lab: Lab, driver: Driver, tmp_path: Path
) -> None:
    options = RunOptions(
        bootstrap=lab.bootstrap, topic="hang", events=EVENTS, run_id=new_run_id(),
        sink=SINK_CONNECTOR, sink_options={"kafka.acks": "all"}, partitions=2,
        rate_per_second=20_000.0,
    )  # fmt: skip
    done: list[Summary] = []
    run = threading.Thread(target=lambda: done.append(run_pipeline(driver.spark, options)))
    run.start()
    reader = DriverReader(DriverClient(driver.ui, 60.0), driver.application_id, driver.executor_id)
    tracker = SparkTracker(STALL, driver.executor_id)

    def observe() -> SparkView:
        return tracker.observe(reader.read())

    def producing() -> SparkView | None:
        view = observe()
        network = any(o.thread.role is ThreadRole.NETWORK for o in view.threads)
        return view if network and view.tasks else None

    def held_up() -> SparkView | None:
        view = observe()
        return view if _stalled(view) else None

    healthy = wait_for(producing, 120, "the connector's producer running in the tasks")
    assert not _stalled(healthy)
    try:
        lab.blackhole(1)
        held = wait_for(held_up, 90, "a task thread held in the producer past the stall")
        findings = judge_spark(held, stall_seconds=STALL, heartbeat_seconds=5.0,
                               cluster_healthy=True)  # fmt: skip
        stalled = _stalled(held)
        named = [f for f in findings if any(name in f.reason for name in stalled)]
        assert named, [f.reason for f in findings]
        assert all(f.verdict is None for f in named)  # corroborating only
    finally:
        lab.restore()
    run.join(300)
    assert done and done[0].ok, done[0].render() if done else "the run did not end"
    result = verify(lab.bootstrap, "hang", EVENTS, options.run_id, timeout_seconds=60)
    assert result.missing == 0
