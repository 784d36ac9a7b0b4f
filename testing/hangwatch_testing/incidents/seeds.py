"""The five seed incidents (S0-S4, docs/incidents.md) as replayed rows, and their controls.

Each names a program of `testing/clients/incidents` at the incident's version, how it is
started, the incident's fault on the lab's `kafka` engine and the Kafka release the
client can talk to (the lab's default, the current 4.x, unless the row names another:
the 0.8.2 and 0.11 clients run on 3.9, the last line that serves clients older than
2.1). Some run with a sidecar setting of their own (S2-interval*, S2-idle*: a declared
write interval; S4-dump: the local JVM's thread dumps), or brokers of their own (S2-idle*:
idle connections closed after 3 s).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path

from hangwatch_lab import Lab, kafkajars
from hangwatch_testing.clients.build import java_command
from hangwatch_testing.clients.runs import TOPIC
from hangwatch_testing.incidents.model import Incident, go_client

S3_REFRESH_MS = 10_000
"""S3's `topic.metadata.refresh.interval.ms`: the write-up ran the default 10 minutes; 10 s
makes several periodic refreshes happen within one watch (the refresh itself is the
client's, unchanged)."""
WRITE_INTERVAL_SECONDS = 10
"""S2's declared write interval (`--expected-write-interval-seconds`, a policy's
`detection.expectedWriteIntervalSeconds`): the client writes 5 batches a second, so a
policy saying "at least every 10 s" is generous; an election's pause (the fixed client's
2.9-4.3 s) stays well inside it."""
WRITE_INTERVAL = ("--expected-write-interval-seconds", str(WRITE_INTERVAL_SECONDS))
IDLE_CLOSE_MS = 3000
"""The S2-idle rows' brokers close a connection idle this long (`connections.max.idle.ms`,
Kafka's default 10 minutes): well inside the declared write interval, so a stuck client's
connections are gone long before its silence could be measured on them."""
METADATA_REFRESH = "7s"
"""The S2-idle rows' sarama `Metadata.RefreshFrequency` (sarama's default 10 minutes):
several periodic refreshes within one watch, each on a connection the client opens again
(the brokers closed the last one)."""
IDLE_CONTROL_RATE = "0.2"
"""S2-idle-control's batches per second: one every 5 s, half the declared write interval
and longer than the brokers' idle close, so each write goes out on a connection opened
again for it."""
LOCAL_DUMPS = ("--jvm-thread-dumps", "true", "--spark-interval-seconds", "1")
"""The sidecar's thread dumps of the client's own JVM, one per probe interval (1 s: the
runs' intervals are short, SidecarTiming)."""


def _all_blackholed(lab: Lab, _: Path) -> None:
    for broker in list(lab.brokers):
        lab.blackhole(broker)


def _shrunk(dead: str) -> Callable[[Lab, Path], None]:
    """The cluster shrunk to 2 brokers the way operators do (partitions moved away, the
    removed brokers stopped for good), their addresses left `dead` (blackhole: SYNs
    dropped; frozen: TCP accepted, never answered) in the client's bootstrap list."""
    return lambda lab, _: lab.shrink(2, dead=dead)


def _s1_most_dead(version: str) -> Incident:
    """S1 as its write-up had it, most bootstrap entries dead: 5 brokers beside 3
    controller-only nodes, shrunk to 2, so 3 of the 5 addresses the client was given are
    dead while the quorum stays whole. kafka-go `version`: v0.4.8 the write-up's, v0.4.9
    (the fix of its cached metadata error) the control."""
    control = version == "v0.4.9"
    return Incident(
        "S1-most-dead" + ("-control" if control else ""),
        f"kafka-go-{version}",
        f"kafka-go {version} Writer (full bootstrap list of 5)" + (" (the fix)" if control else ""),
        "cluster shrunk 5 -> 2 brokers (3 controllers apart), the 3 removed brokers' "
        "addresses blackholed",
        go_client(f"kafka-go-{version}", "-rate", "5", "-batch", "5"),
        _shrunk("blackhole"),
        watch_seconds=90,
        control=control,
        brokers=5,
        controllers=3,
    )


def _election(lab: Lab, _: Path) -> None:
    lab.election(TOPIC, 2.0)


def _leader_stopped(lab: Lab, _: Path) -> None:
    """The broker leading partition 0 stops (Kafka's controlled shutdown, as in one step of
    a rolling restart): its partitions' leaders move to the other replicas."""
    metadata = lab.admin().list_topics(TOPIC, timeout=10)
    lab.down(int(metadata.topics[TOPIC].partitions[0].leader))


def _host_crashed(lab: Lab, _: Path) -> None:
    """The last broker's host crashes: its address stops answering (SYNs dropped, as for
    a dead IP), then its process stops (the controller moves its leaders). In this order
    a client never sees the port refuse, as it would not after a real crash."""
    broker = max(lab.brokers)
    lab.blackhole(broker)
    lab.down(broker)


def _callback_waits(_: Lab, scratch: Path) -> None:
    (scratch / "sync-send-in-callback").touch()


def _s4_command(bootstrap: str, scratch: Path) -> list[str]:
    """S4's own client: kafka-clients 0.11.0.3 whose callback calls `send().get()` once the
    trigger file exists."""
    return java_command(
        "kafka-clients-0.11.0.3",
        "S4Producer",
        *(bootstrap, TOPIC, "200", str(scratch / "sync-send-in-callback")),
    )


def _s2(
    version: str,
    fault: str,
    inject: Callable[[Lab, Path], None],
    sidecar_args: tuple[str, ...] = (),
    kafka_version: str | None = None,
) -> Incident:
    """S2 through `fault` with sarama `version`: v1.37.2 has the bug, v1.38.0 (the fix) is
    the control. Ids: S2, S2-control (the election), S2-stop, S2-stop-control; with the
    declared write interval, S2-interval and S2-interval-control."""
    control = version == "v1.38.0"
    name = (
        "S2"
        + ("-stop" if inject is _leader_stopped else "")
        + ("-interval" if sidecar_args else "")
        + ("-control" if control else "")
    )
    return Incident(
        name,
        f"sarama-{version}",
        f"sarama {version} idempotent AsyncProducer, batches of 10"
        + (" (the fix)" if control else "")
        + (f", policy: writes at least every {WRITE_INTERVAL_SECONDS} s" if sidecar_args else ""),
        fault,
        go_client(f"sarama-{version}", "-mode", "idempotent", "-rate", "5", "-batch", "10"),
        inject,
        watch_seconds=60,
        control=control,
        sidecar_args=sidecar_args,
        kafka_version=kafka_version,
    )


ELECTION = "a real 2 s leader election (leader frozen, fenced)"
SEEDS: tuple[Incident, ...] = (
    Incident(
        "S0",
        "sarama-v1.37.2",
        "sarama v1.37.2 SyncProducer (Retry.Max=1, WriteTimeout 3 s)",
        "every broker blackholed after a healthy start",
        go_client("sarama-v1.37.2", "-mode", "sync", "-rate", "10"),
        _all_blackholed,
        watch_seconds=150,
    ),
    Incident(
        "S1",
        "kafka-go-v0.4.8",
        "kafka-go v0.4.8 Writer (full bootstrap list)",
        "cluster shrunk 3 -> 2, the removed broker's address blackholed",
        go_client("kafka-go-v0.4.8", "-rate", "5", "-batch", "5"),
        _shrunk("blackhole"),
        watch_seconds=60,
    ),
    Incident(
        "S1-frozen",
        "kafka-go-v0.4.8",
        "kafka-go v0.4.8 Writer (full bootstrap list)",
        "cluster shrunk 3 -> 2, the removed broker frozen (accepts, never answers)",
        go_client("kafka-go-v0.4.8", "-rate", "5", "-batch", "5"),
        _shrunk("frozen"),
        watch_seconds=60,
    ),
    _s1_most_dead("v0.4.8"),
    _s1_most_dead("v0.4.9"),
    # the same shrink, then fresh clients (replay_started_after): the write-up's
    # cached-error bug needs the client's first metadata request to fail
    *(
        dataclasses.replace(
            _s1_most_dead(version), id=name, watch_seconds=30, client_after_fault=True
        )
        for name, version in (("S1-fresh", "v0.4.8"), ("S1-fresh-control", "v0.4.9"))
    ),
    *(
        _s2(version, fault, inject)
        for fault, inject in (
            (ELECTION, _election),
            ("the leader stopped (controlled shutdown: a rolling restart's step)", _leader_stopped),
        )
        for version in ("v1.37.2", "v1.38.0")
    ),
    # On Kafka 3.9.2, where their figures were measured (v1.37.2 hung in 3 of 5 elections);
    # on the lab's 4.4.0 v1.37.2 went on through 3 elections in a row (one test run), and
    # a client that does not hang tests nothing of the write interval.
    *(
        _s2(version, ELECTION, _election, WRITE_INTERVAL, kafkajars.legacy_version())
        for version in ("v1.37.2", "v1.38.0")
    ),
    # S2-interval again, the brokers closing idle connections after 3 s and sarama
    # refreshing its metadata every 7 s: the stuck client is left with no connection but
    # those its refreshes open; its control writes one batch every 5 s, each through a new
    # connection.
    *(
        dataclasses.replace(
            _s2(version, ELECTION, _election, WRITE_INTERVAL, kafkajars.legacy_version()),
            id="S2-idle" + ("-control" if version == "v1.38.0" else ""),
            label=(
                f"sarama {version} idempotent AsyncProducer, batches of 10"
                + (" every 5 s (the fix)" if version == "v1.38.0" else "")
                + f", metadata refreshed every {METADATA_REFRESH}, policy: writes at least "
                f"every {WRITE_INTERVAL_SECONDS} s; brokers close connections idle "
                f"{IDLE_CLOSE_MS} ms"
            ),
            command=go_client(
                f"sarama-{version}",
                *("-mode", "idempotent", "-batch", "10"),
                *("-rate", IDLE_CONTROL_RATE if version == "v1.38.0" else "5"),
                *("-metadata-refresh", METADATA_REFRESH),
            ),
            broker_configs=(("connections.max.idle.ms", str(IDLE_CLOSE_MS)),),
        )
        for version in ("v1.37.2", "v1.38.0")
    ),
    Incident(
        "S3",
        "kafka_2.11-0.8.2.2",
        "Kafka 0.8.2.2 Scala producer (metadata.broker.list = all)",
        "one broker's host crashed (stopped, address blackholed)",
        lambda b, _: java_command(
            "kafka_2.11-0.8.2.2", "S3Producer", b, TOPIC, "5", str(S3_REFRESH_MS)
        ),
        _host_crashed,
        watch_seconds=60,
        # Produce v0: Kafka 4 refuses it (UNSUPPORTED_VERSION; KIP-896, checked by
        # tests/lab/test_kafka_engine_versions.py), so every send fails after 3 tries.
        kafka_version=kafkajars.legacy_version(),
    ),
    Incident(
        "S4",
        "kafka-clients-0.11.0.3",
        "kafka-clients 0.11.0.3 (send().get() in the callback)",
        "the callback's synchronous send, cluster healthy",
        _s4_command,
        _callback_waits,
        watch_seconds=40,
        # Outside Kafka 4's compatibility matrix (clients older than 2.1 are "not
        # compatible"), though its Produce v3 is still served: kept on the last line
        # that supports it.
        kafka_version=kafkajars.legacy_version(),
    ),
    Incident(
        "S4-dump",
        "kafka-clients-0.11.0.3",
        "kafka-clients 0.11.0.3 (send().get() in the callback), the sidecar's local JVM "
        "thread dumps",
        "the callback's synchronous send, cluster healthy",
        _s4_command,
        _callback_waits,
        watch_seconds=40,
        kafka_version=kafkajars.legacy_version(),  # as S4's
        sidecar_args=LOCAL_DUMPS,
    ),
    Incident(
        "S4-control",
        "kafka-clients-3.9.2",
        "kafka-clients 3.9.2 at work (callbacks that only report, some send().get() and flush())",
        "none: the trigger file is touched, the client ignores it",
        lambda b, _: java_command("kafka-clients-3.9.2", "HealthyProducer", b, TOPIC, "200"),
        _callback_waits,
        watch_seconds=40,
        control=True,
    ),
)
