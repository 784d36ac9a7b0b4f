"""The demo's Spark: a `local-cluster` application whose executors are separate JVMs.

`LocalSparkCluster` starts one Spark application for the whole demo on the master
`local-cluster[2,1,1024]` (a standalone master and two workers inside the driver JVM,
each worker launching one executor JVM with its own Python workers), runs the
reference pipeline's jobs on it (`hangwatch_pipeline.job.run_pipeline`, one job per
scenario, in a background thread), lists the live executors and kills one the way the
kubelet deletes a pod: SIGTERM, SIGKILL after a grace period. The standalone master
then launches a replacement executor and the driver runs the lost tasks again — what
Spark on Kubernetes does when the operator deletes an executor pod.

Per-executor telemetry: executors get `HANGWATCH_TELEMETRY_DIR=hangwatch-telemetry`,
a relative directory the producer wrapper resolves against the executor's working
directory (`work/<app-id>/<executor-id>/`), so each executor has its own directory,
like the volume an executor pod shares with its sidecar.

Spark runs from a private SPARK_HOME (links to the installed pyspark's files) so the
workers' `work/` directory (executor logs, telemetry, the S4 wedge trigger) is in the
demo's temporary directory and goes away with it; Spark's own log goes to
`spark-driver.log` there instead of the terminal.
"""

from __future__ import annotations

import io
import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

import pyspark
from pyspark.sql import SparkSession

from hangwatch.errors import HangwatchError
from hangwatch_demo import interceptor
from hangwatch_pipeline import job, spark_kafka
from hangwatch_pipeline.connector_sink import query_name
from hangwatch_pipeline.run_options import (
    SINK_CONNECTOR,
    SINK_WRAPPER,
    RunOptions,
    short_run_conf,
)
from hangwatch_pipeline.run_report import Summary

log = logging.getLogger(__name__)

EXECUTORS = 2
MASTER = f"local-cluster[{EXECUTORS},1,1024]"
REGISTER_SECONDS = 180.0
"""How long `start` waits for the executors to register before the first run."""
TELEMETRY_SUBDIR = "hangwatch-telemetry"
EXECUTOR_CLASS = b"org.apache.spark.executor.CoarseGrainedExecutorBackend"
SPARK_CONF = {
    # A task lost with a killed executor, or failed during an outage, is retried.
    "spark.task.maxFailures": "8",
    # The demo kills executors on purpose, scenario after scenario, in this one
    # application (up to 8 restarts in a full run); Spark's default budget here is 3, and
    # the operator rightly refuses a restart that would exceed the budget the sidecar
    # reads from the driver. A standalone master (local-cluster) ends no application for
    # executor failures anyway, so the demo states a budget that fits what it does.
    "spark.executor.maxNumFailures": "1000",
    "spark.executor.memory": "512m",
    "spark.python.worker.reuse": "true",
    # The driver's UI serves the REST API the sidecars' Spark view reads (running tasks).
    "spark.ui.enabled": "true",
    # JVMs that live for the demo's minutes on a small machine: C1 only, serial GC.
    **short_run_conf(),
}
DRIVER_LOG4J = """\
rootLogger.level = warn
rootLogger.appenderRef.file.ref = file
appender.file.type = File
appender.file.name = file
appender.file.fileName = {path}
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = %d{{HH:mm:ss.SSS}} %p %c{{1}}: %m%n
"""


class SparkStartError(HangwatchError):
    """Spark could not start (no Java, not enough memory)."""


