"""A real Prometheus server (Debian's `prometheus` package) for the chart tests.

Not a test module. `PrometheusServer` writes a config that scrapes the given targets
every second and evaluates the given rule file every second, starts `prometheus` on a
free loopback port with its own temporary storage, waits until it is ready and stops it
(terminate, then kill) on exit, so no process outlives a test.
"""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import yaml


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class PrometheusServer:
    """`prometheus` scraping `targets` (job name -> [(address, labels)]) with `rule_file`."""

    def __init__(
        self,
        workdir: Path,
        rule_file: Path,
        targets: dict[str, list[tuple[str, dict[str, str]]]],
        interval: str = "1s",
    ) -> None:
        binary = shutil.which("prometheus")
        if binary is None:
            raise RuntimeError("prometheus is missing: apt-get install prometheus")
        self.workdir = workdir
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        config = {
            "global": {"scrape_interval": interval, "evaluation_interval": interval},
            "rule_files": [str(rule_file)],
            "scrape_configs": [
                {
                    "job_name": job,
                    "static_configs": [
                        {"targets": [address], "labels": labels} for address, labels in entries
                    ],
                }
                for job, entries in targets.items()
            ],
        }
        (workdir / "prometheus.yml").write_text(yaml.safe_dump(config))
        self.command = [
            binary,
            f"--config.file={workdir / 'prometheus.yml'}",
            f"--storage.tsdb.path={workdir / 'data'}",
            f"--web.listen-address=127.0.0.1:{self.port}",
            "--log.level=warn",
        ]
        self.log = workdir / "prometheus.log"
        self.process: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> PrometheusServer:
        with self.log.open("wb") as log:
            self.process = subprocess.Popen(self.command, stdout=log, stderr=subprocess.STDOUT)
        try:
            self._wait_ready(timeout_seconds=30)
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *_exc: object) -> None:
        self.stop()

    def stop(self) -> None:
        if self.process is None:
            return
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=10)
        self.process = None

    def _wait_ready(self, timeout_seconds: float) -> None:
        deadline = time.monotonic() + timeout_seconds
        while time.monotonic() < deadline:
            assert self.process is not None
            if self.process.poll() is not None:
                raise RuntimeError(f"prometheus exited: {self.log.read_text()[-2000:]}")
            try:
                with urllib.request.urlopen(f"{self.url}/-/ready", timeout=2) as rsp:
                    if rsp.status == 200:
                        return
            except (urllib.error.URLError, ConnectionError):
                pass
            time.sleep(0.2)
        raise RuntimeError(f"prometheus not ready: {self.log.read_text()[-2000:]}")

    def api(self, path: str) -> Any:
        """GET /api/v1/<path> and return its `data`."""
        with urllib.request.urlopen(f"{self.url}/api/v1/{path}", timeout=5) as rsp:
            body = json.loads(rsp.read())
        assert body["status"] == "success", body
        return body["data"]

    def alerts(self, name: str) -> list[dict[str, Any]]:
        """Pending and firing alerts with this alertname."""
        found: list[dict[str, Any]] = [
            a for a in self.api("alerts")["alerts"] if a["labels"]["alertname"] == name
        ]
        return found
