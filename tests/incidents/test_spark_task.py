"""The Spark-hosted client's task and relay (`hangwatch_testing.incidents.spark_task`), unit.

The task's function is shipped to an executor whose Python is the client's own
virtualenv, with no hangwatch in it: pickled the way PySpark pickles it, it loads and
runs in a Python that has only pyspark's and py4j's zips on its path (what Spark gives
its Python workers), imports the client's program from its file and writes the
program's progress lines to the file the driver relays; the relay copies complete lines
only, in order, as they come.
"""

from __future__ import annotations

import io
import json
import subprocess
import sys
import threading
import time
from contextlib import redirect_stdout
from pathlib import Path

import pyspark
from pyspark import cloudpickle

from hangwatch_testing.incidents import spark_task

PROGRAM = """
def produce(bootstrap, topic, rate, conf, emit, stop):
    emit("start", client="fake", bootstrap=bootstrap, topic=topic, rate=rate, conf=conf)
    emit("ack", partition=0, offset=1)
    emit("stopped", stop=stop())
"""

LOAD_AND_RUN = """
import importlib.util, pickle, sys
assert importlib.util.find_spec("hangwatch") is None, "hangwatch is importable"
assert importlib.util.find_spec("hangwatch_testing") is None
sys.path[:0] = sys.argv[1:3]
with open(sys.argv[3], "rb") as f:
    task = pickle.load(f)
task(iter([0]))
"""


def test_the_task_runs_in_a_python_without_hangwatch(tmp_path: Path) -> None:
    program, progress, stop = tmp_path / "prog.py", tmp_path / "progress.jsonl", tmp_path / "stop"
    program.write_text(PROGRAM)
    stop.touch()
    task = spark_task._task(str(program), str(progress), str(stop), ("b:1", "t", 5.0, {"a": "1"}))
    pickled = tmp_path / "task.pickle"
    pickled.write_bytes(cloudpickle.dumps(task))
    lib = Path(pyspark.__file__).resolve().parent / "python" / "lib"
    (py4j,) = lib.glob("py4j-*-src.zip")
    paths = [str(lib / "pyspark.zip"), str(py4j), str(pickled)]
    done = subprocess.run(
        [sys.executable, "-S", "-c", LOAD_AND_RUN, *paths],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    events = [json.loads(line) for line in progress.read_text().splitlines()]
    assert [e["event"] for e in events] == ["start", "ack", "stopped"]
    assert events[0]["bootstrap"] == "b:1" and events[0]["conf"] == {"a": "1"}
    assert events[2]["stop"] is True  # the stop file the driver touches is seen
    assert all(isinstance(e["ts"], float) for e in events)


def test_the_relay_copies_complete_lines_in_order(tmp_path: Path) -> None:
    progress = tmp_path / "progress.jsonl"
    stop = threading.Event()
    out = io.StringIO()

    def relay() -> None:
        with redirect_stdout(out):
            spark_task._relay(progress, stop)

    thread = threading.Thread(target=relay)
    thread.start()
    try:
        time.sleep(spark_task.RELAY_SECONDS * 3)  # no file yet: nothing, no error
        with progress.open("a") as f:
            f.write('{"n": 1}\n{"n": 2}\n{"n": ')
            f.flush()
            deadline = time.monotonic() + 10
            while out.getvalue().count("\n") < 2 and time.monotonic() < deadline:
                time.sleep(0.05)
            assert out.getvalue() == '{"n": 1}\n{"n": 2}\n'  # the partial line waits
            f.write("3}\n")
        deadline = time.monotonic() + 10
        while out.getvalue().count("\n") < 3 and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        stop.set()
        thread.join(5)
    assert [json.loads(line)["n"] for line in out.getvalue().splitlines()] == [1, 2, 3]
