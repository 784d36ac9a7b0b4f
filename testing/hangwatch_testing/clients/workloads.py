"""Each real client as a workload process: start it, feed it, time its own first error.

Clients: `sarama` and `kafka-go` (the Go producers of testing/clients, built by
`build`), `kcat` (Debian's, fed lines on stdin), `confluent-kafka` (a plain
`confluent_kafka.Producer`, `plain_producer`). Each writes `rate` messages per second,
optionally in bursts of `burst_seconds` separated by `idle_seconds` of silence. Each
line a client prints is read by a thread; the first that reports an error is timed (the
client's own first error, to compare with hangwatch's verdict).
"""

from __future__ import annotations

import contextlib
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from hangwatch.child_processes import stop_process
from hangwatch_testing.clients.build import binary

CLIENTS = ("sarama", "kafka-go", "kcat", "confluent-kafka")
PROGRAMS = {"sarama": "sarama-producer", "kafka-go": "kafkago-producer"}
"""The Go clients' programs (hangwatch_testing.clients.build, Debian's packaged sources)."""
MAX_ERRORS = 1000


@dataclass(frozen=True)
class Rhythm:
    """How a workload writes: messages per second, in bursts separated by idle periods."""

    rate: float = 20.0
    burst_seconds: float = 0.0
    idle_seconds: float = 0.0

    def sending(self, elapsed: float) -> bool:
        cycle = self.burst_seconds + self.idle_seconds
        return cycle <= 0 or elapsed % cycle < self.burst_seconds


def _is_error(client: str, line: str) -> bool:
    if client == "kcat":
        return line.startswith("%") and ("ERROR" in line or "failed" in line)
    return line.startswith("error")


def argv(client: str, bootstrap: str, topic: str, rhythm: Rhythm, wedge: Path | None) -> list[str]:
    """The command line of `client` writing to `topic`."""
    if client in PROGRAMS:
        program = binary(PROGRAMS[client])
        return [
            *(str(program), "-brokers", bootstrap, "-topic", topic, "-rate", str(rhythm.rate)),
            *("-burst", str(rhythm.burst_seconds), "-idle", str(rhythm.idle_seconds)),
        ]
    if client == "kcat":
        return ["kcat", "-P", "-b", bootstrap, "-t", topic, "-X", "linger.ms=5"]
    if client == "confluent-kafka":
        return [
            *(sys.executable, "-m", "hangwatch_testing.clients.plain_producer"),
            *("--bootstrap", bootstrap, "--topic", topic, "--rate", str(rhythm.rate)),
            *("--burst-seconds", str(rhythm.burst_seconds)),
            *("--idle-seconds", str(rhythm.idle_seconds)),
            *(("--wedge-file", str(wedge)) if wedge else ()),
        ]
    raise ValueError(f"unknown client {client!r} (one of {', '.join(CLIENTS)})")


class Workload:
    """A running client and the errors it reported."""

    def __init__(
        self,
        client: str,
        bootstrap: str,
        topic: str,
        rhythm: Rhythm | None = None,
        wedge: Path | None = None,
    ) -> None:
        self.client, self.rhythm = client, rhythm or Rhythm()
        self.errors: list[tuple[float, str]] = []
        """(monotonic time, line) of the first MAX_ERRORS errors the client reported."""
        self.lines = 0
        self._stop = threading.Event()
        self.proc = subprocess.Popen(
            argv(client, bootstrap, topic, self.rhythm, wedge),
            stdin=subprocess.PIPE if client == "kcat" else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            bufsize=1,
        )
        self._threads = [threading.Thread(target=self._read, daemon=True)]
        if client == "kcat":
            self._threads.append(threading.Thread(target=self._feed, daemon=True))
        for t in self._threads:
            t.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines += 1
            if len(self.errors) < MAX_ERRORS and _is_error(self.client, line.strip()):
                self.errors.append((time.monotonic(), line.strip()[:300]))

    def _feed(self) -> None:
        assert self.proc.stdin is not None
        started, sent = time.monotonic(), 0
        try:
            while not self._stop.wait(0.02):
                elapsed = time.monotonic() - started
                if not self.rhythm.sending(elapsed):
                    sent = int(elapsed * self.rhythm.rate)
                    continue
                while sent < int(elapsed * self.rhythm.rate):
                    self.proc.stdin.write(f"m{sent}\n")
                    sent += 1
                self.proc.stdin.flush()
        except (BrokenPipeError, ValueError, OSError):
            return  # the client exited or is being stopped

    def error_after(self, moment: float) -> tuple[float, str] | None:
        """Seconds from `moment` to the client's first error after it, and that error."""
        for at, line in list(self.errors):
            if at >= moment:
                return round(at - moment, 2), line
        return None

    def stop(self) -> None:
        self._stop.set()
        stop_process(self.proc, 5)
        for stream in (self.proc.stdin, self.proc.stdout):
            if stream is not None:
                with contextlib.suppress(OSError):
                    stream.close()
        for t in self._threads:
            t.join(timeout=2)
