"""The running lab's control endpoint and state file, so other shells can drive it.

`hangwatch lab up` serves a tiny JSON HTTP API on 127.0.0.1 (`ControlServer`) and
records `{bootstrap, pid, control_url, ...}` in a state file. `hangwatch lab fault`,
`status` and `down` find the lab through that file (`ControlClient`) without extra
arguments. Every fault goes through `apply_fault`, the one place that maps a fault
name and its parameters onto `Lab` methods.
"""

from __future__ import annotations

import json
import os
import threading
import urllib.error
import urllib.request
from dataclasses import asdict
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from hangwatch.errors import HangwatchError, LabError, UsageError
from hangwatch_lab.lab import Lab

FAULTS = (
    "stall-produce",
    "down",
    "blackhole",
    "refuse",
    "unresponsive",
    "rtt",
    "election",
    "request-errors",
    "leader",
    "shrink",
    "restore",
)
"""Fault names accepted by `hangwatch lab fault` and the control endpoint."""

REQUEST_TIMEOUT_SECONDS = 300.0
"""A fault on the kafka engine can wait for a restarted broker or a reassignment."""


def default_state_path() -> Path:
    """`$XDG_RUNTIME_DIR/hangwatch/lab.json`, or `/tmp/hangwatch-<uid>/lab.json`."""
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    base = Path(runtime) / "hangwatch" if runtime else Path(f"/tmp/hangwatch-{os.getuid()}")
    return base / "lab.json"


def _need(params: dict[str, Any], key: str, kind: str) -> Any:
    value = params.get(key)
    if value is None:
        raise UsageError(f"fault {kind} needs --{key.replace('_', '-')}")
    return value


def apply_fault(lab: Lab, kind: str, params: dict[str, Any]) -> None:
    """Apply fault `kind` with `params` (broker, ms, topic, seconds, ...) to `lab`."""
    if kind == "down":
        lab.down(int(_need(params, "broker", kind)), params.get("how"))
    elif kind in ("blackhole", "refuse", "unresponsive", "stall-produce"):
        getattr(lab, kind.replace("-", "_"))(int(_need(params, "broker", kind)))
    elif kind == "rtt":
        lab.rtt(int(_need(params, "broker", kind)), int(_need(params, "ms", kind)))
    elif kind == "election":
        lab.election(
            str(_need(params, "topic", kind)),
            float(_need(params, "seconds", kind)),
            params.get("how"),
        )
    elif kind == "request-errors":
        lab.request_errors(
            str(params.get("api") or "produce"),
            str(params.get("error") or "NOT_LEADER_FOR_PARTITION"),
            int(params.get("count") or 1),
        )
    elif kind == "leader":
        lab.move_leader(
            str(_need(params, "topic", kind)),
            int(_need(params, "partition", kind)),
            int(_need(params, "broker", kind)),
        )
    elif kind == "shrink":
        lab.shrink(int(_need(params, "to", kind)), str(params.get("dead") or "blackhole"))
    elif kind == "restore":
        if params.get("all"):
            lab.restore(None)
        elif params.get("broker") is not None:
            lab.restore(int(params["broker"]))
        else:
            raise UsageError("restore needs --broker N or --all")
    else:
        raise UsageError(f"unknown fault {kind!r} (choose from {', '.join(FAULTS)})")


class ControlServer:
    """Serves GET /status, POST /fault and POST /down for one lab on 127.0.0.1."""

    def __init__(self, lab: Lab) -> None:
        self.lab = lab
        self.stop_requested = threading.Event()
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self._thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                return

            def _reply(self, code: int, body: dict[str, Any]) -> None:
                data = json.dumps(body).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                if self.path != "/status":
                    self._reply(404, {"error": f"no such endpoint {self.path}"})
                    return
                self._reply(200, asdict(server.lab.status()))

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                try:
                    body = json.loads(self.rfile.read(length) or b"{}")
                    if self.path == "/down":
                        server.stop_requested.set()
                    elif self.path == "/fault":
                        apply_fault(server.lab, str(body.get("kind")), body)
                    else:
                        self._reply(404, {"error": f"no such endpoint {self.path}"})
                        return
                except (HangwatchError, ValueError, TypeError) as exc:
                    code = 400 if isinstance(exc, UsageError | ValueError | TypeError) else 409
                    self._reply(code, {"error": str(exc)})
                    return
                self._reply(200, {"ok": True, "status": asdict(server.lab.status())})

        return Handler

    def start(self) -> None:
        self._thread.start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def write_state(path: Path, lab: Lab, control_url: str) -> None:
    """Record the running lab in `path` (created with its directory, mode 0600)."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    state = {
        "bootstrap": lab.bootstrap,
        "pid": os.getpid(),
        "engine": lab.engine,
        "mock_pid": lab.mock_pid,
        "broker_pids": {str(b): pid for b, pid in lab.broker_pids().items()},
        "control_url": control_url,
        "brokers": {str(b.id): b.address for b in lab.brokers.values()},
        "topics": lab.topics,
    }
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(state, indent=2))
    tmp.chmod(0o600)
    tmp.replace(path)


def remove_state(path: Path) -> None:
    """Remove the state file if it still names this process."""
    try:
        if json.loads(path.read_text()).get("pid") == os.getpid():
            path.unlink()
    except (OSError, ValueError):
        pass


class ControlClient:
    """Talks to the lab recorded in a state file."""

    def __init__(self, state_path: Path) -> None:
        try:
            self.state: dict[str, Any] = json.loads(state_path.read_text())
        except FileNotFoundError:
            raise LabError(
                f"no lab is running (no state file {state_path}); start one with 'hangwatch lab up'"
            ) from None
        except (OSError, ValueError) as exc:
            raise LabError(f"cannot read lab state file {state_path}: {exc}") from None
        self.url = str(self.state.get("control_url", ""))

    def _request(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.url + path, data=data, method=method)
        req.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(req, timeout=REQUEST_TIMEOUT_SECONDS) as resp:
                return json.loads(resp.read())
        except urllib.error.HTTPError as exc:
            message = json.loads(exc.read() or b"{}").get("error", str(exc))
            raise (UsageError if exc.code == 400 else LabError)(message) from None
        except (urllib.error.URLError, OSError) as exc:
            raise LabError(
                f"the lab recorded in the state file (pid {self.state.get('pid')}) does not "
                f"answer at {self.url}: {exc}"
            ) from None

    def status(self) -> dict[str, Any]:
        result: dict[str, Any] = self._request("GET", "/status")
        return result

    def fault(self, kind: str, params: dict[str, Any]) -> dict[str, Any]:
        result: dict[str, Any] = self._request("POST", "/fault", {"kind": kind, **params})
        return result

    def down(self) -> None:
        self._request("POST", "/down", {})
