"""The sidecar's HTTP server: /metrics (Prometheus text), /status (JSON), /healthz.

Served from a daemon thread on one port; handlers only read the latest published
`SidecarState`, so they never wait for a probe. /healthz answers 200 while the
evaluation loop keeps completing rounds (503 once it has been silent for three
probe intervals plus the probe timeouts), so Kubernetes restarts a wedged sidecar.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from hangwatch_sidecar.metrics import registry_for
from hangwatch_sidecar.state import SidecarState, status_document


class StatusServer:
    """Serves the three endpoints for the state returned by `get_state`."""

    def __init__(
        self,
        get_state: Callable[[], SidecarState],
        port: int,
        stale_after_seconds: float,
        host: str = "0.0.0.0",
    ) -> None:
        self.get_state = get_state
        self.stale_after_seconds = stale_after_seconds
        self.registry = registry_for(get_state)
        self.httpd = ThreadingHTTPServer((host, port), self._handler())
        self.httpd.daemon_threads = True
        self.port = int(self.httpd.server_address[1])
        self._thread = threading.Thread(
            target=self.httpd.serve_forever, daemon=True, name="hangwatch-http"
        )

    def healthy(self) -> tuple[bool, str]:
        state = self.get_state()
        reference = state.evaluated_ts or state.started_ts
        age = time.time() - reference
        if age > self.stale_after_seconds:
            return False, f"no evaluation round for {age:.0f} s"
        return True, "ok"

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                return

            def _send(self, code: int, body: bytes, content_type: str) -> None:
                self.send_response(code)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self) -> None:
                path = self.path.split("?", 1)[0]
                if path == "/metrics":
                    self._send(200, generate_latest(server.registry), CONTENT_TYPE_LATEST)
                elif path == "/status":
                    doc = status_document(server.get_state())
                    self._send(200, json.dumps(doc, default=str).encode(), "application/json")
                elif path == "/healthz":
                    ok, why = server.healthy()
                    self._send(200 if ok else 503, (why + "\n").encode(), "text/plain")
                else:
                    self._send(404, b"not found: try /metrics, /status or /healthz\n", "text/plain")

        return Handler

    def start(self) -> None:
        self._thread.start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
