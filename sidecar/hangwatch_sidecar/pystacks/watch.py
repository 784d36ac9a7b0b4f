"""The Python stack view's cadence: sample only while the pod is silent and a task runs.

py-spy pauses each sampled process for the milliseconds of its read and costs the
sidecar a short-lived process per Python process, so a sample is taken only when it can
change a verdict: Spark runs a task of this executor and either every connection of the
pod to brokers has been silent for half the stall threshold (so a verdict has samples
to rest on when silence reaches the threshold) or the socket view is unavailable. A
round that takes no sample resets the tracker: held times count consecutive samples
only. State changes (a sample failing, and why; working again) are logged once.
"""

from __future__ import annotations

import logging
from collections import Counter

from hangwatch_sidecar.pystacks.judge import HeldView, StackTracker
from hangwatch_sidecar.pystacks.reader import StackReader
from hangwatch_sidecar.sockets.types import SocketObservation

log = logging.getLogger(__name__)


class StackWatch:
    """Owns the reader, the tracker and the counts of one sidecar's stack samples."""

    def __init__(self, reader: StackReader, stall_seconds: float) -> None:
        self.reader, self.stall_seconds = reader, stall_seconds
        self.tracker = StackTracker()
        self.samples = 0
        self.errors: Counter[str] = Counter()
        self._last_error: str | None = None

    def due(self, task_running: bool | None, sockets: SocketObservation | None) -> bool:
        """Whether this round should sample (see the module's docstring)."""
        if task_running is not True:
            return False
        if sockets is None or not sockets.available:
            return True
        silent = sockets.silent_seconds
        return silent is not None and silent >= self.stall_seconds / 2

    def skip(self) -> None:
        """This round takes no sample: held waits start again at the next one."""
        self.tracker = StackTracker()

    def sample(self) -> HeldView:
        view = self.reader.sample()
        self.samples += 1
        if view.error != self._last_error:
            if view.error:
                self.errors[view.error.split(":", 1)[0][:80]] += 1
                log.warning("python stack view unavailable", extra={"error": view.error})
            else:
                log.info("python stack view available", extra={"processes": view.processes})
            self._last_error = view.error
        return self.tracker.observe(view)
