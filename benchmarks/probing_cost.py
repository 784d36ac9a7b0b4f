"""Probing cost: what one sidecar costs each broker in steady state, before vs after.

One lab (3 brokers; Apache Kafka unless `--engine mock`), one plain confluent-kafka
producer writing steadily (it talks to the brokers that lead its partitions, as a real
executor does), and two real
`hangwatch sidecar` processes side by side in the same run, watching the same pod:

- before: `--probe-mode fresh --socket-view false` (a new connection to every broker
  every round, a new metadata client for every metadata fetch: the old behaviour);
- after: the defaults (passive-first probing with the socket view).

Each sidecar runs with its own group id, so the kernel counts each one's new connections
per broker independently of the sidecar's own bookkeeping: an iptables chain in OUTPUT
matches `--syn` packets to each broker port per `--gid-owner` (SYN retransmissions would
count twice; on a healthy loopback there are none). Requests come from each sidecar's
/status (ApiVersions per broker, metadata fetches). After a warm-up, the steady state is
measured for `--seconds` at the default 5 s probe interval and 30 s metadata interval,
then extrapolated to 1,000 sidecars. Prints the machine first. Needs root (iptables,
setpriv).

    python benchmarks/probing_cost.py [--seconds 330] [--warmup-seconds 15] [--engine kafka]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from machine import add_engine_option, describe, unwind_on_sigterm

from hangwatch.child_processes import stop_process
from hangwatch_demo.sidecars import announced_port
from hangwatch_lab import Lab
from hangwatch_testing.processes import sidecar_command
from hangwatch_testing.waiting import wait_for

CHAIN = f"HWBENCH-{os.getpid()}"
GROUPS = {"before": 64001, "after": 64002}
"""Group id each sidecar runs with (the user stays root: the interpreter may live under a
home directory other users cannot read)."""
MODES = {"before": ["--probe-mode", "fresh", "--socket-view", "false"], "after": []}


def _iptables(*args: str) -> str:
    return subprocess.run(
        ["iptables", "-w", "5", *args], capture_output=True, text=True, check=True
    ).stdout


def _count_rules(ports: list[int]) -> None:
    _iptables("-N", CHAIN)
    _iptables("-I", "OUTPUT", "1", "-j", CHAIN)
    for gid in GROUPS.values():
        for port in ports:
            _iptables(
                *("-A", CHAIN, "-p", "tcp", "--syn", "-d", "127.0.0.1", "--dport", str(port)),
                *("-m", "owner", "--gid-owner", str(gid), "-j", "RETURN"),
            )


def _remove_rules() -> None:
    subprocess.run(["iptables", "-w", "5", "-D", "OUTPUT", "-j", CHAIN], check=False)
    subprocess.run(["iptables", "-w", "5", "-F", CHAIN], check=False)
    subprocess.run(["iptables", "-w", "5", "-X", CHAIN], check=False)


def _syn_counts() -> dict[tuple[int, int], int]:
    """(gid, broker port) -> SYN packets counted so far."""
    counts = {}
    for line in _iptables("-L", CHAIN, "-v", "-x", "-n").splitlines()[2:]:
        fields = line.split()
        gid = int(fields[-1])  # "... owner GID match 64001"
        port = int(next(f for f in fields if f.startswith("dpt:"))[4:])
        counts[(gid, port)] = int(fields[0])
    return counts


def _sidecar(name: str, bootstrap: str, telemetry: Path, log: Path) -> subprocess.Popen[bytes]:
    gid = GROUPS[name]
    return subprocess.Popen(
        [
            *("setpriv", f"--regid={gid}", "--clear-groups"),
            *sidecar_command(bootstrap, "t", telemetry, *MODES[name]),
        ],
        stdout=subprocess.DEVNULL,
        stderr=log.open("w"),
        env={**os.environ, "PYTHONPATH": _python_path()},
    )


def _python_path() -> str:
    """This interpreter's import path without benchmarks/ (the sidecar imports none of
    the benchmarks' modules, and none of them may shadow a module it does import)."""
    here = Path(__file__).resolve().parent
    return os.pathsep.join(p for p in sys.path if p and Path(p).resolve() != here)


def _port(log: Path, proc: subprocess.Popen[bytes]) -> int:
    port: int = wait_for(
        lambda: announced_port(log),
        30.0,
        "the sidecar's port",
        give_up=lambda: proc.poll() is not None,
        context=lambda: log.read_text(errors="replace")[-1000:],
    )
    return port


def _status(port: int) -> dict[str, Any]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/status", timeout=5) as r:
        doc: dict[str, Any] = json.load(r)
        return doc