@dataclass(frozen=True)
class Executor:
    """One live executor JVM of the demo's application."""

    id: str
    pid: int
    work_dir: Path
    cmdline: tuple[str, ...] = field(repr=False, default=())

    @property
    def telemetry_dir(self) -> Path:
        return self.work_dir / TELEMETRY_SUBDIR

    @property
    def process_pattern(self) -> str:
        """Text only this executor's command line holds (for `--exit-when-gone`): from its
        executor id to its worker's address (an application id alone can be another's,
        see `executors_of`; the worker's port is this worker's while it runs)."""
        args = list(self.cmdline)
        flags = ("--executor-id", "--app-id", "--worker-url")
        marks = [args.index(a) for a in flags if a in args[:-1]]
        if len(marks) < 2:
            return f"--executor-id {self.id} "
        first, last = min(marks), max(marks)
        return " ".join(args[first : last + 2])

    def alive(self) -> bool:
        try:
            state = Path(f"/proc/{self.pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            return False
        return state != "Z"


def executors_of(
    application_id: str, work_root: Path, proc: Path = Path("/proc")
) -> list[Executor]:
    """The application's live executor JVMs, by executor id (numerically): executor JVMs
    naming `application_id` that run in its directory under `work_root` (the standalone
    worker's `work/`). A standalone application id is the second the application started
    and a counter, so two applications started in the same second on one host share one
    (concurrent test workers did); the working directory tells their executors apart."""
    found = []
    needle = application_id.encode()
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            raw = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if EXECUTOR_CLASS not in raw or needle not in raw:
            continue
        args = tuple(a.decode(errors="replace") for a in raw.rstrip(b"\0").split(b"\0"))
        if "--executor-id" not in args[:-1]:
            continue
        executor_id = args[args.index("--executor-id") + 1]
        work_dir = work_root / application_id / executor_id
        if not _runs_in(entry, work_dir):
            continue
        found.append(Executor(executor_id, int(entry.name), work_dir, args))
    return sorted(found, key=lambda e: int(e.id) if e.id.isdigit() else 0)


def _runs_in(entry: Path, directory: Path) -> bool:
    """Whether process `entry` (/proc/<pid>) has `directory` as its working directory."""
    try:
        return Path(os.readlink(entry / "cwd")) == directory.resolve()
    except OSError:
        return False


def private_spark_home(root: Path) -> Path:
    """A SPARK_HOME of links to the installed pyspark, with its own `work/`."""
    real = Path(pyspark.__file__).resolve().parent
    home = root / "spark-home"
    home.mkdir()
    for item in real.iterdir():
        if item.name != "work":
            (home / item.name).symlink_to(item)
    (home / "work").mkdir()
    return home


class LineStream(io.StringIO):
    """A text stream that hands every complete line to `say` (the pipeline's progress)."""

    def __init__(self, say: Callable[[str], None]) -> None:
        super().__init__()
        self._say = say
        self._partial = ""

    def write(self, text: str) -> int:
        *lines, self._partial = (self._partial + text).split("\n")
        for line in lines:
            if line.strip():
                self._say(line)
        return len(text)


PipelineRun = Callable[[SparkSession, RunOptions, IO[str]], Summary]
"""One pipeline run of a scenario on the demo's Spark session, progress lines to the IO
(`spark_tasks.pipeline_run`: batch or streaming, whose tasks write through which producer)."""


class PipelineJob:
    """One run of the reference pipeline in a background thread."""

    def __init__(
        self,
        spark: SparkSession,
        options: RunOptions,
        task: PipelineRun,
        progress: Callable[[str], None] = lambda _: None,
    ) -> None:
        self.options = options
        self._spark = spark
        self.summary: Summary | None = None
        self.error: str | None = None
        self._stream = LineStream(progress)
        self._thread = threading.Thread(
            target=self._run, args=(spark, task), name=f"pipeline-{options.run_id}", daemon=True
        )
        self._thread.start()

    def _run(self, spark: SparkSession, task: PipelineRun) -> None:
        try:
            self.summary = task(spark, self.options, self._stream)
        except Exception as exc:  # noqa: BLE001 - reported in the scenario's row
            self.error = f"{type(exc).__name__}: {exc}"

    def wait(self, timeout_seconds: float) -> bool:
        """True once the job ended (successfully or not) within the timeout."""
        self._thread.join(timeout_seconds)
        return not self._thread.is_alive()

    @property
    def running(self) -> bool:
        return self._thread.is_alive()

    def cancel(self, wait_seconds: float = 10.0) -> None:
        """Cancel the run's Spark jobs (its job group) and wait a little for the thread."""
        self._spark.sparkContext.cancelJobGroup(self.options.run_id)
        for query in self._spark.streams.active:  # a streaming run's query
            if query.name == query_name(self.options):
                query.stop()
        self.wait(wait_seconds)


class LocalSparkCluster:
    """The demo's Spark application (see the module docstring)."""

    def __init__(
        self, root: Path, progress: Callable[[str], None] = lambda _: None, connector: bool = False
    ) -> None:
        self.root = root
        self.progress = progress
        self.connector = connector
        """Load Spark's Kafka sink's jars (scenarios of the `jvm` producer)."""
        self.spark: SparkSession | None = None
        self.application_id = ""
        self.ui_url = ""
        """The driver UI's base URL (its REST API is the sidecars' Spark view)."""
        self.work_root = root / "spark-home" / "work"
        self._saved_env: dict[str, str | None] = {}

    def _interceptor_conf(self) -> dict[str, str]:
        """With the connector: the demo's wedgeable interceptor's jar (`interceptor`),
        built before any JVM starts; the scenarios that use it name it in their options."""
        if not self.connector:
            return {}
        self.progress("building the demo's Kafka interceptor (cached after the first build)")
        return {"spark.jars": str(interceptor.interceptor_jar(spark_kafka.jars()))}

    def start(self) -> None:
        home = private_spark_home(self.root)
        driver_log4j = self.root / "log4j2-driver.properties"
        driver_log4j.write_text(DRIVER_LOG4J.format(path=self.root / "spark-driver.log"))
        for name, value in (("SPARK_HOME", str(home)), ("PYSPARK_PYTHON", sys.executable)):
            self._saved_env[name] = os.environ.get(name)
            os.environ[name] = value
        options = RunOptions(
            bootstrap="-",
            topic="-",
            events=None,
            master=MASTER,
            telemetry_dir=TELEMETRY_SUBDIR,
            spark_conf={
                **SPARK_CONF,
                "spark.driver.extraJavaOptions": f"-Dlog4j2.configurationFile=file:{driver_log4j}",
                **self._interceptor_conf(),
            },
            app_name="hangwatch-demo",
            spark_log_level="ERROR",
            sink=SINK_CONNECTOR if self.connector else SINK_WRAPPER,
        )
        started = time.monotonic()
        try:
            self.spark = job.spark_session(options)
        except Exception as exc:  # noqa: BLE001 - py4j/pyspark raise many kinds
            raise SparkStartError(f"cannot start Spark ({MASTER}): {exc}".splitlines()[0]) from None
        job.quiet_task_failure_logs(self.spark)
        self.application_id = self.spark.sparkContext.applicationId
        self.ui_url = self.spark.sparkContext.uiWebUrl or ""
        # Up: both executor JVMs exist AND registered with the driver, which can take a
        # minute more on a loaded machine (seen with Spark 3.5.7: JVMs listed 50 s before
        # they registered; a run started then waited for executors past its baseline).
        deadline = time.monotonic() + REGISTER_SECONDS
        while (
            len(self.executors()) < EXECUTORS or self.registered() < EXECUTORS
        ) and time.monotonic() < deadline:
            time.sleep(0.2)
        self.progress(
            f"Spark {pyspark.__version__} {MASTER} up in {time.monotonic() - started:.0f} s: "
            f"application {self.application_id}, executors "
            + ", ".join(f"{e.id} (pid {e.pid})" for e in self.executors())
        )

    def registered(self) -> int:
        """Executors registered with the driver (its status tracker lists the driver too)."""
        if self.spark is None:
            return 0
        infos = self.spark.sparkContext._jsc.sc().statusTracker().getExecutorInfos()
        return max(0, len(infos) - 1)

    def executors(self) -> list[Executor]:
        if not self.application_id:
            return []
        return executors_of(self.application_id, self.work_root)

    def run(
        self,
        options: RunOptions,
        task: PipelineRun,
        progress: Callable[[str], None] = lambda _: None,
    ) -> PipelineJob:
        """Start `options`' pipeline run; its progress lines go to `progress`."""
        assert self.spark is not None, "start() first"
        return PipelineJob(self.spark, options, task, progress)

    def kill(self, executor: Executor, grace_seconds: float) -> None:
        """SIGTERM, then SIGKILL after `grace_seconds` (as the kubelet deletes a pod)."""
        try:
            os.kill(executor.pid, signal.SIGTERM)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + grace_seconds
        while executor.alive() and time.monotonic() < deadline:
            time.sleep(0.05)
        if executor.alive():
            try:
                os.kill(executor.pid, signal.SIGKILL)
            except ProcessLookupError:
                return

    def close(self) -> None:
        if self.spark is not None:
            spark, self.spark = self.spark, None
            try:
                spark.sparkContext.cancelAllJobs()
                spark.stop()
            except Exception as exc:  # noqa: BLE001 - stopping must not hide the real error
                log.warning("stopping Spark failed", extra={"error": str(exc)})
        for name, value in self._saved_env.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


@contextmanager
def local_spark_cluster(
    root: Path, progress: Callable[[str], None] = lambda _: None, connector: bool = False
) -> Iterator[LocalSparkCluster]:
    cluster = LocalSparkCluster(root, progress, connector)
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.close()
