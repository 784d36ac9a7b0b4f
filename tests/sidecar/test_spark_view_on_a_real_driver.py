"""Spark's view of an executor, read from a real Spark driver's REST API.

One `local-cluster[1,2,1024]` application for the module (a standalone worker whose
executor is a separate JVM, as on Kubernetes), its UI on a free port. Covers:
- a PySpark stage where one task sleeps while its seven peers finish: the reader sees
  the task running on executor 0 by its TID and stage from the real thread dump, reads
  the stage's counts and its finished tasks' median from the real driver, and the
  tracker calls it a straggler once past the stall threshold - corroborating evidence
  only, no verdict; the cost of a read (requests, bytes, milliseconds) is measured;
- an executor JVM running the CONSTRUCTED classes of `constructed_jvm/` (named like the
  Java Kafka client's, compiled here with javac; the client itself cannot be obtained):
  the real dump shows the I/O thread `kafka-producer-network-thread | constructed-1`
  inside its delivery callback waiting for itself and a task thread waiting for
  metadata, and the classifier says so;
- a real `hangwatch sidecar` process next to that executor, probing a healthy lab with
  no telemetry at all: `producer_hung` naming the I/O thread, with the Spark metrics.
"""

from __future__ import annotations

import shutil
import subprocess
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pyspark
import pytest

from hangwatch_lab import Lab
from hangwatch_sidecar.spark.client import DriverClient, DriverReader
from hangwatch_sidecar.spark.judge import judge_spark
from hangwatch_sidecar.spark.tracking import SparkTracker
from hangwatch_sidecar.spark.types import Activity, SparkView, ThreadRole
from hangwatch_sidecar.spark.watch import SparkWatch
from hangwatch_testing.spark_driver import Driver, local_cluster_driver
from hangwatch_testing.waiting import wait_for

from .sidecar_process import sidecar_process

SOURCES = Path(__file__).resolve().parent / "constructed_jvm" / "src"
STALL = 5.0


def _constructed_jar(work: Path) -> Path:
    """The constructed classes compiled against pyspark's jars (javac must be installed)."""
    javac = shutil.which("javac")
    assert javac, "javac (openjdk-17-jdk-headless) is needed: scripts/setup.sh installs it"
    jars = Path(pyspark.__file__).resolve().parent / "jars"
    classes = work / "classes"
    sources = [str(p) for p in sorted(SOURCES.rglob("*.java"))]
    subprocess.run(
        [javac, "-nowarn", "-d", str(classes), "-cp", f"{jars}/*", *sources],
        check=True, capture_output=True, timeout=240,
    )  # fmt: skip
    jar = work / "constructed-kafka-names.jar"
    subprocess.run(
        ["jar", "cf", str(jar), "-C", str(classes), "."],
        check=True,
        capture_output=True,
        timeout=60,
    )
    return jar


@pytest.fixture(scope="module")
def driver(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Driver]:
    work = tmp_path_factory.mktemp("spark-view")
    with local_cluster_driver(work, "hangwatch-spark-view-test", [_constructed_jar(work)]) as live:
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
    assert view.threads == ()  # a PySpark task: no Kafka client in the JVM
    findings = judge_spark(view, stall_seconds=STALL, heartbeat_seconds=3.0, cluster_healthy=True)
    assert findings and all(f.verdict is None for f in findings)
    assert "(a straggler)" in findings[0].reason
    assert stats.reads >= 2 and stats.last_requests == 3 and stats.driver_up
    print(  # the cost of one read with peers (pytest -s shows it)
        f"\nREST read: {stats.last_requests} requests, {stats.last_response_bytes} bytes, "
        f"{stats.last_read_seconds * 1000:.0f} ms"
    )


def _constructed_job(driver: Driver) -> Background:
    spark = driver.spark
    spark.udf.registerJavaFunction("hw_constructed", "constructed.user.WedgeUdf", "bigint")
    frame = spark.range(0, 4, 1, 4).selectExpr(
        "hw_constructed(CAST(CASE WHEN id = 0 THEN 150 ELSE 0 END AS BIGINT))"
    )
    return Background(driver, "constructed", frame.collect)


def test_constructed_kafka_threads_in_a_real_executor_dump(driver: Driver) -> None:
    job = _constructed_job(driver)
    reader = DriverReader(DriverClient(driver.ui, 20.0), driver.application_id, driver.executor_id)
    try:

        def both() -> dict[Activity, object] | None:
            snapshot = reader.read()
            found = {t.activity: t for t in snapshot.threads}
            wanted = (Activity.IN_CALLBACK, Activity.AWAITING_METADATA)
            return found if all(a in found for a in wanted) else None

        found = wait_for(
            both, 120, "the constructed producer threads in the dump",
            give_up=job.failed, context=lambda: job.error,
        )  # fmt: skip
    finally:
        job.stop()
    io = found[Activity.IN_CALLBACK]
    assert io.name == "kafka-producer-network-thread | constructed-1"  # type: ignore[attr-defined]
    assert io.role is ThreadRole.NETWORK and io.state == "WAITING"  # type: ignore[attr-defined]
    assert io.user_frame == "constructed.user.DeliveryCallback.onCompletion"  # type: ignore[attr-defined]
    assert "waits for itself" in io.detail  # type: ignore[attr-defined]
    waiting = found[Activity.AWAITING_METADATA]
    assert waiting.role is ThreadRole.TASK and waiting.task_id is not None  # type: ignore[attr-defined]


def test_real_sidecar_calls_the_hung_jvm_producer_producer_hung(
    driver: Driver, tmp_path: Path
) -> None:
    job = _constructed_job(driver)
    spark_args = (
        "--spark-ui-url", driver.ui.url, "--application-id", driver.application_id,
        "--executor-id", driver.executor_id, "--spark-interval-seconds", "1",
        "--spark-timeout-ms", "20000",
    )  # fmt: skip
    try:
        with (
            Lab(brokers=3, topics={"events": 3}) as lab,
            sidecar_process(tmp_path, lab.bootstrap, *spark_args) as sidecar,
        ):

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
    assert "kafka-producer-network-thread | constructed-1" in reasons
    assert "constructed.user.DeliveryCallback.onCompletion" in reasons
    assert "waits for itself" in reasons
    assert status["latest"]["evidence"]["producers"] == []  # type: ignore[index]  # no telemetry
    assert status["spark"]["available"] is True  # type: ignore[index]
    assert threads == 1.0 and up == 1.0
