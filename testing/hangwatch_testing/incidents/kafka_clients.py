"""The field corpus's Java kafka-clients rows: KAFKA-7755, a broker back on a new IP address
that the producer never reaches again; and KAFKA-20237 (apache/kafka PR 21715), an
idempotent producer stuck initializing after its first TLS handshake failed.

The report (kafka-clients 2.1.0, fixed in 2.1.1): on Kubernetes a broker's pod restarts
with a new IP address under the same name, and a 2.1.0 client goes on dialing the old
address for good. By the code (javap of the resolved jars): 2.1.0's per-node connection
state (`ClusterConnectionStates.NodeConnectionState`, KIP-302's) resolves the broker's
name once, when the node is first dialled, and keeps that address list (`final`) for the
life of the producer; 2.1.1's keeps the name and resolves it again once the addresses it
had are used up. Every batch for the moved broker then expires after
`delivery.timeout.ms`, again and again, while the broker serves everyone else.

The lab (`Incident.named_brokers`): its broker serves clients on a listener advertised
by hostname (`kafka-1.hangwatch.test`), bound on a loopback address of its own, the name
in the lab's hosts file; the client and the sidecar each see that file as their
/etc/hosts (a mount namespace of their own: a pod's view), so both find the broker again
by name once it moved, if they look its name up again. The fault (`Lab.move`): the
broker stopped (SIGTERM, Kafka's controlled shutdown), started again on a new loopback
address under the same name, the hosts file saying so. One broker, beside a
controller-only node, so that every partition's leader is on the broker that moves (with
several brokers the leaders move to those still up, and a rollout that moves every one
of them, as a StatefulSet's does, takes as many restarts).

The client (testing/clients/incidents/java/field, `FieldProducer`): a `KafkaProducer`
with the client's defaults but `delivery.timeout.ms` 30 s (default 120 s: a batch it
cannot deliver fails within one watch), 5 sends a second over every partition. The
JVM's own DNS cache keeps a name's answer 30 s by default (no security manager):
`-Dsun.net.inetaddr.ttl=1` for both releases, so that what the control finds is the
client's doing, not the cache's.

KAFKA-20237 (open upstream; the later PR 23547 too): an idempotent producer (the default
since 3.0) whose first connection fails its TLS handshake takes its InitProducerId
request from the queue and never sends it (`Sender.runOnce` catches the
AuthenticationException, `TransactionManager.authenticationFailed` finds the queue
empty): it stays initializing, even once the certificate is fixed. The lab
(`Incident.tls`, `tls="untrusted"`): the broker's TLS listener presents a certificate
signed by a CA the client is not given; the client trusts the lab's CA. The client starts
refused (`Incident.starts_failing`), then the fault is the mending (`Lab.fix_certificates`:
the trusted keystore, the broker restarted). The client is the same program over TLS at
4.4.0, and at 3.9.2 (the release Spark's Kafka sink pins); the control is 4.4.0 with
`enable.idempotence=false`, no release having the fix.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from hangwatch_lab import Lab
from hangwatch_testing.clients.build import java_command
from hangwatch_testing.clients.runs import TOPIC
from hangwatch_testing.incidents.model import LAB_CA, FieldCase, Incident, Where, field_row
from hangwatch_testing.incidents.seeds import WRITE_INTERVAL

PROGRAM = "FieldProducer"
RATE = "5"
JVM_DNS = ("-Dsun.net.inetaddr.ttl=1",)
"""The JVM's DNS cache: a name's answer kept 1 s (the default 30 s)."""
CLIENT_CONF = ("delivery.timeout.ms=30000",)


def java_client(client: str, *conf: str) -> Callable[[str, Path], list[str]]:
    """A row's `command`: `FieldProducer` on kafka-clients release `client`, with the
    producer properties `conf` (`{scratch}` in one: the row's scratch directory)."""
    return lambda bootstrap, scratch: java_command(
        client, PROGRAM, bootstrap, TOPIC, RATE, *CLIENT_CONF,
        *(setting.format(scratch=scratch) for setting in conf), jvm=JVM_DNS,
    )  # fmt: skip


def broker_moved(lab: Lab, _: Path) -> None:
    """Every broker (the one) back on a new address under its name, one after another."""
    for broker in list(lab.brokers):
        lab.move(broker)


NEW_ADDRESS = FieldCase(
    "KAFKA-7755",
    "kafka-clients",
    "https://issues.apache.org/jira/browse/KAFKA-7755",
    affected="2.1.0",
    fixed="2.1.1",
    control="2.1.1, the fix (a node's name resolved again once its addresses are used up)",
    trigger="a broker comes back on a new IP address under the same name (a pod restarted)",
    symptom="the client keeps dialing the old address; batches expire every "
    "delivery.timeout.ms, for good",
    restart_helps=True,
    where=Where.POD,
)

FAULT = (
    "the broker stopped (SIGTERM), started again on a new address under the same name",
    broker_moved,
)
WATCH_SECONDS = 60.0
"""The move (seconds), then the client's 30 s delivery timeout and the 20 s that tell a
client that writes from one that never does again (`scoring.HUNG_TAIL_SECONDS`)."""


def _row(name: str, version: str, control: bool, note: str) -> Incident:
    return field_row(
        NEW_ADDRESS,
        name,
        f"kafka-clients-{version}",
        f"kafka-clients {version} KafkaProducer, the client's defaults but "
        f"delivery.timeout.ms 30 s{note}",
        FAULT,
        java_client(f"kafka-clients-{version}"),
        watch_seconds=WATCH_SECONDS,
        sidecar_args=WRITE_INTERVAL,
        control=control,
        brokers=1,
        controllers=1,
        named_brokers=True,
    )


TLS_CONF = (
    "security.protocol=SSL",
    "ssl.truststore.type=PEM",
    f"ssl.truststore.location={{scratch}}/{LAB_CA}",
    "delivery.timeout.ms=35000",
)
"""The client over TLS, trusting the lab's CA (PEM), Kafka's hostname check on; its
delivery timeout 35 s (4.x refuses less than `linger.ms`, 5 ms since 4.0, plus the 30 s
request timeout)."""

INIT_AFTER_TLS = FieldCase(
    "KAFKA-20237",
    "kafka-clients",
    "https://github.com/apache/kafka/pull/21715",
    affected="4.4.0",
    fixed=None,
    control="kafka-clients 4.4.0 with enable.idempotence=false through the same trigger: "
    "the fix (PR 21715, or PR 23547) is in no release, and the bug is the idempotent "
    "producer's InitProducerId",
    trigger="the producer's first TLS handshake fails (the broker's certificate signed by a "
    "CA it does not trust), then the broker's certificate is replaced by a trusted one",
    symptom="the InitProducerId request is taken from the queue but never sent: the "
    "producer stays initializing and never sends, even once the certificate is fixed",
    restart_helps=True,
    where=Where.POD,
)

FIXED = (
    "the broker's certificate, untrusted at the client's start, replaced by a trusted one "
    "(the broker restarted)",
    lambda lab, _: lab.fix_certificates(),
)


def _tls_row(
    name: str, control: bool, note: str, *conf: str, release: str = "4.4.0", client: str = ""
) -> Incident:
    client = client or f"kafka-clients-{release}"
    return field_row(
        INIT_AFTER_TLS,
        name,
        client,
        f"kafka-clients {release} KafkaProducer over TLS, the client's defaults but "
        f"delivery.timeout.ms 35 s{note}",
        FIXED,
        java_client(client, *TLS_CONF, *conf),
        watch_seconds=WATCH_SECONDS,
        sidecar_args=WRITE_INTERVAL,
        control=control,
        brokers=1,
        controllers=1,
        tls="untrusted",
        starts_failing=True,
    )


ROWS = (
    _row("KAFKA-7755", "2.1.0", False, ""),
    _row("KAFKA-7755-control", "2.1.1", True, " (the fix)"),
    _tls_row("KAFKA-20237", False, " (idempotent: the default)"),
    _tls_row("KAFKA-20237-control", True, ", enable.idempotence=false", "enable.idempotence=false"),
    _tls_row(
        "KAFKA-20237-3.9.2",
        False,
        " (idempotent; the release Spark's Kafka sink pins)",
        release="3.9.2",
        client="kafka-clients-3.9.2-field",
    ),
)
