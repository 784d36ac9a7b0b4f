"""The Python stack view reads real processes with the real py-spy, and bad dumps stay one line.

Covered: real Python processes with a real confluent-kafka producer (librdkafka's mock
cluster in the process, so a delivery comes at once): a delivery callback blocked
inside `flush()` -> `in_callback` naming the callback, the client call and its caller;
a `flush()` waiting on a broker that refuses -> `in_client`; a task computing -> outside
and active; a task sleeping -> outside, idle; the reader narrowed to one process tree
finds its Python processes and leaves the sidecar's own out; a process py-spy cannot
read -> one-line error, no threads. Trust boundary (hypothesis): any bytes as a dump ->
threads or `StackDumpError`, never another exception; any well-formed dump classifies.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hangwatch_sidecar.pystacks.reader import StackReader, python_processes
from hangwatch_sidecar.pystacks.types import (
    Place,
    PyFrame,
    PyThreadDump,
    StackDumpError,
    ThreadPlace,
    classify,
    parse_dump,
)
from hangwatch_sidecar.sockets.owners import ProcessRoot

TASK = textwrap.dedent(
    """
    import sys, threading, time
    from confluent_kafka import Producer

    def on_delivery(err, msg):
        threading.Event().wait()          # blocks the thread flush() runs callbacks on

    def parse():
        x = 0
        while True:
            x += 1

    def idle():  # a frame of its own: `_sample` waits for the task to leave <module>
        time.sleep(600)

    mode = sys.argv[1]
    if mode == "callback":
        p = Producer({"bootstrap.servers": "", "test.mock.num.brokers": 1})
        p.produce("t", b"x", on_delivery=on_delivery)
        p.flush()
    elif mode == "flush":
        p = Producer({"bootstrap.servers": "127.0.0.1:1", "message.timeout.ms": 600000})
        p.produce("t", b"x")
        p.flush(600)
    elif mode == "compute":
        parse()
    else:
        idle()
    """
)


@pytest.fixture
def task(tmp_path: Path) -> Iterator[object]:
    script = tmp_path / "task.py"
    script.write_text(TASK)
    started: list[subprocess.Popen[bytes]] = []

    def start(mode: str) -> subprocess.Popen[bytes]:
        proc = subprocess.Popen(
            [sys.executable, str(script), mode],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        started.append(proc)
        return proc

    yield start
    for proc in started:
        proc.kill()
        proc.wait()


def _sample(pid: int) -> list[object]:
    with ThreadPoolExecutor(2) as pool:
        reader = StackReader(ProcessRoot(pid=pid), pool, 10.0, time.monotonic)
        deadline = time.monotonic() + 30
        while True:  # until the process reached the state its mode puts it in
            view = reader.sample()
            assert view.error is None, view.error
            main = [t for t in view.threads if t.name == "MainThread"]
            if main and (main[0].user_frame or main[0].client_call):
                settled = main[0]
                if settled.place is not Place.OUTSIDE or "<module>" not in settled.user_frame:
                    return [settled]
                if time.monotonic() > deadline:
                    return [settled]
            time.sleep(0.2)


def _main_until(pid: int, done: Callable[[ThreadPlace], bool]) -> ThreadPlace:
    """The main thread's place once `done` holds for it (or the last seen after 30 s)."""
    deadline = time.monotonic() + 30
    while True:
        (main,) = _sample(pid)
        assert isinstance(main, ThreadPlace)
        if done(main) or time.monotonic() > deadline:
            return main


def test_a_blocked_delivery_callback_is_in_callback(task) -> None:  # type: ignore[no-untyped-def]
    proc = task("callback")
    main = _main_until(proc.pid, lambda t: t.place is Place.IN_CALLBACK)
    assert main.place is Place.IN_CALLBACK  # type: ignore[attr-defined]
    assert main.client_call == "Producer_flush"  # type: ignore[attr-defined]
    assert main.user_frame.startswith("on_delivery (task.py:")  # type: ignore[attr-defined]
    assert main.caller.startswith("<module> (task.py:")  # type: ignore[attr-defined]


