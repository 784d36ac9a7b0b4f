"""Spark's view of an executor, read from a real Spark driver's REST API.

One `local-cluster[1,2,1024]` application for the module (a standalone worker whose
executor is a separate JVM, as on Kubernetes), its UI on a free port, its JVMs with the
suite's short-run options. Covers:
- a PySpark stage where one task sleeps while its seven peers finish: the reader sees
  the task running on executor 0 by its TID and stage from the real thread dump, reads
  the stage's counts and its finished tasks' median from the real driver, and the
  tracker calls it a straggler once past the stall threshold - corroborating evidence
  only, no verdict; the cost of a read (requests, bytes, milliseconds) is measured;
- an executor JVM running the REAL Java Kafka client Spark's sink pins (kafka-clients
  3.9.2, resolved by hangwatch_testing.clients.build) against a 3-broker Apache Kafka lab (the
  `kafka` engine), put by testing/clients/spark-producer-states into its states: the
  real dump shows the I/O thread `kafka-producer-network-thread | s4-callback` inside
  its delivery callback waiting for itself (on its latch: 4.x names it in `lockName`,
  3.5 only in `blockedByLock`), tasks waiting for buffer memory, in flush and for
  metadata, and the classifier says so;
- a real `hangwatch sidecar` process next to that executor, probing the same healthy
  cluster with no telemetry at all: `producer_hung` naming the I/O thread, with the
  Spark metrics;
- the application's kafka-clients release read from the driver's `/environment`
  classpath (known-bad releases).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from hangwatch_demo.spark_cluster import executors_of
from hangwatch_lab import Lab
from hangwatch_pipeline.run_options import SHORT_RUN_JVM_OPTIONS
from hangwatch_sidecar.releases.read import java_classpath
from hangwatch_sidecar.spark.client import DriverClient, DriverReader
from hangwatch_sidecar.spark.judge import judge_spark
from hangwatch_sidecar.spark.tracking import SparkTracker
from hangwatch_sidecar.spark.types import Activity, ProducerThread, SparkView, ThreadRole
from hangwatch_sidecar.spark.watch import SparkWatch
from hangwatch_testing.clients.producer_states import SPARK_KAFKA_CLIENTS, states_frame, udf_jars
from hangwatch_testing.spark_driver import Driver, local_cluster_driver
from hangwatch_testing.waiting import wait_for

from .sidecar_process import sidecar_process

STALL = 5.0
TOPIC = "events"


@pytest.fixture(scope="module")
def lab() -> Iterator[Lab]:
    """A healthy 3-broker Apache Kafka cluster for the module's real producers."""
    with Lab(brokers=3, topics={TOPIC: 3}, engine="kafka") as running:
        yield running


@pytest.fixture(scope="module")
def driver(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Driver]:
    work = tmp_path_factory.mktemp("spark-view")
    jars = udf_jars(SPARK_KAFKA_CLIENTS, work)
    with local_cluster_driver(work, "hangwatch-spark-view-test", jars, cores=4) as live:
        yield live


class Background:
    """A Spark action on a thread, in a job group the test cancels when it is done (which
    makes the action raise: expected); an error before that is kept for the failure."""

    def __init__(self, driver: Driver, group: str, run: Callable[[], object]) -> None:
        self.driver, self.group, self.error = driver, group, ""
        self.cancelled = False
        self.thread = threading.Thread(target=self._run, args=(run,), name=group, daemon=True)
        self.thread.start()

    def _run(self, run: Callable[[], object]) -> None:
        self.driver.spark.sparkContext.setJobGroup(self.group, self.group)
        try:
            run()
        except Exception as exc:  # noqa: BLE001 - shown by `failed`, or expected once cancelled
            if not self.cancelled:
                self.error = str(exc)[:2000]

    def failed(self) -> bool:
        return bool(self.error)

    def stop(self) -> None:
        self.cancelled = True
        self.driver.spark.sparkContext.cancelJobGroup(self.group)
        self.thread.join(60)


def _watch(driver: Driver, pool: ThreadPoolExecutor) -> SparkWatch:
    reader = DriverReader(DriverClient(driver.ui, 20.0), driver.application_id, driver.executor_id)
    tracker = SparkTracker(STALL, driver.executor_id)
    return SparkWatch(reader, tracker, pool, 0.5, max_age_seconds=120.0)


def test_the_kafka_clients_release_is_read_from_the_applications_classpath(
    driver: Driver,
) -> None:
    """Known-bad releases (docs/sidecar.md): the driver's `/environment` names the
    kafka-clients jar the application runs, as the sidecar reads it with the failure
    budget's settings (here the release Spark's sink pins, with no published hang)."""
    reader = DriverReader(DriverClient(driver.ui, 20.0), driver.application_id, driver.executor_id)
    reader.read_budget(time.time())
    found = java_classpath(reader.classpath, "spark")
    assert [(s.client, s.version) for s in found] == [("kafka-clients", SPARK_KAFKA_CLIENTS)], (
        reader.classpath[:20]
    )


def test_the_suites_spark_jvms_run_with_the_short_run_options(driver: Driver) -> None:
    """The driver's and the executor's JVM took `SHORT_RUN_JVM_OPTIONS` from the suite's
    SPARK_CONF_DIR (hangwatch_testing.spark_conf) next to the options the application
    sets itself (the executor's heap)."""
    jvm = driver.spark.sparkContext._jvm
    assert jvm is not None
    bean = jvm.java.lang.management.ManagementFactory.getRuntimeMXBean()
    driver_args = list(bean.getInputArguments())
    executors = executors_of(driver.application_id, driver.work_root)
    assert len(executors) == 1, executors
    executor_args = list(executors[0].cmdline)
    for option in SHORT_RUN_JVM_OPTIONS.split():
        assert option in driver_args, driver_args
        assert option in executor_args, executor_args
    assert "-Xmx512M" in executor_args, executor_args


