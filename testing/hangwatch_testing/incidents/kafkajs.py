"""The field corpus's kafkajs rows: tulios/kafkajs issue 918, a producer that hangs in its
own disconnect after a connection error while a request is in flight.

The report (kafkajs 1.14.0, fixed in 1.15.0 by PRs 944 and 956; the same deadlock in
issue 943): a producer sending without pause, the broker's port blocked for a while;
the connection fails and kafkajs disconnects it, and disconnecting waits for the
connection's in-flight requests to settle, which only happens after the disconnect
(1.14.0's `onError` and `onTimeout` handlers reject them after awaiting it). The wait
never ends: every `send()` waiting on those requests never settles, and each later
request on the destroyed socket fails into the same wait ("Waiting for pending
requests", forever). 1.15.0 rejects the requests first.

How the port is blocked decides whether the connection fails at all: with kafkajs 1.x's
defaults (`enforceRequestTimeout` off) a port whose packets are dropped merely delays
every answer until the block ends (measured: 45 s of drops both ways, 1.14.0 and 1.15.0
resumed at once), and the socket errs only when the kernel gives the retransmissions up
(about 15 minutes). A port that refuses (packets answered with a TCP reset, a firewall's
REJECT) resets the connection at its next request: `read ECONNRESET` with a Produce in
flight, the report's path. The fault here: every broker's port refuses for 20 s
(`Lab.refuse`), then serves again.

The client (testing/clients/incidents/kafkajs, `producer.js`): kafkajs' defaults, one
`send()` of one message every 200 ms, the next only once the last one settled (so a
`send()` that never settles stops the service's writes, as the report's did).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from hangwatch_lab import Lab
from hangwatch_testing.clients.build import node_command
from hangwatch_testing.clients.runs import TOPIC
from hangwatch_testing.incidents.model import FieldCase, Incident, Where, field_row
from hangwatch_testing.incidents.seeds import WRITE_INTERVAL

REFUSED_SECONDS = 20.0


def every_port_refused_then_back(lab: Lab, _: Path) -> None:
    """Every broker's port answers with TCP resets for REFUSED_SECONDS, then serves again."""
    brokers = list(lab.brokers)
    for broker in brokers:
        lab.refuse(broker)
    time.sleep(REFUSED_SECONDS)
    for broker in brokers:
        lab.restore(broker)


CASE = FieldCase(
    "kafkajs#918",
    "kafkajs",
    "https://github.com/tulios/kafkajs/issues/918",
    affected="1.14.0",
    fixed="1.15.0",
    control="1.15.0, the fix (PRs 944 and 956: in-flight requests rejected before the "
    "disconnect waits for them)",
    trigger="the broker's port blocked while producing: the connection errs with a "
    "request in flight",
    symptom="disconnect waits for in-flight requests that never settle; send() never settles",
    restart_helps=True,
    where=Where.POD,
)


def _client(version: str) -> Callable[[str, Path], list[str]]:
    return lambda bootstrap, _: node_command(
        f"kafkajs-{version}", "producer.js", "-brokers", bootstrap, "-topic", TOPIC, "-rate", "5"
    )


FAULT = (
    f"every broker's port refused (TCP reset) for {REFUSED_SECONDS:g} s, then served again",
    every_port_refused_then_back,
)


def _row(name: str, version: str, control: bool, note: str) -> Incident:
    return field_row(
        CASE,
        name,
        f"kafkajs-{version}",
        f"kafkajs {version} producer, kafkajs' defaults, one send() at a time{note}",
        FAULT,
        _client(version),
        watch_seconds=60,
        sidecar_args=WRITE_INTERVAL,
        control=control,
    )


ROWS = (
    _row("KJ918", "1.14.0", False, ""),
    _row("KJ918-control", "1.15.0", True, " (the fix)"),
)