def _requests(doc: dict[str, Any]) -> tuple[int, int]:
    side = doc["sidecar"]
    return sum(side.get("probe_requests", {}).values()), int(side.get("metadata_requests", 0))


def measure(seconds: float, warmup: float, engine: str) -> None:
    with (
        Lab(brokers=3, topics={"t": 6}, engine=engine) as lab,
        tempfile.TemporaryDirectory() as tmp,
        ExitStack() as stack,
    ):
        ports = [b.port for b in lab.brokers.values()]
        Path(tmp).chmod(0o755)
        telemetry = Path(tmp) / "telemetry"
        telemetry.mkdir()
        producer = subprocess.Popen(
            [
                *(sys.executable, "-m", "hangwatch_testing.clients.plain_producer"),
                *("--bootstrap", lab.bootstrap, "--topic", "t", "--rate", "50"),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        stack.callback(stop_process, producer)
        stack.callback(_remove_rules)
        _count_rules(ports)
        procs, sidecar_ports = {}, {}
        for name in GROUPS:
            log = Path(tmp) / f"{name}.log"
            procs[name] = _sidecar(name, lab.bootstrap, telemetry, log)
            stack.callback(stop_process, procs[name], 10)
            sidecar_ports[name] = _port(log, procs[name])
        print(f"  ... warm-up {warmup:.0f} s", file=sys.stderr, flush=True)
        time.sleep(warmup)
        syn0 = _syn_counts()
        req0 = {n: _requests(_status(p)) for n, p in sidecar_ports.items()}
        t0 = time.monotonic()
        while time.monotonic() - t0 < seconds:
            time.sleep(min(10.0, seconds - (time.monotonic() - t0)))
            print(f"  ... {time.monotonic() - t0:.0f}/{seconds:.0f} s", file=sys.stderr, flush=True)
        elapsed = time.monotonic() - t0
        syn1 = _syn_counts()
        docs = {n: _status(p) for n, p in sidecar_ports.items()}
        req1 = {n: _requests(d) for n, d in docs.items()}
    _report(ports, elapsed, syn0, syn1, req0, req1, docs, engine)


def _report(
    ports: list[int],
    elapsed: float,
    syn0: dict[tuple[int, int], int],
    syn1: dict[tuple[int, int], int],
    req0: dict[str, tuple[int, int]],
    req1: dict[str, tuple[int, int]],
    docs: dict[str, dict[str, Any]],
    engine: str,
) -> None:
    brokers = len(ports)
    print(
        f"\nsteady state over {elapsed:.0f} s, 3 brokers (lab engine {engine}), "
        "probe interval 5 s, metadata 30 s"
    )
    header = (
        f"{'':8} {'new conns/broker':>17} {'conns/s per broker':>19} {'at 1,000 sidecars':>18} "
        f"{'ApiVersions/broker':>19} {'metadata':>9} {'requests/s per broker':>22} "
        f"{'at 1,000 sidecars':>18}  verdict"
    )
    print(header)
    rates = {}
    for name, gid in GROUPS.items():
        conns = [syn1.get((gid, p), 0) - syn0.get((gid, p), 0) for p in ports]
        per_broker = sum(conns) / brokers
        api = (req1[name][0] - req0[name][0]) / brokers
        meta = req1[name][1] - req0[name][1]
        conn_rate = per_broker / elapsed
        req_rate = (api + meta / brokers) / elapsed
        rates[name] = (conn_rate, req_rate)
        print(
            f"{name:8} {per_broker:>17.1f} {conn_rate:>19.4f} {conn_rate * 1000:>16.1f}/s "
            f"{api:>19.1f} {meta:>9d} {req_rate:>22.4f} {req_rate * 1000:>16.1f}/s  "
            f"{docs[name]['verdict']}"
        )
    (cb, rb), (ca, ra) = rates["before"], rates["after"]
    print(
        f"after/before: new connections {ca / cb if cb else float('nan'):.3f}, "
        f"requests {ra / rb if rb else float('nan'):.3f}"
    )
    print(
        "brokers after: "
        + "; ".join(b["detail"] or b["reachability"] for b in docs["after"]["brokers"])
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--seconds",
        type=float,
        default=330.0,
        help="330: one fresh-connect interval (300 s) included",
    )
    parser.add_argument("--warmup-seconds", type=float, default=15.0)
    add_engine_option(parser, "kafka")
    args = parser.parse_args()
    if os.geteuid() != 0 or shutil.which("iptables") is None or shutil.which("setpriv") is None:
        print("probing_cost: needs root, iptables and setpriv", file=sys.stderr)
        return 3
    print(f"machine: {describe()}")
    measure(args.seconds, args.warmup_seconds, args.engine)
    return 0


if __name__ == "__main__":
    unwind_on_sigterm()
    sys.exit(main())
