"""A field-corpus client inside Spark: a PySpark task writing through the client's own library.

    python -m hangwatch_testing.incidents.spark_task --python P --program F --work DIR
        --brokers B --topic T [--rate 20] [-X key=value ...]

Starts `local-cluster[1,1,1024]` (`hangwatch_testing.spark_driver`: one executor, a
separate JVM, as on Kubernetes) whose Python workers are `--python`, the client's own
virtualenv (`spark.pyspark.python`: confluent-kafka at the affected release, nothing of
hangwatch's), prints `ready <ui-url> <application-id> <executor-id> <executor-pid>` once
the executor has registered, then runs ONE task that imports `--program` (the client's
program, e.g. testing/clients/incidents/confluent-kafka/librdkafka_producer.py) in the
executor's Python worker and calls its `produce(bootstrap, topic, rate, conf, emit,
stop)`: the client writes from inside the task, as a PySpark job's `foreachPartition`
does. The task's progress lines (the incidents' protocol) go to a file under `--work`;
this driver relays them to its stdout as they come. On SIGTERM the task is told to stop
(a file it polls), the job cancelled and the session and its JVMs stopped.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path

from hangwatch.properties import parse_assignments
from hangwatch_demo.spark_cluster import executors_of
from hangwatch_testing.spark_driver import local_cluster_driver

RELAY_SECONDS = 0.1


def _task(
    program: str, progress: str, stop_file: str, args: tuple[str, str, float, dict[str, str]]
) -> Callable[[Iterable[int]], None]:
    """The task's function, pickled by value (a closure: the worker has no hangwatch)."""

    def run(_rows: Iterable[int]) -> None:
        # imported in the executor's Python worker (the client's virtualenv), at run time
        import importlib.util  # noqa: PLC0415
        import json  # noqa: PLC0415
        import os  # noqa: PLC0415
        import time as clock  # noqa: PLC0415

        spec = importlib.util.spec_from_file_location("client_program", program)
        module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
        spec.loader.exec_module(module)  # type: ignore[union-attr]
        with open(progress, "a", buffering=1) as out:

            def emit(event: str, **fields: object) -> None:
                out.write(json.dumps({"ts": clock.time(), "event": event, **fields}) + "\n")

            bootstrap, topic, rate, conf = args
            module.produce(bootstrap, topic, rate, conf, emit, lambda: os.path.exists(stop_file))

    return run


def _relay(progress: Path, stop: threading.Event) -> None:
    offset = 0
    while not stop.wait(RELAY_SECONDS):
        if not progress.exists():
            continue
        with progress.open() as src:
            src.seek(offset)
            chunk = src.read()
        complete = chunk[: chunk.rfind("\n") + 1]
        offset += len(complete.encode())
        if complete:
            sys.stdout.write(complete)
            sys.stdout.flush()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--python", required=True, type=Path)
    parser.add_argument("--program", required=True, type=Path)
    parser.add_argument("--work", required=True, type=Path)
    parser.add_argument("--brokers", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--rate", type=float, default=20.0)
    parser.add_argument("-X", dest="conf", action="append", default=[], metavar="KEY=VALUE")
    args = parser.parse_args(argv)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    work: Path = args.work
    work.mkdir(parents=True, exist_ok=True)
    progress, stop_file = work / "progress.jsonl", work / "stop"
    conf = {"spark.pyspark.python": str(args.python), "spark.task.maxFailures": "1"}
    with local_cluster_driver(work, "hangwatch-field-corpus", (), conf, cores=1) as driver:
        (executor,) = [
            e
            for e in executors_of(driver.application_id, driver.work_root)
            if e.id == driver.executor_id
        ]
        print(
            f"ready {driver.ui.url} {driver.application_id} {executor.id} {executor.pid}",
            flush=True,
        )
        task = _task(
            str(args.program.resolve()),
            str(progress),
            str(stop_file),
            (args.brokers, args.topic, args.rate, parse_assignments(args.conf)),
        )
        sc = driver.spark.sparkContext
        job = threading.Thread(
            target=lambda: sc.parallelize([0], 1).foreachPartition(task), daemon=True
        )
        relay = threading.Thread(target=_relay, args=(progress, stop), daemon=True)
        relay.start()
        job.start()
        while not stop.wait(0.5) and job.is_alive():
            pass
        stop_file.touch()
        job.join(10)
        sc.cancelAllJobs()
        job.join(30)
        time.sleep(RELAY_SECONDS * 2)
        stop.set()
        relay.join(5)
    return 0


if __name__ == "__main__":
    sys.exit(main())
