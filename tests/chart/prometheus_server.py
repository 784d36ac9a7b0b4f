"""Real Prometheus and Alertmanager servers (Debian's packages) for the chart tests, and a
webhook receiver standing for the person they notify.

Not a test module. `PrometheusServer` writes a config that scrapes the given targets
and evaluates the given rule file every second (sending alerts to an Alertmanager when
given one); `AlertmanagerServer` runs `prometheus-alertmanager` with a given config and
no cluster peers. Each starts on a free loopback port with its own temporary storage,
waits until it is ready and stops (terminate, then kill) on exit, also when it never
became ready, so no process outlives a test. `WebhookReceiver` is an HTTP server on
127.0.0.1 that keeps every notification posted to it, with the path it came to (a
receiver per path) and when. `rule_file` writes the chart's rules with the test-only
timing overrides a test names; `alert_pipeline` puts the three together: Prometheus
with the chart's rules scraping the given jobs, sending to Alertmanager routing with
examples/alertmanager/routes.yaml (waits shortened) to the receiver.
"""

from __future__ import annotations

import contextlib
import copy
import json
import shutil
import subprocess
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Self

import yaml

from hangwatch_testing.ports import free_port
from tests.chart.rendering import ROOT, prometheus_rule_groups

ROUTES = ROOT / "examples" / "alertmanager" / "routes.yaml"


def rule_file(directory: Path, interval: str = "1s", fors: dict[str, str] | None = None) -> Path:
    """The chart's rules with every group's interval set to `interval` and the `for` of
    the alerts in `fors` replaced (test-only overrides; the rest is the chart's)."""
    groups = copy.deepcopy(prometheus_rule_groups())
    for group in groups:
        group["interval"] = interval
        for rule in group["rules"]:
            rule["for"] = (fors or {}).get(rule["alert"], rule["for"])
    path = directory / "rules.yaml"
    path.write_text(yaml.safe_dump({"groups": groups}, sort_keys=False))
    return path


class _Daemon:
    """A server process on a free loopback port, ready when GET /-/ready answers 200."""

    name = ""

    def __init__(self, workdir: Path, command: list[str]) -> None:
        self.workdir = workdir
        self.command = command
        self.log = workdir / f"{self.name}.log"
        self.process: subprocess.Popen[bytes] | None = None

    @staticmethod
    def binary(name: str, package: str) -> str:
        found = shutil.which(name)
        if found is None:
            raise RuntimeError(f"{name} is missing: apt-get install {package}")
        return found

    def __enter__(self) -> Self:
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

    @property
    def url(self) -> str:
        raise NotImplementedError

    def _wait_ready(self, timeout_seconds: float) -> None:
        deadline = time.monotonic() + timeout_seconds
        while time.monotonic() < deadline:
            assert self.process is not None
            if self.process.poll() is not None:
                raise RuntimeError(f"{self.name} exited: {self.log.read_text()[-2000:]}")
            try:
                with urllib.request.urlopen(f"{self.url}/-/ready", timeout=2) as rsp:
                    if rsp.status == 200:
                        return
            except (urllib.error.URLError, ConnectionError):
                pass
            time.sleep(0.2)
        raise RuntimeError(f"{self.name} not ready: {self.log.read_text()[-2000:]}")


@dataclass(frozen=True)
class Job:
    """One scrape job: its targets (address, target labels) and whether the scraped
    series' own labels win over the target's (`honor_labels`)."""

    targets: list[tuple[str, dict[str, str]]]
    honor_labels: bool = False


