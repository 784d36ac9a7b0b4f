"""Opens a page in headless Chromium (Debian's `chromium`) and reports what a reader would see.

`open_page(path)` copies the page next to itself with a small script appended that,
once the page has loaded, writes every image's state (alt text, whether it loaded,
its natural size) into the document; Chromium runs it offline (`--virtual-time-budget`),
prints the resulting DOM (`--dump-dom`), and the page's console messages are collected
from its log. The browser runs in a session of its own and is killed with all its helper
processes if it does not finish.
"""

from __future__ import annotations

import contextlib
import html
import json
import os
import shutil
import signal
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

PROBE = """
<script>
window.addEventListener("load", () => {
  const seen = Array.from(document.images).map(i => ({
    alt: i.alt, complete: i.complete, width: i.naturalWidth, height: i.naturalHeight}));
  const fetched = performance.getEntriesByType("resource").map(r => r.name);
  const out = document.createElement("pre");
  out.id = "hangwatch-probe";
  out.textContent = JSON.stringify({images: seen, fetched: fetched});
  document.body.appendChild(out);
});
</script>
"""
MARK = '<pre id="hangwatch-probe">'


@dataclass(frozen=True)
class Image:
    alt: str
    complete: bool
    width: int
    height: int


@dataclass(frozen=True)
class PageView:
    images: list[Image]
    fetched: list[str]
    """Every resource the page fetched (files, network); data URIs are not fetched."""
    console: list[str]
    """Every console message of the page (Chromium logs them all at one level)."""


def chromium() -> str:
    """Chromium's command; AssertionError naming the fix when it is not installed."""
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    assert found, "chromium is not installed: bash scripts/setup.sh installs Debian's chromium"
    return found


def open_page(page: Path, timeout_seconds: float = 120.0) -> PageView:
    """Load `page` (a file) in headless Chromium; what its images and console showed."""
    with tempfile.TemporaryDirectory(prefix="hangwatch-browser-") as tmp:
        probed = page.with_name(f".probe-{page.name}")
        probed.write_text(page.read_text(encoding="utf-8") + PROBE, encoding="utf-8")
        try:
            argv = [
                chromium(), "--headless", "--no-sandbox", "--disable-gpu",
                "--no-first-run", "--disable-extensions", f"--user-data-dir={tmp}",
                "--enable-logging=stderr", "--v=0", "--virtual-time-budget=10000",
                "--dump-dom", probed.as_uri(),
            ]  # fmt: skip
            with subprocess.Popen(
                argv,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                start_new_session=True,
            ) as proc:
                try:
                    dom, log = proc.communicate(timeout=timeout_seconds)
                finally:
                    # Chromium's helpers (zygote, utility processes) share its session.
                    with contextlib.suppress(ProcessLookupError):
                        os.killpg(proc.pid, signal.SIGKILL)
        finally:
            probed.unlink(missing_ok=True)
    assert proc.returncode == 0, f"chromium exited {proc.returncode}: {log[-2000:]}"
    assert MARK in dom, f"the page's load event never came: {dom[-500:]} {log[-1000:]}"
    shown = dom.split(MARK, 1)[1].split("</pre>", 1)[0]
    probe = json.loads(html.unescape(shown))
    console = [line for line in log.splitlines() if ":CONSOLE" in line]
    return PageView([Image(**i) for i in probe["images"]], probe["fetched"], console)
