"""Real kernel packet drops for blackholed brokers (iptables, one chain per lab).

Each lab owns a chain named `HWLAB-<pid>-<n>` hooked at the top of INPUT. Blackholing a
broker port adds two DROP rules to that chain: packets *to* the port (new SYNs and
data on established connections) and packets *from* it (answers already in
flight). On loopback both directions pass INPUT, so nothing is dropped at send time
and the broker never sees an error: exactly what a dead host looks like.

Refusing a broker's port adds one REJECT rule to that chain: every packet *to* the port
is answered with a TCP reset (`--reject-with tcp-reset`), so established connections
are reset at their next packet and new connects refused at once, while the broker itself
runs on (a firewall's REJECT, a load balancer whose backend went away).

Withholding a broker's answers from one client adds, per connection that client has
open to the broker, a DROP rule for the broker's packets to that connection that carry
data (`ANSWER_MIN_BYTES` and more): bare TCP acknowledgements still pass, so the
client's requests are acknowledged and never answered, while every other client and
every new connection is served.

The port of a broker stopped for good stays bound by the lab (`Blackholes.hold`), never
listening: a rule matches a port number, and a freed port handed to another process
(an API server of a concurrent test took one and could not reach itself) would have its
traffic dropped too.

The owner removes its chain on every exit path it controls (`close`). A lab killed
with SIGKILL cannot, so `remove_stale_chains` — called when any lab starts — removes
every `HWLAB-<pid>-<n>` chain whose process no longer exists.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import socket
import subprocess
from collections.abc import Iterable, Sequence
from itertools import count

from hangwatch.errors import LabError

CHAIN_PREFIX = "HWLAB-"
_HOOK = "INPUT"
log = logging.getLogger(__name__)
_serial = count(1)


def _iptables(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    binary = shutil.which("iptables")
    if binary is None:
        raise LabError(
            "blackhole faults need iptables (install it: apt-get install iptables) and root"
        )
    proc = subprocess.run([binary, "-w", "5", *args], capture_output=True, text=True, check=False)
    if check and proc.returncode != 0:
        raise LabError(f"iptables {' '.join(args)} failed: {proc.stderr.strip()}")
    return proc


def available() -> str | None:
    """None when kernel faults can be injected here, else the reason why not."""
    if shutil.which("iptables") is None:
        return "iptables is not installed (apt-get install iptables)"
    if os.geteuid() != 0:
        return "kernel faults need root"
    probe = subprocess.run(["iptables", "-w", "5", "-S", _HOOK], capture_output=True, check=False)
    if probe.returncode != 0:
        return f"iptables does not work here: {probe.stderr.decode().strip()}"
    return None


ANSWER_MIN_BYTES = 53
"""IPv4 packets this long or longer carry data: a bare TCP acknowledgement with the
timestamps option (Linux's default) is 52 bytes, 20 of IP and 32 of TCP."""


def withhold_rule(broker_port: int, local_port: int, broker_host: str | None = None) -> list[str]:
    """The iptables rule (without chain) dropping the data `broker_port` sends to the
    connection whose local port is `local_port`, its bare acknowledgements let through."""
    source = ["-s", broker_host] if broker_host else []
    return [
        "-p", "tcp", *source, "--sport", str(broker_port), "--dport", str(local_port),
        "-m", "length", "--length", f"{ANSWER_MIN_BYTES}:65535", "-j", "DROP",
    ]  # fmt: skip


def parse_ss_ports(text: str, pid: int, broker_port: int, broker_host: str | None) -> list[int]:
    """Local ports of `pid`'s connections to the broker in `ss -Htnp state established`
    output (IPv4 or IPv4-mapped IPv6 addresses, as the JVM opens them)."""
    ports = []
    for line in text.splitlines():
        fields = line.split()
        if len(fields) < 4 or f"pid={pid}," not in line:
            continue
        local, peer = fields[2], fields[3]
        host, _, port = peer.rpartition(":")
        host = host.strip("[]").removeprefix("::ffff:")
        if port == str(broker_port) and (broker_host is None or host == broker_host):
            ports.append(int(local.rpartition(":")[2]))
    return sorted(ports)


def connection_ports(
    pid: int, broker_port: int, broker_host: str | None = None, enter: Sequence[str] = ()
) -> list[int]:
    """Local ports of the established connections process `pid` has to the broker, as
    iproute2's `ss` lists them; `enter` prefixes the command (`nsenter --target=P --net`
    for another network namespace)."""
    if not enter and shutil.which("ss") is None:
        raise LabError("withholding answers needs ss (install it: apt-get install iproute2)")
    listed = subprocess.run(
        [*enter, "ss", "-Htnp", "state", "established"],
        capture_output=True,
        text=True,
        check=False,
    )
    if listed.returncode != 0:
        raise LabError(f"ss failed: {listed.stderr.strip()}")
    return parse_ss_ports(listed.stdout, pid, broker_port, broker_host)


def pid_alive(pid: int) -> bool:
    """True while process `pid` exists (a zombie included), as kill(pid, 0) sees it."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def list_chains(pid: int | None = None) -> list[str]:
    """Every hangwatch lab chain in the filter table (only those of lab process `pid` if given)."""
    out = _iptables("-S").stdout
    chains = re.findall(rf"^-N ({CHAIN_PREFIX}\d+-\d+)$", out, flags=re.MULTILINE)
    return [c for c in chains if pid is None or _chain_pid(c) == pid]


def _chain_pid(chain: str) -> int:
    return int(chain[len(CHAIN_PREFIX) :].split("-", maxsplit=1)[0])


def drop_rule_count(pid: int | None = None) -> int:
    """How many DROP and REJECT rules hangwatch lab chains (of lab process `pid` if given)
    hold now."""
    return sum(
        rules.count("-j DROP") + rules.count("-j REJECT")
        for rules in (_iptables("-S", chain).stdout for chain in list_chains(pid))
    )


def refuse_rule(port: int) -> list[str]:
    """The iptables rule (without chain) answering every packet to `port` with a TCP reset."""
    return ["-p", "tcp", "--dport", str(port), "-j", "REJECT", "--reject-with", "tcp-reset"]


def _remove_chain(chain: str) -> None:
    while _iptables("-D", _HOOK, "-j", chain, check=False).returncode == 0:
        pass
    _iptables("-F", chain, check=False)
    _iptables("-X", chain, check=False)


def remove_stale_chains() -> list[str]:
    """Remove chains left by labs whose process is gone; returns their names."""
    if available() is not None:
        return []
    removed = []
    for chain in list_chains():
        if not pid_alive(_chain_pid(chain)):
            _remove_chain(chain)
            removed.append(chain)
            log.warning("removed kernel rules left by a dead lab", extra={"chain": chain})
    return removed


class Blackholes:
    """The set of blackholed ports of one lab process, backed by its own chain."""

    def __init__(self) -> None:
        self.chain = f"{CHAIN_PREFIX}{os.getpid()}-{next(_serial)}"
        self.ports: set[int] = set()
        self.refused: set[int] = set()
        """Ports whose packets are answered with a TCP reset (`refuse`)."""
        self.withheld: dict[int, set[int]] = {}
        """Broker port -> local ports of the connections whose answers are withheld."""
        self.held: dict[int, socket.socket] = {}
        """Ports of stopped brokers kept bound (never listening): see `hold`."""
        self._created = False

    def _ensure_chain(self) -> None:
        if self._created:
            return
        reason = available()
        if reason is not None:
            raise LabError(f"cannot blackhole: {reason}")
        _remove_chain(self.chain)
        _iptables("-N", self.chain)
        _iptables("-I", _HOOK, "1", "-j", self.chain)
        self._created = True

    def add(self, port: int) -> None:
        """Silently drop every packet to and from `port` (new and established connections)."""
        if port in self.ports:
            return
        self._ensure_chain()
        _iptables("-A", self.chain, "-p", "tcp", "--dport", str(port), "-j", "DROP")
        _iptables("-A", self.chain, "-p", "tcp", "--sport", str(port), "-j", "DROP")
        self.ports.add(port)

    def refuse(self, port: int) -> None:
        """Answer every packet to `port` with a TCP reset: its connections are reset at
        their next packet, new connects refused."""
        if port in self.refused:
            return
        self._ensure_chain()
        _iptables("-A", self.chain, *refuse_rule(port))
        self.refused.add(port)

    def hold(self, port: int) -> None:
        """Keep the port of a broker stopped for good bound, never listening, until
        `close`: no other process on the machine is handed it (an API server or another
        lab's broker of a concurrent test, whose traffic a blackhole rule on the port
        would then drop), and a connection to it stays refused. A port something else
        holds already is left alone."""
        if port in self.held:
            return
        held = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        held.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # past TIME_WAIT
        try:
            held.bind(("0.0.0.0", port))
        except OSError as exc:
            held.close()
            log.warning(
                "port of a stopped broker not held", extra={"port": port, "error": str(exc)}
            )
            return
        self.held[port] = held

    @property
    def active(self) -> bool:
        """Whether any rule is in force (a blackhole, a refused port or answers withheld)."""
        return bool(self.ports or self.refused or any(self.withheld.values()))

    def withhold(self, port: int, local_ports: Iterable[int]) -> None:
        """Drop the data broker `port` sends to these connections (their local ports),
        letting its bare acknowledgements through."""
        for local in local_ports:
            if local in self.withheld.get(port, set()):
                continue
            self._ensure_chain()
            _iptables("-A", self.chain, *withhold_rule(port, local))
            self.withheld.setdefault(port, set()).add(local)

    def remove(self, port: int) -> None:
        """Let packets to and from `port` through again (answers withheld and a refusal
        included)."""
        for local in self.withheld.pop(port, set()):
            _iptables("-D", self.chain, *withhold_rule(port, local), check=False)
        if port in self.refused:
            _iptables("-D", self.chain, *refuse_rule(port), check=False)
            self.refused.discard(port)
        if port not in self.ports:
            return
        _iptables("-D", self.chain, "-p", "tcp", "--dport", str(port), "-j", "DROP", check=False)
        _iptables("-D", self.chain, "-p", "tcp", "--sport", str(port), "-j", "DROP", check=False)
        self.ports.discard(port)

    def close(self) -> None:
        """Remove the chain and every rule in it; safe to call more than once."""
        if self._created:
            _remove_chain(self.chain)
            self._created = False
        self.ports.clear()
        self.refused.clear()
        self.withheld.clear()
        for held in self.held.values():
            held.close()
        self.held.clear()