class PrometheusServer(_Daemon):
    """`prometheus` scraping `targets` (job name -> [(address, labels)] or a `Job`) with
    `rule_file`, sending alerts to `alertmanager` (host:port) when given."""

    name = "prometheus"

    def __init__(
        self,
        workdir: Path,
        rule_file: Path,
        targets: Mapping[str, list[tuple[str, dict[str, str]]] | Job],
        interval: str = "1s",
        alertmanager: str | None = None,
    ) -> None:
        self.port = free_port()
        jobs = {name: t if isinstance(t, Job) else Job(t) for name, t in targets.items()}
        config: dict[str, Any] = {
            "global": {"scrape_interval": interval, "evaluation_interval": interval},
            "rule_files": [str(rule_file)],
            "scrape_configs": [
                {
                    "job_name": name,
                    "honor_labels": job.honor_labels,
                    "static_configs": [
                        {"targets": [address], "labels": labels} for address, labels in job.targets
                    ],
                }
                for name, job in jobs.items()
            ],
        }
        if alertmanager is not None:
            config["alerting"] = {
                "alertmanagers": [{"static_configs": [{"targets": [alertmanager]}]}]
            }
        (workdir / "prometheus.yml").write_text(yaml.safe_dump(config))
        command = [
            self.binary("prometheus", "prometheus"),
            f"--config.file={workdir / 'prometheus.yml'}",
            f"--storage.tsdb.path={workdir / 'data'}",
            f"--web.listen-address=127.0.0.1:{self.port}",
            "--log.level=warn",
        ]
        super().__init__(workdir, command)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def api(self, path: str) -> Any:
        """GET /api/v1/<path> and return its `data`."""
        with urllib.request.urlopen(f"{self.url}/api/v1/{path}", timeout=5) as rsp:
            body = json.loads(rsp.read())
        assert body["status"] == "success", body
        return body["data"]

    def query(self, expr: str) -> list[dict[str, Any]]:
        """The instant vector of a PromQL expression (each {metric, value})."""
        result: list[dict[str, Any]] = self.api("query?query=" + urllib.parse.quote(expr))["result"]
        return result

    def alerts(self, name: str) -> list[dict[str, Any]]:
        """Pending and firing alerts with this alertname."""
        found: list[dict[str, Any]] = [
            a for a in self.api("alerts")["alerts"] if a["labels"]["alertname"] == name
        ]
        return found


class AlertmanagerServer(_Daemon):
    """`prometheus-alertmanager` (Debian's package) with `config`, no cluster peers."""

    name = "alertmanager"

    def __init__(self, workdir: Path, config: dict[str, Any]) -> None:
        self.port = free_port()
        path = workdir / "alertmanager.yml"
        path.write_text(yaml.safe_dump(config, sort_keys=False))
        command = [
            self.binary("prometheus-alertmanager", "prometheus-alertmanager"),
            f"--config.file={path}",
            f"--storage.path={workdir / 'alertmanager-data'}",
            f"--web.listen-address=127.0.0.1:{self.port}",
            "--cluster.listen-address=",  # no gossip port: a single, private instance
            "--log.level=warn",
        ]
        super().__init__(workdir, command)

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def url(self) -> str:
        return f"http://{self.address}"


@dataclass(frozen=True)
class Notification:
    """One webhook notification as it arrived: the path it was posted to, its body and
    when (time.time())."""

    path: str
    body: dict[str, Any]
    received: float


class WebhookReceiver:
    """An HTTP server on 127.0.0.1 keeping every JSON body POSTed to it."""

    def __init__(self) -> None:
        self.notifications: list[Notification] = []
        self._lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length))
                with receiver._lock:
                    receiver.notifications.append(Notification(self.path, body, time.time()))
                self.send_response(200)
                self.end_headers()

            def log_message(self, *_args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.server.server_port}{path}"

    def received(self) -> list[Notification]:
        with self._lock:
            return list(self.notifications)

    def __enter__(self) -> WebhookReceiver:
        self.thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=10)


def example_routes(receiver: WebhookReceiver) -> dict[str, Any]:
    """examples/alertmanager/routes.yaml, its receivers posting to `receiver`/<name>, its
    group_wait and group_interval 1 s (test-only; it ships 30 s and 5 m)."""
    config: dict[str, Any] = yaml.safe_load(ROUTES.read_text())
    config["route"] |= {"group_wait": "1s", "group_interval": "1s"}
    for entry in config["receivers"]:
        for hook in entry["webhook_configs"]:
            hook["url"] = receiver.url(f"/{entry['name']}")
    return config


@contextlib.contextmanager
def alert_pipeline(
    workdir: Path, jobs: Mapping[str, list[tuple[str, dict[str, str]]] | Job]
) -> Iterator[tuple[PrometheusServer, WebhookReceiver]]:
    """Prometheus (the chart's rules, groups evaluated every second) scraping `jobs`,
    alerting through Alertmanager (the example routes) to a webhook receiver; all three
    stopped on exit."""
    with contextlib.ExitStack() as stack:
        receiver = stack.enter_context(WebhookReceiver())
        alertmanager = stack.enter_context(AlertmanagerServer(workdir, example_routes(receiver)))
        prometheus = stack.enter_context(
            PrometheusServer(workdir, rule_file(workdir), jobs, alertmanager=alertmanager.address)
        )
        yield prometheus, receiver
