"""Loads the recorded socket snapshots (scripts/record_socket_snapshots.py) for replay."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hangwatch_sidecar.sockets.classify import MIN_WRITE_BYTES, SocketClassifier
from hangwatch_sidecar.sockets.types import (
    SocketObservation,
    SocketSnapshot,
    TcpConnection,
    TcpState,
)

RECORDINGS = Path(__file__).with_name("socket_snapshots")


@dataclass(frozen=True)
class Recording:
    name: str
    brokers: dict[str, str]
    fault_at: float | None
    snapshots: tuple[SocketSnapshot, ...]
    smallest_write: int = MIN_WRITE_BYTES
    """The smallest write the recording's brokers take (its probe of their Fetch floor)."""


def connection(raw: dict[str, Any]) -> TcpConnection:
    return TcpConnection(**{**raw, "state": TcpState(raw["state"])})


def load(name: str) -> Recording:
    doc = json.loads((RECORDINGS / f"{name}.json").read_text())
    snapshots = tuple(
        SocketSnapshot(
            at=s["at"],
            connections=tuple(connection(c) for c in s["connections"]),
            attempt_fails=s["attempt_fails"],
        )
        for s in doc["snapshots"]
    )
    smallest = int(doc.get("smallest_write", MIN_WRITE_BYTES))
    return Recording(doc["name"], doc["brokers"], doc["fault_at"], snapshots, smallest)


def replay(
    recording: Recording, stall_seconds: float = 5.0, every: int = 1
) -> list[SocketObservation]:
    """The classifier's observations of the recording, of every `every`-th snapshot (a
    slower round cadence than the recording's)."""
    classifier = SocketClassifier()
    return [
        classifier.observe(
            s, recording.brokers, stall_seconds, smallest_write=recording.smallest_write
        )
        for s in recording.snapshots[::every]
    ]