def test_flush_waiting_for_a_refusing_broker_is_in_client(task) -> None:  # type: ignore[no-untyped-def]
    proc = task("flush")
    # the constructor (Producer_init) is in the client too: wait for the flush itself
    main = _main_until(
        proc.pid, lambda t: t.place is Place.IN_CLIENT and t.client_call == "Producer_flush"
    )
    assert main.place is Place.IN_CLIENT  # type: ignore[attr-defined]
    assert main.client_call == "Producer_flush"  # type: ignore[attr-defined]


def test_computing_and_sleeping_tasks_are_outside_the_client(task) -> None:  # type: ignore[no-untyped-def]
    computing, sleeping = task("compute"), task("sleep")
    deadline = time.monotonic() + 30
    while True:
        (busy,) = _sample(computing.pid)
        if busy.user_frame.startswith("parse") or time.monotonic() > deadline:  # type: ignore[attr-defined]
            break
    assert busy.place is Place.OUTSIDE and busy.active  # type: ignore[attr-defined]
    (idle,) = _sample(sleeping.pid)
    assert idle.place is Place.OUTSIDE and not idle.active  # type: ignore[attr-defined]
    assert "computing in parse" in busy.describe()  # type: ignore[attr-defined]


def test_the_reader_finds_the_trees_python_processes_and_not_its_own(task, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    proc = task("sleep")
    assert python_processes(ProcessRoot(pid=proc.pid)) == [proc.pid]
    # unnarrowed: every Python process but the reader's own tree (its children included)
    assert proc.pid not in python_processes(None)
    orphan = subprocess.run(  # a Python process of another tree (its parent exits)
        ["sh", "-c", f'"{sys.executable}" "{tmp_path}/task.py" sleep >/dev/null 2>&1 & echo $!'],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    other = int(orphan.stdout)
    try:
        everyone = python_processes(None)
        assert other in everyone and os.getpid() not in everyone
    finally:
        os.kill(other, 9)


def test_a_process_py_spy_cannot_read_is_a_one_line_error() -> None:
    child = subprocess.Popen(["sleep", "60"])  # not Python: py-spy cannot read it
    try:
        with ThreadPoolExecutor(1) as pool:
            reader = StackReader(ProcessRoot(pid=child.pid), pool, 10.0, time.monotonic)
            assert reader.sample().error == "no Python process of the executor is visible"
            dump = reader._dump  # read a non-Python process directly
            with pytest.raises(StackDumpError) as raised:
                dump(child.pid)
            assert "\n" not in str(raised.value) and f"pid {child.pid}" in str(raised.value)
    finally:
        child.kill()
        child.wait()


_frame = st.builds(
    PyFrame,
    name=st.text(max_size=30),
    filename=st.text(max_size=60),
    line=st.integers(0, 10**6),
    module=st.none() | st.text(max_size=60) | st.sampled_from(["/x/librdkafka.so.1"]),
)
_thread = st.builds(
    PyThreadDump,
    thread_id=st.integers(0, 2**63),
    os_thread_id=st.none() | st.integers(0, 2**31),
    thread_name=st.none() | st.text(max_size=20),
    active=st.booleans(),
    frames=st.lists(_frame, max_size=12),
)


@settings(max_examples=300)
@given(st.binary(max_size=400) | st.lists(_thread, max_size=4).map(msgspec.json.encode))
def test_any_bytes_are_threads_or_a_one_line_error(raw: bytes) -> None:
    try:
        threads = parse_dump(raw)
    except StackDumpError as exc:
        assert "\n" not in str(exc)
        return
    for t in threads:
        place = classify(7, t)
        assert place.place in Place
        assert "\n" not in place.describe() or "\n" in (t.thread_name or "") + "".join(
            f.name + f.filename for f in t.frames
        )


def test_an_oversized_dump_is_refused_before_decoding() -> None:
    with pytest.raises(StackDumpError, match="over"):
        parse_dump(b"[" + b" " * (4 * 1024 * 1024) + b"]")
