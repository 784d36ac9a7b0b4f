"""Records real socket snapshots for the socket view's unit tests (tests/sidecar/socket_snapshots).

Runs the lab, a plain confluent-kafka producer process (no wrapper) and the sidecar's
`SocketReader`, injects one fault per recording and writes every snapshot of the
producer's connections to brokers as JSON, with the broker address book and the times
of the fault. The unit tests replay them through the pure classifier, so what they
judge is what the kernel really reported. Needs root (iptables) like the lab's tests.

Two recordings run on Apache Kafka (the lab's `kafka` engine) whose brokers close
connections idle 3 s (`connections.max.idle.ms`), the producer refreshing its metadata
every 4 s: `idle_closed` (a 2 s burst, then the producer stays open and writes nothing:
what a stuck client leaves on the wire) and `writes_through_idle_closes` (one write every
5 s, each on a connection opened again). They also keep the smallest write the brokers
take (`smallest_write`, from the sidecar's probe of their Fetch floor).

    python scripts/record_socket_snapshots.py [--out tests/sidecar/socket_snapshots] [NAME ...]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hangwatch_lab import Lab
from hangwatch_sidecar.probe.endpoints import probe_endpoint
from hangwatch_sidecar.probe.settings import ProbeSettings, parse_endpoint
from hangwatch_sidecar.sockets.classify import min_write_bytes
from hangwatch_sidecar.sockets.owners import ProcessRoot
from hangwatch_sidecar.sockets.reader import Narrowing, SocketReader

TOPIC = "t"


def _producer(bootstrap: str, *extra: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [
            *(sys.executable, "-m", "hangwatch_testing.clients.plain_producer"),
            *("--bootstrap", bootstrap, "--topic", TOPIC, *extra),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def _everywhere(fault: Callable[[Lab, int], None]) -> Callable[[Lab], None]:
    def apply(lab: Lab) -> None:
        for broker in lab.brokers:
            fault(lab, broker)

    return apply


def _leader(lab: Lab) -> int:
    """The broker leading partition 0 of the topic (the producer writes to it)."""
    metadata = lab.admin().list_topics(TOPIC, timeout=10)
    return int(metadata.topics[TOPIC].partitions[0].leader)


def record(
    name: str,
    out: Path,
    fault: Callable[[Lab], None] | None,
    seconds: float,
    producer_args: tuple[str, ...] = (),
    fault_first: bool = False,
    broker_configs: dict[str, str] | None = None,
) -> None:
    """One recording; with `broker_configs`, on Apache Kafka with those broker properties."""
    print(f"recording {name} ({seconds:.0f} s after the baseline)", file=sys.stderr, flush=True)
    options: dict[str, Any] = {"broker_configs": broker_configs} if broker_configs else {}
    engine = "kafka" if broker_configs else "mock"
    with Lab(brokers=3, topics={TOPIC: 3}, engine=engine, **options) as lab:
        brokers = {b.address: f"broker {i}" for i, b in lab.brokers.items()}
        floors = [
            probe_endpoint(parse_endpoint(address), ProbeSettings()).fetch_min_version
            for address in brokers
        ]
        fault_at = None
        if fault is not None and fault_first:
            fault(lab)
            fault_at = 0.0
        proc = _producer(lab.bootstrap, *producer_args)
        # the producer's own connections: on Apache Kafka the brokers' replica fetchers
        # connect to the same addresses
        reader = SocketReader(Narrowing(process=ProcessRoot(pid=proc.pid)), exclude_own=False)
        snapshots = []
        try:
            start = time.monotonic()
            while time.monotonic() - start < 3.0 + seconds:
                now = time.monotonic() - start
                if fault is not None and fault_at is None and now >= 3.0:
                    fault(lab)
                    fault_at = round(now, 3)
                snap = reader.snapshot(round(now, 3), list(brokers))
                snapshots.append(
                    {
                        "at": snap.at,
                        "attempt_fails": snap.attempt_fails,
                        "connections": [dataclasses.asdict(c) for c in snap.connections],
                    }
                )
                time.sleep(0.5)
        finally:
            proc.terminate()
            proc.wait(10)
    doc = {
        "name": name,
        "brokers": brokers,
        "fault_at": fault_at,
        "smallest_write": min_write_bytes(floors),
        "snapshots": snapshots,
    }
    (out / f"{name}.json").write_text(json.dumps(doc, indent=1) + "\n")


IDLE_CLOSE = {"connections.max.idle.ms": "3000"}
REFRESH = ("-X", "topic.metadata.refresh.interval.ms=4000")
RECORDINGS: dict[str, Callable[[Path], None]] = {
    "healthy": lambda out: record("healthy", out, None, 6.0),
    "idle": lambda out: record(
        "idle", out, None, 8.0, ("--burst-seconds", "1", "--idle-seconds", "100")
    ),
    "stall_produce": lambda out: record("stall_produce", out, _everywhere(Lab.stall_produce), 8.0),
    "blackhole": lambda out: record("blackhole", out, lambda lab: lab.blackhole(_leader(lab)), 5.0),
    "blackhole_all": lambda out: record("blackhole_all", out, _everywhere(Lab.blackhole), 5.0),
    "connect_blackholed": lambda out: record(
        "connect_blackholed", out, _everywhere(Lab.blackhole), 3.0, fault_first=True
    ),
    "idle_closed": lambda out: record(
        "idle_closed",
        out,
        None,
        30.0,
        ("--burst-seconds", "2", "--idle-seconds", "1000", *REFRESH),
        broker_configs=IDLE_CLOSE,
    ),
    "writes_through_idle_closes": lambda out: record(
        "writes_through_idle_closes",
        out,
        None,
        30.0,
        ("--rate", "0.2", *REFRESH),
        broker_configs=IDLE_CLOSE,
    ),
}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", default="tests/sidecar/socket_snapshots")
    parser.add_argument("names", nargs="*", help=f"recordings to make: {', '.join(RECORDINGS)}")
    args = parser.parse_args()
    if unknown := [n for n in args.names if n not in RECORDINGS]:
        parser.error(f"no recording named {', '.join(unknown)} (one of {', '.join(RECORDINGS)})")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    for name in args.names or RECORDINGS:
        RECORDINGS[name](out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
