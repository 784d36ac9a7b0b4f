"""A FIFO in the telemetry directory cannot wedge the sidecar, and SIGTERM still stops it.

Covers, with the real `hangwatch sidecar` command: FIFOs named `producer-x.lock` (next to
a document) and `producer-y.json` in the telemetry directory; the sidecar keeps
completing rounds (seen through /status), and SIGTERM ends the process with exit 0
(not held by a FIFO's open: a 15 s liveness window), without a traceback.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import urllib.request
from pathlib import Path

from hangwatch.wire import status
from hangwatch_testing.ports import free_port
from hangwatch_testing.waiting import wait_for


def test_fifos_do_not_wedge_the_sidecar_and_sigterm_stops_it(tmp_path: Path) -> None:
    (tmp_path / "producer-8-1.json").write_text(json.dumps({"schema": 1, "seq": 1, "counters": {}}))
    os.mkfifo(tmp_path / "producer-8-1.lock")
    os.mkfifo(tmp_path / "producer-9-1.json")
    port = free_port()
    sidecar = subprocess.Popen(
        [
            sys.executable, "-m", "hangwatch", "sidecar",
            "--bootstrap", f"127.0.0.1:{free_port()}",
            "--telemetry-dir", str(tmp_path), "--port", str(port),
            "--probe-interval-seconds", "0.3", "--stall-seconds", "5",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )  # fmt: skip
    try:

        def rounds() -> int:
            try:
                url = f"http://127.0.0.1:{port}/status"
                with urllib.request.urlopen(url, timeout=2) as reply:
                    return status.decode(reply.read()).sidecar.rounds
            except OSError:
                return 0

        wait_for(lambda: rounds() >= 3, 30, "three evaluation rounds among the FIFOs")
        sidecar.send_signal(signal.SIGTERM)
        assert sidecar.wait(timeout=15) == 0
    finally:
        if sidecar.poll() is None:
            sidecar.kill()
            sidecar.wait()
        assert sidecar.stderr is not None
        stderr = sidecar.stderr.read().decode()
        sidecar.stderr.close()
    assert "Traceback" not in stderr
