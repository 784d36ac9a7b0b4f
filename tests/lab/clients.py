"""Small real-client helpers the lab tests share: raw TCP, ApiVersions, a producer, and
`hangwatch lab` as a child process."""

from __future__ import annotations

import socket
import struct
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from confluent_kafka import KafkaError, Producer

from hangwatch_testing.processes import run_hangwatch

API_VERSIONS_V0 = struct.pack(">hhih", 18, 0, 7, 2) + b"hw"


def connect_outcome(port: int, timeout_seconds: float = 1.0) -> str:
    """`refused`, `timeout` or `connected` for a plain TCP connect to 127.0.0.1:port."""
    with socket.socket() as sock:
        sock.settimeout(timeout_seconds)
        try:
            sock.connect(("127.0.0.1", port))
        except ConnectionRefusedError:
            return "refused"
        except TimeoutError:
            return "timeout"
        return "connected"


def api_versions_answered(port: int, timeout_seconds: float = 1.0) -> bool:
    """True when the broker answers a Kafka ApiVersions request within the timeout."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout_seconds) as sock:
        sock.sendall(struct.pack(">i", len(API_VERSIONS_V0)) + API_VERSIONS_V0)
        try:
            header = sock.recv(8)
        except TimeoutError:
            return False
        return len(header) == 8 and struct.unpack(">i", header[4:])[0] == 7


def produce(
    bootstrap: str, count: int, timeout_seconds: float, **conf: Any
) -> list[KafkaError | None]:
    """Send `count` messages to topic t and return each delivery outcome (None = acknowledged)."""
    outcomes: list[KafkaError | None] = []
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, "log_level": 0, **conf})
    for i in range(count):
        producer.produce("t", f"m{i}".encode(), callback=lambda err, _msg: outcomes.append(err))
    deadline = time.monotonic() + timeout_seconds
    while len(outcomes) < count and time.monotonic() < deadline:
        producer.poll(0.1)
    producer.purge()
    producer.flush(1)
    return outcomes


def lab_command(state: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """Run `hangwatch lab --state STATE ARGS...` to completion; its output as text."""
    return run_hangwatch("lab", "--state", str(state), *args, timeout=60)


@contextmanager
def lab_cli(state: Path, *up_args: str) -> Iterator[tuple[subprocess.Popen[str], str]]:
    """Run `hangwatch lab up` in a child process; yields it and the bootstrap string.

    Whatever the test does, the process is killed if still running, reaped, and its
    pipe closed on the way out.
    """
    proc = subprocess.Popen(
        [sys.executable, "-m", "hangwatch", "lab", "--state", str(state), "up", *up_args],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert proc.stdout is not None
        bootstrap = proc.stdout.readline().strip()
        assert bootstrap.count(",") >= 1 or ":" in bootstrap, f"not a bootstrap: {bootstrap!r}"
        deadline = time.monotonic() + 10
        while not state.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        yield proc, bootstrap
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=20)
        if proc.stdout:
            proc.stdout.close()
