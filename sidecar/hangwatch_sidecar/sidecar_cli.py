"""`hangwatch sidecar`: run the watchdog next to a Spark executor until stopped.

Thin: parses settings (flags, then `HANGWATCH_*` environment, then defaults), starts
the HTTP server and runs `SidecarLoop` rounds until SIGTERM or Ctrl-C.

Stopping is prompt whatever a round is doing. A native sidecar is stopped after the
executor's container has exited, with what is left of the pod's grace period and at
least the kubelet's 2 s minimum; an executor wedged by a hung producer often uses the
whole grace period, so the sidecar gets just those 2 s. A round can be waiting on a
blackholed broker for up to connect + request timeout (6 s by default), and the probe
threads are joined at interpreter exit, so the rounds run in their own thread and the
process ends at most `STOP_WITHIN_SECONDS` after the signal, with a round still in
flight or not: nothing is lost, since the sidecar's state lives in memory and was
published by the last finished round. It never ends through the interpreter's own
shutdown (joining thread pools, destroying Kafka client handles, collecting garbage),
whose length nothing bounds: once the HTTP server and the rounds are done, or the time
is up, the logs are flushed and the process exits. The signal and the way it stopped
are logged, so a sidecar SIGKILLed anyway shows in its last lines whether the signal
reached it.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import threading
import time
from types import FrameType
from typing import NoReturn

from hangwatch import logs
from hangwatch.contracts import ExitCode
from hangwatch.errors import UsageError
from hangwatch_sidecar.lifecycle import ExecutorWatch
from hangwatch_sidecar.loop import SidecarLoop
from hangwatch_sidecar.probe.metadata import RDKAFKA_LOG
from hangwatch_sidecar.server import StatusServer
from hangwatch_sidecar.settings import add_arguments, from_args

STOP_WITHIN_SECONDS = 1.0
"""After SIGTERM, how long an evaluation round in flight may take to finish before the
process exits without it: half the kubelet's minimum grace period (2 s)."""

log = logging.getLogger(__name__)


def register(parser: argparse.ArgumentParser) -> None:
    add_arguments(parser)


def run(args: argparse.Namespace) -> int:
    settings = from_args(args)
    logs.configure("sidecar")
    if logging.getLogger().getEffectiveLevel() > logging.DEBUG:
        # A failing broker is already in the verdict, /status and metrics; the probe
        # client's own connection errors would repeat it every round (debug shows them).
        RDKAFKA_LOG.setLevel(logging.CRITICAL)
    loop = SidecarLoop(settings)
    stale_after = (
        3 * settings.probe_interval_seconds
        + (settings.connect_timeout_ms + settings.request_timeout_ms) / 1000.0
    )
    try:
        server = StatusServer(loop.state, settings.port, stale_after_seconds=stale_after)
    except OSError as exc:
        raise UsageError(f"cannot listen on port {settings.port}: {exc.strerror}") from None
    stop = threading.Event()

    received: list[str] = []

    def on_signal(signum: int, frame: FrameType | None) -> None:
        received.append(signal.Signals(signum).name)
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    server.start()
    log.info(
        "sidecar started",
        extra={
            "port": server.port,
            "bootstrap": settings.bootstrap,
            "telemetry_dir": settings.telemetry_dir,
        },
    )
    watch = ExecutorWatch(settings.exit_when_gone) if settings.exit_when_gone else None

    failed: list[Exception] = []

    def rounds() -> None:
        try:
            loop.run(stop, done=watch.gone if watch else lambda: False)
            loop.close()
        except Exception as exc:  # noqa: BLE001 - raised again in the main thread
            failed.append(exc)
        finally:
            stop.set()

    worker = threading.Thread(target=rounds, name="hangwatch-rounds", daemon=True)
    worker.start()
    while not stop.wait(1.0):
        pass
    deadline = time.monotonic() + STOP_WITHIN_SECONDS
    if received:
        log.info("stopping", extra={"signal": received[0]})
    server.close(wait_seconds=STOP_WITHIN_SECONDS / 2)
    busy = _finish(worker, deadline)
    if failed and not busy:
        raise failed[0]
    if busy:
        # A round or a probe is still waiting on a broker; the interpreter would join it.
        log.info("stopped with work in flight", extra={"threads": busy})
    else:
        log.info("stopped")
    _exit(ExitCode.OK)


def _exit(code: int) -> NoReturn:
    """End the process now, logs flushed, without the interpreter's shutdown."""
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def _finish(worker: threading.Thread, deadline: float) -> list[str]:
    """Join the rounds thread, then every other non-daemon thread (probe pools), until
    `deadline` (monotonic); returns the names of those still running."""
    me = threading.current_thread()
    waiting = [worker] + [t for t in threading.enumerate() if t is not me and not t.daemon]
    for thread in waiting:
        thread.join(max(0.0, deadline - time.monotonic()))
    return [t.name for t in waiting if t.is_alive()]
