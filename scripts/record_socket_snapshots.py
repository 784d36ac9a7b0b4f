"""Records real socket snapshots for the socket view's unit tests (tests/sidecar/socket_snapshots).

Runs the lab, a plain confluent-kafka producer process (no wrapper) and the sidecar's
`SocketReader`, injects one fault per recording and writes every snapshot of the
producer's connections to brokers as JSON, with the broker address book and the times
of the fault. The unit tests replay them through the pure classifier, so what they
judge is what the kernel really reported. Needs root (iptables) like the lab's tests.

    python scripts/record_socket_snapshots.py [--out tests/sidecar/socket_snapshots]
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

from hangwatch_lab import Lab
from hangwatch_sidecar.sockets.reader import SocketReader

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
) -> None:
    print(f"recording {name} ({seconds:.0f} s after the baseline)", file=sys.stderr, flush=True)
    with Lab(brokers=3, topics={TOPIC: 3}) as lab:
        brokers = {b.address: f"broker {i}" for i, b in lab.brokers.items()}
        reader = SocketReader(exclude_own=False)
        fault_at = None
        if fault is not None and fault_first:
            fault(lab)
            fault_at = 0.0
        proc = _producer(lab.bootstrap, *producer_args)
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
    doc = {"name": name, "brokers": brokers, "fault_at": fault_at, "snapshots": snapshots}
    (out / f"{name}.json").write_text(json.dumps(doc, indent=1) + "\n")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", default="tests/sidecar/socket_snapshots")
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    record("healthy", out, None, 6.0)
    record("idle", out, None, 8.0, ("--burst-seconds", "1", "--idle-seconds", "100"))
    record("stall_produce", out, _everywhere(Lab.stall_produce), 8.0)
    record("blackhole", out, lambda lab: lab.blackhole(_leader(lab)), 5.0)
    record("blackhole_all", out, _everywhere(Lab.blackhole), 5.0)
    record(
        "connect_blackholed",
        out,
        _everywhere(Lab.blackhole),
        3.0,
        fault_first=True,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
