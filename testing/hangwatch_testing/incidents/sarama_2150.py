"""The field corpus's sarama rows: IBM/sarama issue 2150, a producer that hangs after its
leader broker was restarted a few times.

The report (sarama v1.31.0 and later, believed fixed in v1.33.0; the related
"AsyncProducer stops flushing retry buffers for specific partitions", issue 2175): since
v1.31 the async producer keeps several requests in flight to a broker
(`Net.MaxOpenRequests`, 5 by default). When a broker restarts, a partition's retries may
reach a newly made broker producer together with the partition's internal `fin` marker,
which that producer takes for a record: the marker is written to the topic (a record
with neither key nor value) and answered as a success. The partition then waits for a
`fin` that never comes back and buffers every later message; a `SyncProducer` hangs at
once, its success loop blocked sending the marker's answer to a channel nobody owns
(PR 2182, in v1.33.0, retries such a marker instead).

The client (testing/clients/incidents/sarama, `-mode concurrent`): a `SyncProducer` with
sarama's defaults (Version 2.1.0, the oldest protocol Kafka 4 serves), shared by 8
goroutines sending one message at a time, 50 a second between them, so that several
requests are in flight to each leader. The fault: the broker leading partition 0 stopped
(SIGTERM) and started again, 4 times, 8 s apart (each time whichever broker leads
partition 0 then): a rolling restart's steps, back to back.

sarama's issue 2377 (an idempotent batch left unanswered after an election, v1.29.1 to
v1.37.2, fixed in v1.38.0) is the seed incident S2, replayed in `seeds`.
"""

from __future__ import annotations

import time
from pathlib import Path

from hangwatch_lab import Lab
from hangwatch_testing.clients.runs import TOPIC
from hangwatch_testing.incidents.kafka_go import leader_of
from hangwatch_testing.incidents.model import FieldCase, Incident, Where, field_row, go_client
from hangwatch_testing.incidents.seeds import WRITE_INTERVAL

CONCURRENT = ("-topic", TOPIC, "-mode", "concurrent", "-rate", "50", "-senders", "8")
"""The client's flags: 8 goroutines sharing one SyncProducer, 50 messages a second."""
RESTARTS = 4
RESTART_GAP_SECONDS = 8.0
"""Between one restarted broker being back and the next stop."""


def leader_restarted_times(lab: Lab, _: Path) -> None:
    """RESTARTS times: the broker leading partition 0 stopped (SIGTERM, Kafka's controlled
    shutdown), started again and waited for, then RESTART_GAP_SECONDS of quiet."""
    for _round in range(RESTARTS):
        broker = leader_of(lab)
        lab.down(broker)
        lab.restore(broker)
        time.sleep(RESTART_GAP_SECONDS)


CASE = FieldCase(
    "sarama#2150",
    "sarama",
    "https://github.com/IBM/sarama/issues/2150",
    affected="v1.32.0",
    fixed="v1.33.0",
    control="v1.33.0, the fix (PR 2182: a fin marker reaching a new broker producer is "
    "retried, never written)",
    trigger="the leader broker restarted a few times while several requests are in flight",
    symptom="the internal fin marker is written as an empty record; the partition stops "
    "flushing, a SyncProducer blocks for good",
    restart_helps=True,
    where=Where.POD,
)


FAULT = (
    f"the leader of partition 0 restarted (SIGTERM, started again) {RESTARTS} times, "
    f"{RESTART_GAP_SECONDS:g} s apart",
    leader_restarted_times,
)


def _row(name: str, version: str, control: bool, note: str) -> Incident:
    return field_row(
        CASE,
        name,
        f"sarama-{version}",
        f"sarama {version} SyncProducer, sarama's defaults, 8 goroutines sending{note}",
        FAULT,
        go_client(f"sarama-{version}", *CONCURRENT),
        watch_seconds=120,
        sidecar_args=WRITE_INTERVAL,
        control=control,
    )


ROWS = (
    _row("SA2150", "v1.32.0", False, ""),
    _row("SA2150-control", "v1.33.0", True, " (the fix)"),
    _row("SA2150-v1.31.0", "v1.31.0", False, " (the first affected release)"),
)
