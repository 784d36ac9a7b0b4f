"""SIGTERM stops the sidecar while a round still waits on a broker that never answers.

Covers, with the real `hangwatch sidecar` command: the only broker accepts TCP and
never answers a request, the request timeout is 120 s; once the sidecar's
probe is connected (its request in flight), SIGTERM ends the process with exit 0 long
before that request could time out, and the log names the signal and says work was
left in flight.

Why it matters: a native sidecar is stopped after the executor's container exits, and
an executor wedged by a hung producer uses the pod's whole grace period, leaving the
sidecar the kubelet's 2 s minimum. Before the fix the sidecar finished its round first
(2.6-5.7 s measured against blackholed brokers) and was SIGKILLed: exit 137 on the
node tier, for the very executor hangwatch had restarted.
"""

from __future__ import annotations

import json
import signal
from pathlib import Path

from hangwatch_testing.silent_broker import SilentBroker
from hangwatch_testing.waiting import wait_for
from tests.sidecar.sidecar_process import sidecar_process

REQUEST_TIMEOUT_S = 120


def test_sigterm_ends_the_sidecar_with_a_request_in_flight(tmp_path: Path) -> None:
    timeout_ms = str(REQUEST_TIMEOUT_S * 1000)
    with (
        SilentBroker() as broker,
        sidecar_process(
            tmp_path, broker.address, "--request-timeout-ms", timeout_ms,
            "--connect-timeout-ms", timeout_ms,
        ) as sidecar,
    ):  # fmt: skip
        wait_for(lambda: broker.peers, 60, "the sidecar's probe connected to the silent broker")
        sidecar.proc.send_signal(signal.SIGTERM)
        # exit precedes the in-flight request's own timeout by far
        assert sidecar.proc.wait(timeout=REQUEST_TIMEOUT_S / 2) == 0, sidecar.log_text()
        log = sidecar.log_text()
    stopping = [json.loads(line) for line in log.splitlines() if '"stopping"' in line]
    assert [line.get("signal") for line in stopping] == ["SIGTERM"], log
    assert "stopped with work in flight" in log, log
    assert "Traceback" not in log, log
