"""Brokers reached by hostname: their names, their loopback addresses, the lab's hosts file.

With `KafkaSettings.hostnames` every broker serves clients on a second listener
(`NAMED_LISTENER`) advertised by hostname (`hostname`) and bound on a loopback address
of its own (`named_address`: the whole of 127/8 is loopback on Linux). The lab's hosts
file (`hosts_text`: the machine's /etc/hosts plus one line per broker) says where each
name is; `KafkaFaults.move` brings a broker back on a new address under the same name (a
Kubernetes pod restarted on a new IP), and rewrites the file in place.

A client, or a sidecar, resolves those names as a pod does: through its /etc/hosts, here
the lab's hosts file bind-mounted over /etc/hosts in a mount namespace of its own
(`in_hosts_namespace`, a prefix of its command: root, and nothing left behind when it
exits). Every resolver reads it (glibc's, so Python's and librdkafka's; the JVM's through
the system resolver), each with its own cache. Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

NAMED_LISTENER = "NAMED"
"""The listener advertised by hostname (PLAINTEXT on the wire)."""
DOMAIN = "hangwatch.test"
"""The brokers' names' domain (.test is reserved: RFC 2606, never a real host)."""
NETWORK = "127.77"
"""The first two bytes of the brokers' named addresses: 127.77.<generation>.<broker>."""
MAX_GENERATION = 254
MARK = "# hangwatch lab: its brokers by name"


def hostname(broker: int) -> str:
    """The name broker `broker` is advertised by."""
    return f"kafka-{broker}.{DOMAIN}"


def named_address(broker: int, generation: int) -> str:
    """The loopback address broker `broker` listens on by name in its `generation`-th life
    (1: as started; each `move` the next): 127.77.<generation>.<broker>."""
    if not 1 <= broker <= 254 or not 1 <= generation <= MAX_GENERATION:
        raise ValueError(f"no named address for broker {broker}, generation {generation}")
    return f"{NETWORK}.{generation}.{broker}"


def hosts_text(machine: str, addresses: Mapping[int, str]) -> str:
    """The lab's hosts file: the machine's own /etc/hosts text (so every other name resolves
    as before), then one line per broker, `<address> <hostname>`."""
    head = machine if machine.endswith("\n") or not machine else machine + "\n"
    lines = [f"{address} {hostname(broker)}" for broker, address in sorted(addresses.items())]
    return head + MARK + "\n" + "".join(f"{line}\n" for line in lines)


BIND_AND_EXEC = 'mount --bind "$0" /etc/hosts && exec "$@"'


def in_hosts_namespace(hosts_file: Path) -> list[str]:
    """The prefix of a command that runs it with `hosts_file` as its /etc/hosts: a mount
    namespace of its own (util-linux's unshare, mounts private), the file bind-mounted over
    /etc/hosts, then the command exec'd (the same process: its pid is the prefix's)."""
    return ["unshare", "--mount", "--propagation", "private", "--", "sh", "-c", BIND_AND_EXEC,
            str(hosts_file)]  # fmt: skip
