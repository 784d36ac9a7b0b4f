"""The socket view narrowed to one process tree (`--socket-process`): executors that share a
network namespace each see only their own connections.

Covered: the setting's parsing (a PID, command-line text, empty: off; a PID out of range,
blank text, a NUL, over-long text: a one-line error naming the flag; property-based: any
text, from the flag's value or the environment, is settings or that one-line
`UsageError`, never another exception); the parent PID read from `/proc/<pid>/stat`
whatever the command name holds (spaces, parentheses); the tree on a constructed /proc
(descendants of descendants, other trees left out); on the real kernel, two process
trees (a parent and the child that holds the connection, as the executor JVM and its
Python worker) connected to the same listener are told apart by PID and by command-line
text, and the unnarrowed view sees both; a root that is gone makes the snapshot's error
(the verdict engine then ignores the view), never an empty view or an exception.
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hangwatch.errors import UsageError
from hangwatch_sidecar.settings import SidecarSettings, from_args
from hangwatch_sidecar.sockets.owners import (
    PID_MAX,
    ProcessRoot,
    ProcessTreeError,
    _parent,
    parse_process_root,
    process_tree,
)
from hangwatch_sidecar.sockets.reader import Narrowing, SocketReader


@pytest.mark.parametrize(
    ("text", "root"),
    [
        ("", None),
        ("4242", ProcessRoot(pid=4242)),
        (" 17 ", ProcessRoot(pid=17)),
        (str(PID_MAX), ProcessRoot(pid=PID_MAX)),
        ("org.apache.spark.executor.", ProcessRoot(pattern="org.apache.spark.executor.")),
        ("--executor-id 1 ", ProcessRoot(pattern="--executor-id 1 ")),
    ],
)
def test_the_setting_is_a_pid_or_command_line_text(text: str, root: ProcessRoot | None) -> None:
    assert parse_process_root(text) == root
    settings = SidecarSettings(bootstrap="b:1", socket_process=text).validate()
    assert settings.socket_process_root == root


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("0", "a PID must be 1..4194304, got 0"),
        ("-3", "a PID must be 1..4194304, got -3"),
        (str(PID_MAX + 1), f"a PID must be 1..4194304, got {PID_MAX + 1}"),
        ("  \t", "blank text would match every process"),
        ("java\0x", "cannot hold a NUL character"),
        ("x" * 5000, "at most 4096 characters, got 5000"),
    ],
)
def test_bad_values_are_one_line_errors_naming_the_flag(text: str, error: str) -> None:
    with pytest.raises(UsageError) as caught:
        SidecarSettings(bootstrap="b:1", socket_process=text).validate()
    message = str(caught.value)
    assert message.startswith("--socket-process: ") and error in message
    assert "\n" not in message


def _one_line_or_settings(make: object) -> None:
    try:
        settings = make()  # type: ignore[operator]
    except UsageError as exc:
        assert str(exc).startswith("--socket-process: ") and "\n" not in str(exc)
        return
    root = settings.socket_process_root
    assert root is None or (root.pid is not None) != bool(root.pattern)


@given(st.text(max_size=5000))
def test_any_flag_value_is_settings_or_one_usage_error(text: str) -> None:
    _one_line_or_settings(lambda: SidecarSettings(bootstrap="b:1", socket_process=text).validate())


@given(st.text(alphabet=st.characters(blacklist_characters="\0"), max_size=300))
def test_any_environment_value_is_settings_or_one_usage_error(text: str) -> None:
    environ = {"HANGWATCH_BOOTSTRAP": "b:1", "HANGWATCH_SOCKET_PROCESS": text}
    _one_line_or_settings(lambda: from_args(argparse.Namespace(), environ))


def test_the_parent_pid_survives_any_command_name() -> None:
    assert _parent("12 (java) S 7 12 12 0 -1") == 7
    assert _parent("12 (a) b (c) S 9 12 12 0") == 9
    assert _parent("12 (x y)) R 3 1") == 3
    assert _parent("garbage") is None
    assert _parent("12 (x) S notanumber") is None


def _fake_proc(tmp_path: Path, processes: dict[int, tuple[int, str]]) -> Path:
    for pid, (parent, cmdline) in processes.items():
        d = tmp_path / str(pid)
        d.mkdir()
        (d / "stat").write_text(f"{pid} (cmd) S {parent} {pid} {pid} 0 -1\n")
        (d / "cmdline").write_bytes(cmdline.replace(" ", "\0").encode() + b"\0")
    (tmp_path / "self").mkdir()  # not a process
    return tmp_path


def test_the_tree_holds_the_root_and_all_its_descendants(tmp_path: Path) -> None:
    proc = _fake_proc(
        tmp_path,
        {
            1: (0, "init"),
            100: (1, "java CoarseGrainedExecutorBackend --executor-id 0"),
            101: (100, "python -m pyspark.daemon"),
            102: (101, "python -m pyspark.daemon"),
            200: (1, "java CoarseGrainedExecutorBackend --executor-id 1"),
            201: (200, "python -m pyspark.daemon"),
        },
    )
    assert process_tree(ProcessRoot(pid=100), proc) == {100, 101, 102}
    assert process_tree(ProcessRoot(pid=201), proc) == {201}
    assert process_tree(ProcessRoot(pattern="--executor-id 1"), proc) == {200, 201}
    assert process_tree(ProcessRoot(pattern="CoarseGrained"), proc) == {100, 101, 102, 200, 201}
    with pytest.raises(ProcessTreeError, match="pid 999: no such process"):
        process_tree(ProcessRoot(pid=999), proc)
    with pytest.raises(ProcessTreeError, match="command line 'nothing'"):
        process_tree(ProcessRoot(pattern="nothing"), proc)


@pytest.fixture
def listener() -> Iterator[socket.socket]:
    with socket.socket() as srv:
        srv.bind(("127.0.0.1", 0))
        srv.listen(8)
        yield srv


def _tree(port: int, tag: str) -> subprocess.Popen[bytes]:
    """A root process (command line tagged) whose child connects to the listener."""
    code = (
        "import socket, subprocess, sys, time\n"
        "if sys.argv[2] == 'child':\n"
        "    c = socket.create_connection(('127.0.0.1', int(sys.argv[1])))\n"
        "    c.sendall(b'x' * 10)\n"
        "    time.sleep(60)\n"
        "else:\n"
        "    subprocess.Popen([sys.executable, '-c', sys.argv[3], sys.argv[1], 'child', ''])"
        ".wait()\n"
    )
    return subprocess.Popen(
        [sys.executable, "-c", code, str(port), tag, code], start_new_session=True
    )


def test_two_process_trees_on_one_namespace_are_told_apart(listener: socket.socket) -> None:
    port = listener.getsockname()[1]
    peer = f"127.0.0.1:{port}"
    roots = [_tree(port, "executor-a"), _tree(port, "executor-b")]
    accepted = []
    try:
        listener.settimeout(20)
        accepted = [listener.accept()[0] for _ in roots]
        everyone = SocketReader(exclude_own=False).snapshot(0.0, [peer])
        assert everyone.error is None and len(everyone.connections) == 2
        seen = {}
        for proc, tag in zip(roots, ("executor-a", "executor-b"), strict=True):
            by_pid = SocketReader(Narrowing(process=ProcessRoot(pid=proc.pid))).snapshot(
                0.0, [peer]
            )
            by_text = SocketReader(Narrowing(process=ProcessRoot(pattern=tag))).snapshot(
                0.0, [peer]
            )
            assert by_pid.error is None and len(by_pid.connections) == 1, by_pid
            assert [c.inode for c in by_text.connections] == [c.inode for c in by_pid.connections]
            seen[tag] = by_pid.connections[0].local
        assert seen["executor-a"] != seen["executor-b"]
        assert {c.local for c in everyone.connections} == set(seen.values())
    finally:
        for proc in roots:
            os.killpg(proc.pid, signal.SIGKILL)  # the root and its child
            proc.wait()
        for conn in accepted:
            conn.close()
    gone = roots[0].pid
    snap = SocketReader(Narrowing(process=ProcessRoot(pid=gone))).snapshot(0.0, [peer])
    assert snap.connections == ()
    assert snap.error == f"socket view narrowed to pid {gone}: no such process"