def test_running_task_stage_peers_and_straggler_from_the_real_driver(driver: Driver) -> None:
    def sleeper(index: int) -> int:  # nested: pickled by value for the Python workers
        import time

        time.sleep(90 if index == 0 else 0.2)
        return index

    sc = driver.spark.sparkContext
    job = Background(
        driver, "straggler", lambda: sc.parallelize(range(8), 8).map(sleeper).collect()
    )
    try:
        with ThreadPoolExecutor(2) as pool:
            watch = _watch(driver, pool)

            def straggling() -> SparkView | None:
                view = watch.poll()
                return view if view.available and view.straggler else None

            view = wait_for(
                straggling, 150, "the sleeping task to be a straggler",
                give_up=job.failed, context=lambda: f"job: {job.error}; view: {watch.poll()}",
            )  # fmt: skip
            stats = watch.stats
    finally:
        job.stop()
    straggler = view.straggler
    assert straggler is not None and straggler.task.index == 0 and straggler.task.attempt == 0
    peers = straggler.peers
    assert peers is not None and peers.complete >= 3 and peers.tasks == 8
    assert peers.median_seconds is not None
    assert peers.median_seconds < straggler.running_seconds  # it ran longer than its peers
    assert straggler.running_seconds >= STALL and view.task_running is True
    # the executor's finished tasks as the driver counts them (a metadata wait is judged
    # stale only after one), read every round on each line: 4.2's count had the peers
    # finished here; 3.5's once said 0 with 6 of the stage's tasks finished (cause not
    # found; a low count only delays rule 5c's verdict, never brings one early)
    assert view.completed_tasks is not None
    assert view.threads == ()  # a PySpark task: no Kafka client in the JVM
    findings = judge_spark(view, stall_seconds=STALL, heartbeat_seconds=3.0, cluster_healthy=True)
    assert findings and all(f.verdict is None for f in findings)
    assert "(a straggler)" in findings[0].reason
    assert stats.reads >= 2 and stats.last_requests == 3 and stats.driver_up
    print(  # the cost of one read with peers (pytest -s shows it)
        f"\nREST read: {stats.last_requests} requests, {stats.last_response_bytes} bytes, "
        f"{stats.last_read_seconds * 1000:.0f} ms"
    )


def _states_job(driver: Driver, lab: Lab) -> Background:
    frame = states_frame(driver.spark, lab.bootstrap, TOPIC)
    return Background(driver, "states", frame.collect)


def test_real_kafka_client_threads_in_a_real_executor_dump(driver: Driver, lab: Lab) -> None:
    job = _states_job(driver, lab)
    reader = DriverReader(DriverClient(driver.ui, 20.0), driver.application_id, driver.executor_id)
    wanted = (
        Activity.IN_CALLBACK, Activity.AWAITING_BUFFER, Activity.FLUSHING,
        Activity.AWAITING_METADATA,
    )  # fmt: skip
    try:

        def every_state() -> dict[Activity, ProducerThread] | None:
            snapshot = reader.read()
            found = {t.activity: t for t in snapshot.threads}
            return found if all(a in found for a in wanted) else None

        found = wait_for(
            every_state, 180, "the real producer's states in the dump",
            give_up=job.failed, context=lambda: job.error,
        )  # fmt: skip
    finally:
        job.stop()
    io = found[Activity.IN_CALLBACK]
    assert io.name == "kafka-producer-network-thread | s4-callback"
    assert io.role is ThreadRole.NETWORK and io.state == "WAITING"
    assert io.user_frame is not None and io.user_frame.endswith(".onCompletion")
    assert "waits for itself" in io.detail
    assert io.waits_on is not None and "CountDownLatch" in io.waits_on  # 3.5: blockedByLock
    for activity in wanted[1:]:
        assert found[activity].role is ThreadRole.TASK and found[activity].task_id is not None


def test_real_sidecar_calls_the_hung_jvm_producer_producer_hung(
    driver: Driver, lab: Lab, tmp_path: Path
) -> None:
    job = _states_job(driver, lab)
    spark_args = (
        "--spark-ui-url", driver.ui.url, "--application-id", driver.application_id,
        "--executor-id", driver.executor_id, "--spark-interval-seconds", "1",
        "--spark-timeout-ms", "20000",
    )  # fmt: skip
    try:
        with sidecar_process(tmp_path, lab.bootstrap, *spark_args) as sidecar:

            def hung() -> dict[str, object] | None:
                status = sidecar.status()
                return status if status["verdict"] == "producer_hung" else None

            status = wait_for(
                hung, 150, "producer_hung from the Spark view",
                give_up=job.failed, context=lambda: job.error + sidecar.log_text(),
            )  # fmt: skip
            threads = sidecar.metric('hangwatch_spark_producer_threads{activity="in_callback"}')
            up = sidecar.metric("hangwatch_spark_driver_up")
    finally:
        job.stop()
    reasons = " ".join(status["reasons"])  # type: ignore[arg-type]
    assert "kafka-producer-network-thread | s4-callback" in reasons
    assert "dev.hangwatch.recording.ProducerStates" in reasons
    assert "waits for itself" in reasons
    assert status["latest"]["evidence"]["producers"] == []  # type: ignore[index]  # no telemetry
    assert status["spark"]["available"] is True  # type: ignore[index]
    assert threads == 1.0 and up == 1.0
