"""The field corpus's librdkafka rows: confluent-kafka at the affected releases, inside Spark.

Each client is a PySpark task writing through a plain `confluent_kafka.Producer` (no
hangwatch wrapper, no telemetry) at the report's release, in a virtualenv of its own
(`hangwatch_testing.clients.build`, `testing/clients/incidents/confluent-kafka`), on a
real executor (`spark_task`); the sidecar reads Spark's view of that executor and the
executor's sockets. `message.timeout.ms` is 30 s (the default is 300 s) so that a
message the client cannot deliver surfaces as its own error within one watch.

Both reports are open upstream (no release has the fix), so each control is the same
client at the same release through the same kind of disturbance without the report's
trigger: a controller pause shorter than `broker.session.timeout.ms` (no broker fenced),
a network drop shorter than the request timeout.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from pathlib import Path

from hangwatch_lab import Lab
from hangwatch_testing.clients.build import python_command
from hangwatch_testing.clients.runs import TOPIC
from hangwatch_testing.incidents.model import FieldCase, Incident, Where

PROGRAM = "librdkafka_producer.py"
RATE = "20"
CLIENT_CONF = ("message.timeout.ms=30000",)


def in_spark(client: str) -> Callable[[str, Path], list[str]]:
    """A row's `command`: `client`'s program as a PySpark task (`spark_task`)."""

    def command(bootstrap: str, scratch: Path) -> list[str]:
        python, program = python_command(client, PROGRAM)
        return [
            *(sys.executable, "-m", "hangwatch_testing.incidents.spark_task"),
            *("--python", python, "--program", program, "--work", str(scratch / "spark")),
            *("--brokers", bootstrap, "--topic", TOPIC, "--rate", RATE),
            *(arg for setting in CLIENT_CONF for arg in ("-X", setting)),
        ]

    return command


CONTROLLER_PAUSE_SECONDS = 12.0
"""The report's trigger: the KRaft controller paused longer than the session timeout
(the lab's `broker.session.timeout.ms` is 1.5 s, Kafka's default 9 s: 12 s exceeds both)."""
CONTROL_PAUSE_SECONDS = 1.0
"""The control's pause: shorter than the lab's 1.5 s session timeout, no broker fenced."""

LEADER_MINUS_ONE = FieldCase(
    "librdkafka-5430",
    "librdkafka",
    "https://github.com/confluentinc/librdkafka/issues/5430",
    affected="2.12.1",
    fixed=None,
    control=(
        "confluent-kafka 2.12.1 through a controller pause shorter than the session "
        "timeout (no broker fenced): the fix (PR 5431) is in no release"
    ),
    trigger=(
        "the KRaft controller pauses longer than broker.session.timeout.ms; on resuming "
        "it fences the broker, whose partitions have leader -1 until its next heartbeat "
        "(one broker beside a controller-only node: with replicas on other brokers the "
        "leaders move instead)"
    ),
    symptom=(
        "a leader -1 update is skipped: the partitions stay without leader information, "
        "produce() accepts and every message times out, for good"
    ),
    restart_helps=True,
    where=Where.SPARK,
)


def _pause(seconds: float) -> Callable[[Lab, Path], None]:
    return lambda lab, _: lab.pause_controllers(seconds)


NETWORK_DROP_SECONDS = 65.0
"""The report's trigger: a network drop longer than the request timeout (librdkafka's
`socket.timeout.ms`, 60 s by default)."""
CONTROL_DROP_SECONDS = 10.0

NEVER_RESUMES = FieldCase(
    "librdkafka-5080",
    "librdkafka",
    "https://github.com/confluentinc/librdkafka/issues/5080",
    affected="2.8.0",
    fixed=None,
    control=(
        "confluent-kafka 2.8.0 through a drop shorter than the request timeout (10 s): "
        "the report is open, no release is said to fix it"
    ),
    trigger=(
        "the leader's port drops every packet for longer than the request timeout "
        "(65 s), then the drop is removed"
    ),
    symptom=(
        "about 1 producer in 5 never resumes: its queue stays full while the broker is "
        "up and other producers write"
    ),
    restart_helps=True,
    where=Where.SPARK,
)


def _leader_dropped(seconds: float) -> Callable[[Lab, Path], None]:
    """Every packet to and from the broker leading partition 0 dropped for `seconds`
    (iptables DROP, the lab's blackhole), then the rule removed: a lasting fault
    (`Incident.lasting_fault`), run beside the watch."""

    def inject(lab: Lab, _: Path) -> None:
        metadata = lab.admin().list_topics(TOPIC, timeout=10)
        broker = int(metadata.topics[TOPIC].partitions[0].leader)
        lab.blackhole(broker)
        try:
            time.sleep(seconds)
        finally:
            lab.restore(broker)

    return inject


AFTER_FAULT_SECONDS = 50.0
"""How long a row watches past its fault: a client without the bug writes again within
its reconnect backoff (at most `reconnect.backoff.max.ms`, 10 s) and a metadata refresh,
and what it had queued meanwhile fails within its 30 s `message.timeout.ms`; the 20 s
after that (`scoring.HUNG_TAIL_SECONDS`) tell a client that writes from one that never
does again."""


def _row(case: FieldCase, control: bool, fault: str, inject: Callable[[Lab, Path], None],
         fault_seconds: float, brokers: int = 3, controllers: int = 0,
         lasting: bool = False) -> Incident:  # fmt: skip
    client = f"confluent-kafka-{case.affected}"
    return Incident(
        case.id + ("-control" if control else ""),
        client,
        f"confluent-kafka {case.affected} (librdkafka) in a PySpark task"
        + (" (control: without the trigger)" if control else ""),
        fault,
        in_spark(client),
        inject,
        watch_seconds=fault_seconds + AFTER_FAULT_SECONDS,
        control=control,
        where=Where.SPARK,
        case=case,
        brokers=brokers,
        controllers=controllers,
        lasting_fault=lasting,
    )


ROWS: tuple[Incident, ...] = (
    _row(
        LEADER_MINUS_ONE, False,
        f"the controller paused {CONTROLLER_PAUSE_SECONDS:g} s (SIGSTOP): the broker fenced",
        _pause(CONTROLLER_PAUSE_SECONDS), CONTROLLER_PAUSE_SECONDS, brokers=1, controllers=1,
    ),
    _row(
        LEADER_MINUS_ONE, True,
        f"the controller paused {CONTROL_PAUSE_SECONDS:g} s (below the session timeout)",
        _pause(CONTROL_PAUSE_SECONDS), CONTROL_PAUSE_SECONDS, brokers=1, controllers=1,
    ),
    _row(
        NEVER_RESUMES, False,
        f"the leader's port dropped {NETWORK_DROP_SECONDS:g} s (iptables DROP), then back",
        _leader_dropped(NETWORK_DROP_SECONDS), NETWORK_DROP_SECONDS, lasting=True,
    ),
    _row(
        NEVER_RESUMES, True,
        f"the leader's port dropped {CONTROL_DROP_SECONDS:g} s, then back",
        _leader_dropped(CONTROL_DROP_SECONDS), CONTROL_DROP_SECONDS, lasting=True,
    ),
)  # fmt: skip
