"""A `SidecarLoop` (the sidecar's own code) with the fast timing the lab tests share.

1 s probes, 5 s stall, 1 s connect and request timeouts; everything else the sidecar's
defaults unless a test changes it. Not a test module.
"""

from __future__ import annotations

from pathlib import Path

from hangwatch_sidecar.loop import SidecarLoop
from hangwatch_sidecar.settings import SidecarSettings


def fast_loop(bootstrap: str, topics: str, telemetry: Path, **changes: object) -> SidecarLoop:
    """A loop probing `bootstrap` for `topics` and reading `telemetry`, with `changes`
    (settings fields) applied; the caller closes it."""
    settings = SidecarSettings(
        bootstrap=bootstrap,
        topics=topics,
        port=1,
        telemetry_dir=str(telemetry),
        probe_interval_seconds=1.0,
        stall_seconds=5.0,
        connect_timeout_ms=1000,
        request_timeout_ms=1000,
        **changes,  # type: ignore[arg-type]
    )
    return SidecarLoop(settings.validate())
