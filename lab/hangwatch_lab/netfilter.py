"""Real kernel packet drops for blackholed brokers (iptables, one chain per lab).

Each lab owns a chain named `HWLAB-<pid>-<n>` hooked at the top of INPUT. Blackholing a
broker port adds two DROP rules to that chain: packets *to* the port (new SYNs and
data on established connections) and packets *from* it (answers already in
flight). On loopback both directions pass INPUT, so nothing is dropped at send time
and the broker never sees an error: exactly what a dead host looks like.

The owner removes its chain on every exit path it controls (`close`). A lab killed
with SIGKILL cannot, so `remove_stale_chains` — called when any lab starts — removes
every `HWLAB-<pid>-<n>` chain whose process no longer exists.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import subprocess
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
    """How many DROP rules hangwatch lab chains (of lab process `pid` if given) hold now."""
    return sum(_iptables("-S", chain).stdout.count("-j DROP") for chain in list_chains(pid))


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

    def remove(self, port: int) -> None:
        """Let packets to and from `port` through again."""
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
