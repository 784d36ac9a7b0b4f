"""What one replayed row is: its client, its fault, where it runs, the report it replays.

An `Incident` is one client (a name of `hangwatch_testing.clients.build.CLIENTS`, at its
version) started by `command` on the lab's `kafka` engine, the fault `inject` applies,
how long the run watches, and the lab and sidecar it needs. A control is a row whose
client is expected NOT to hang.

A row of the field corpus also names its `FieldCase`: the public report, the client
family, the release replayed as affected and the release that fixed it (None while it is
open upstream: the control is then another honest one, `FieldCase.control` says which),
the trigger and the symptom as published, whether a restart helps, and `where` the
client runs: as a producer pod (the opt-in label: the sidecar with a declared write
interval, no Spark view) or inside Spark (a PySpark task, or Spark's own sink, on a real
executor, the sidecar with Spark's view).
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from hangwatch_lab import Lab
from hangwatch_testing.clients.build import binary


class Where(enum.Enum):
    """Where a row's client runs, so what the sidecar can see of it."""

    PROCESS = "a process"
    """A plain process beside the sidecar, the sidecar's flags the row's own (the seeds)."""
    POD = "a producer pod"
    """The opt-in producer label: the sidecar with the row's declared write interval
    (`--expected-write-interval-seconds`), no Spark view."""
    SPARK = "inside Spark"
    """A task on a real Spark executor (a PySpark task's client, or Spark's own sink's
    Java client); the sidecar with Spark's view of that executor."""


LAB_CA = "lab-ca.pem"
"""A TLS row's (`Incident.tls`) copy of the lab's CA certificate in its scratch
directory, where its command finds it."""
DECLARED_INTERVAL = "--expected-write-interval-seconds"
"""The sidecar's flag of a declared write interval (a policy's
`detection.expectedWriteIntervalSeconds`, the opt-in producer label's)."""
FAMILIES = ("librdkafka", "kafka-clients", "kafka-go", "sarama", "kafkajs")
"""The client families of the field corpus (`make test` runs one row of each)."""


@dataclass(frozen=True)
class FieldCase:
    """One published producer hang of the field corpus, as its report has it."""

    id: str
    family: str
    """One of FAMILIES."""
    report: str
    """The public report's link (an issue, a pull request, a JIRA)."""
    affected: str
    """The client release replayed as affected (the package's own version string)."""
    fixed: str | None
    """The release that fixed it; None while it is open upstream."""
    control: str
    """What the control row runs and why it is an honest control (the fixed release; for
    a bug open upstream, e.g. the same client without the trigger)."""
    trigger: str
    symptom: str
    restart_helps: bool
    """Whether restarting the producer recovers it (so whether a restart-class verdict
    may be right, given positive evidence)."""
    where: Where

    def __post_init__(self) -> None:
        if self.family not in FAMILIES:
            raise ValueError(f"{self.id}: unknown family {self.family!r} (one of {FAMILIES})")
        if self.where is Where.PROCESS:
            raise ValueError(f"{self.id}: a field case runs in a producer pod or inside Spark")


@dataclass(frozen=True)
class Incident:
    """One row as replayed here: its client, how it is started, its fault."""

    id: str
    client: str
    """The client's name in hangwatch_testing.clients.build (client and version)."""
    label: str
    fault: str
    command: Callable[[str, Path], list[str]]
    """(bootstrap, scratch directory) -> the client's argv."""
    inject: Callable[[Lab, Path], None]
    """Applies the fault to the lab (scratch directory: S4's trigger file)."""
    watch_seconds: float
    """How long the run watches after the fault (long enough for the client's own
    timeouts to surface an error, when it has any)."""
    control: bool = False
    """A control: the client is expected NOT to hang."""
    kafka_version: str | None = None
    """The lab's Kafka release for this client (None: the lab's default, the current 4.x)."""
    sidecar_args: tuple[str, ...] = ()
    """More flags of the sidecar for this incident (a declared write interval, the local
    JVM's thread dumps)."""
    client_after_fault: bool = False
    """The fault comes first, the client starts on the faulted cluster
    (`replay_started_after`; `replay` makes one such start)."""
    brokers: int = 3
    controllers: int = 0
    """The lab's controller-only nodes (0: every broker is also a controller, so a shrink
    must keep a majority of the brokers)."""
    broker_configs: tuple[tuple[str, str], ...] = ()
    """More properties of every broker of the row's lab (`KafkaProcesses.broker_configs`),
    e.g. the brokers closing idle connections early (`connections.max.idle.ms`)."""
    where: Where = Where.PROCESS
    case: FieldCase | None = None
    """The field corpus's report this row replays (None: a seed)."""
    lasting_fault: bool = False
    """The fault takes a while (a broker stopped and started again, maybe several times):
    `inject` runs beside the watch, which goes on reading the sidecar and the client, and
    the replay waits for it to end before the lab closes."""
    tls: str = ""
    """The client and the sidecar reach the brokers' TLS listeners (the lab's `tls`:
    `trusted`, or `untrusted`: a certificate they do not trust, until the fault fixes
    it), trusting the lab's CA (`LAB_CA` in the scratch directory)."""
    starts_failing: bool = False
    """The client starts on a cluster that refuses it (its report's trigger, e.g. a
    certificate it does not trust): no healthy baseline; the replay waits for the
    client's first error instead, and `inject` then mends the cluster (the fault is the
    mending: the report's hang is a client that never recovers from the refusal)."""
    named_brokers: bool = False
    """The client and the sidecar reach the brokers by name (the lab's `hostnames`: a
    listener advertised by hostname), each resolving the names through the lab's hosts
    file as its /etc/hosts (`hangwatch_lab.kafka.names.in_hosts_namespace`), as a pod does
    through its own: a broker moved to a new address (`Lab.move`) is found again by
    whoever looks its name up again."""

    def __post_init__(self) -> None:
        if self.case is not None and self.where is not self.case.where:
            raise ValueError(
                f"{self.id}: runs {self.where.value}, its case {self.case.where.value}"
            )
        if self.where is Where.POD and DECLARED_INTERVAL not in self.sidecar_args:
            raise ValueError(
                f"{self.id}: a producer pod declares its write interval ({DECLARED_INTERVAL})"
            )


def go_client(client: str, *args: str) -> Callable[[str, Path], list[str]]:
    """A row's `command` running Go client `client` (the incidents' Go programs take the
    bootstrap list as `-brokers`) with `args`."""
    return lambda bootstrap, _: [str(binary(client)), "-brokers", bootstrap, *args]


def field_row(
    case: FieldCase,
    id: str,
    client: str,
    label: str,
    fault: tuple[str, Callable[[Lab, Path], None]],
    command: Callable[[str, Path], list[str]],
    *,
    watch_seconds: float,
    sidecar_args: tuple[str, ...],
    control: bool = False,
    brokers: int = 3,
    controllers: int = 0,
    named_brokers: bool = False,
    tls: str = "",
    starts_failing: bool = False,
) -> Incident:
    """A row of field case `case`, run where the case runs, its `fault` (what it is, how
    it is applied) a lasting one (`Incident.lasting_fault`); `brokers`, `controllers`,
    `named_brokers`, `tls`, `starts_failing`: its lab's shape and start (`Incident`'s)."""
    return Incident(
        id,
        client,
        label,
        fault[0],
        command,
        fault[1],
        watch_seconds=watch_seconds,
        control=control,
        sidecar_args=sidecar_args,
        where=case.where,
        case=case,
        lasting_fault=True,
        brokers=brokers,
        controllers=controllers,
        named_brokers=named_brokers,
        tls=tls,
        starts_failing=starts_failing,
    )
