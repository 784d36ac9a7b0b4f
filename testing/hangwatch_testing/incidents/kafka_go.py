"""The field corpus's kafka-go rows: segmentio/kafka-go issue 451, a producer stuck on a TCP
connection error.

The report (kafka-go v0.3.5-v0.3.6 suspected, fixed in v0.3.7): a `Writer` with kafka-go's
defaults whose broker is stopped (`docker stop`) and comes back; the writer retries once,
then `WriteMessages` blocks forever. By the code (testing/clients/incidents/kafka-go-v0.3,
read in the module cache): v0.3.6's partition writer retries a failed batch itself
(`writeWithRetries`, up to `MaxAttempts` 10 times) on the connection that just failed,
and answers every attempt on the caller's result channel, which holds one answer per
message; once `WriteMessages` has returned the first error, the third attempt's answer
has nowhere to go and the partition writer blocks for good. Every later write routed to
that partition waits for it. v0.3.5's writer.go is v0.3.7's (the retry is
`WriteMessages`'s own, on a fresh connection): the report's suspicion of v0.3.5 does not
hold, and its row is a second control.

The fault: the broker leading partition 0 stops as `docker stop` stops it (SIGTERM,
Kafka's controlled shutdown) and starts again 10 s later: its connections close, the
partitions move to the other brokers and back. The client writes one message per
`WriteMessages` call with key "Key" (the report's program), about one call a second
(kafka-go's one-second batch timeout).
"""

from __future__ import annotations

import time
from pathlib import Path

from hangwatch_lab import Lab
from hangwatch_testing.clients.runs import TOPIC
from hangwatch_testing.incidents.model import FieldCase, Incident, Where, field_row, go_client
from hangwatch_testing.incidents.seeds import WRITE_INTERVAL

DOWN_SECONDS = 10.0
"""How long the leader stays stopped before it is started again ("then back")."""


def leader_of(lab: Lab, partition: int = 0) -> int:
    """The broker leading `partition` of the lab's topic, as the cluster's metadata says."""
    metadata = lab.admin().list_topics(TOPIC, timeout=10)
    return int(metadata.topics[TOPIC].partitions[partition].leader)


def leader_stopped_then_back(lab: Lab, _: Path) -> None:
    """The leader of partition 0 stopped (SIGTERM: Kafka's controlled shutdown, what
    `docker stop` does), started again DOWN_SECONDS later and waited for."""
    broker = leader_of(lab)
    lab.down(broker)
    time.sleep(DOWN_SECONDS)
    lab.restore(broker)


CASE = FieldCase(
    "kafka-go#451",
    "kafka-go",
    "https://github.com/segmentio/kafka-go/issues/451",
    affected="v0.3.6",
    fixed="v0.3.7",
    control="v0.3.7, the fix (the retry moved back into WriteMessages, on a fresh "
    "connection); and v0.3.5, which the report suspected but whose writer.go is v0.3.7's",
    trigger="a TCP connection error: the broker stopped (docker stop), then back",
    symptom="WriteMessages retries once, then blocks forever",
    restart_helps=True,
    where=Where.POD,
)


FAULT = (
    f"the leader of partition 0 stopped (SIGTERM), started again {DOWN_SECONDS:g} s later",
    leader_stopped_then_back,
)


def _row(name: str, version: str, control: bool, note: str) -> Incident:
    return field_row(
        CASE,
        name,
        f"kafka-go-{version}",
        f"kafka-go {version} Writer, kafka-go's defaults, one message per WriteMessages{note}",
        FAULT,
        go_client(f"kafka-go-{version}", "-topic", TOPIC, "-rate", "1", "-batch", "1"),
        watch_seconds=60,
        sidecar_args=WRITE_INTERVAL,
        control=control,
    )


ROWS = (
    _row("KG451", "v0.3.6", False, ""),
    _row("KG451-control", "v0.3.7", True, " (the fix)"),
    _row("KG451-v0.3.5", "v0.3.5", True, " (suspected by the report; its writer is v0.3.7's)"),
)
