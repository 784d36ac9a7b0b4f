"""`hangwatch sidecar`: run the watchdog next to a Spark executor until stopped.

Thin: parses settings (flags, then `HANGWATCH_*` environment, then defaults), starts
the HTTP server and runs `SidecarLoop` rounds until SIGTERM or Ctrl-C.
"""

from __future__ import annotations

import argparse
import logging
import signal
import threading
from types import FrameType

from hangwatch import logs
from hangwatch.contracts import ExitCode
from hangwatch.errors import UsageError
from hangwatch_sidecar.lifecycle import ExecutorWatch
from hangwatch_sidecar.loop import SidecarLoop
from hangwatch_sidecar.probe.metadata import RDKAFKA_LOG
from hangwatch_sidecar.server import StatusServer
from hangwatch_sidecar.settings import add_arguments, from_args


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

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    server.start()
    logging.getLogger(__name__).info(
        "sidecar started",
        extra={
            "port": server.port,
            "bootstrap": settings.bootstrap,
            "telemetry_dir": settings.telemetry_dir,
        },
    )
    watch = ExecutorWatch(settings.exit_when_gone) if settings.exit_when_gone else None
    try:
        loop.run(stop, done=watch.gone if watch else lambda: False)
    finally:
        server.close()
        loop.close()
    return ExitCode.OK
