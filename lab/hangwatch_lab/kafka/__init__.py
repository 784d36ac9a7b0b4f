"""The lab's real engine: an Apache Kafka cluster (KRaft), 3 combined broker+controller
nodes by default, or `controllers` controller-only nodes apart from the brokers.

`KafkaLab` starts one JVM per node from the jars `hangwatch_lab.kafkajars` resolved
(`kafka_version`: by default the current 4.x; 3.9, the last line that still serves the
incidents' 0.8.2/0.11 clients, on request), on loopback ports the kernel picked, each
with its own formatted storage under one temporary directory. Readiness is observed,
never slept for: the lab is up when a metadata request lists every broker (which needs a
controller quorum and every broker registered and unfenced) and every topic partition
has a leader.

Roles: by default (`controllers=0`) every node is both broker and controller (KRaft's
combined mode), so the quorum needs a majority of the brokers: a shrink keeps more than
half of them. With `controllers=N` the lab starts N controller-only nodes
(`process.roles=controller`, node ids `CONTROLLER_ID_BASE`+1..N, no client listener) and
the brokers as broker-only nodes (`process.roles=broker`, ids 1..M): brokers can then be
stopped or removed down to one while the quorum stays whole, as in a cluster whose
controllers run apart (every managed Kafka service). Faults address brokers only; the
controllers are never a fault's target and stop with the lab.

Faults have real causes: a `down` broker is a process stopped with SIGTERM (Kafka's
own controlled shutdown) and `restore` starts it again on the same ports and data;
`unresponsive` freezes the JVM (SIGSTOP: the kernel still accepts and acknowledges,
nothing answers); `blackhole` drops its packets (iptables, as on the mock); an
`election` freezes the broker that leads every partition of a topic (not the active
controller) until the controller fences it and elects new leaders; `leader` is a real
reassignment plus preferred election with Kafka's own tools; `shrink` reassigns every
partition away from the removed brokers and stops them for good. Protocol-only faults
(`stall-produce`, `request-errors`, `rtt`) belong to the mock engine.

What a control needs from a cluster, each real: topics created with their own configs
(`topic_configs`, `create_topic`: e.g. `max.message.bytes`), automatic topic creation off
(`auto_create_topics=False`), SASL/PLAIN users on a second listener per broker whose
writes Kafka's StandardAuthorizer checks against ACLs (`sasl_users`, `grant`; the
PLAINTEXT listener's principal, User:ANONYMOUS, is the super user the lab's own admin
work, the brokers and the controllers run as), and client quotas (`set_quota`, Kafka's
own ConfigCommand), which the brokers enforce by throttling. What a field report's
trigger needs: brokers reached by hostname, which `move` brings back on a new address
under the same name (`hostnames`), and a TLS listener whose certificate clients may not
trust until `fix_certificates` (`tls`).

Every JVM is started from one long-lived thread with PR_SET_PDEATHSIG=SIGKILL, so
the brokers die with the lab process even when it is SIGKILLed; `close` kills them
and removes the data directory on every other exit path.

The package, by job: `nodes` (settings, files, processes of one node), `settings`
(`KafkaSettings`: what a cluster is started with, checked), `processes`
(`KafkaProcesses`: the cluster's nodes started and stopped, and the state every layer
shares), `admin` (topics, configs, ACLs), `tools` (Kafka's own command-line tools),
`faults`, and `engine` (`KafkaLab`, every layer as one lab); below the nodes, `names`
(the brokers' names, addresses and hosts file) and `tls` (the TLS material).
"""

from __future__ import annotations

from hangwatch_lab.kafka.engine import KafkaLab
from hangwatch_lab.kafka.nodes import (
    BROKER_HEAP,
    CONTROLLER_ID_BASE,
    DATA_PREFIX,
    DIE_WITH_PARENT,
    SESSION_TIMEOUT_MS,
    remove_stale_data_dirs,
    run_state,
)

__all__ = [
    "BROKER_HEAP",
    "CONTROLLER_ID_BASE",
    "DATA_PREFIX",
    "DIE_WITH_PARENT",
    "SESSION_TIMEOUT_MS",
    "KafkaLab",
    "remove_stale_data_dirs",
    "run_state",
]
