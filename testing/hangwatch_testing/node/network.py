"""The node's network on this machine: its pod /24, its bridge's CNI network, and the
iptables lines that would be the tier's.

The node's network is the tier's own: a bridge (`hw<random>`) with the first address of
a random /24 in 10.0.0.0/8 that no route of this machine covers; the node IP is that
address, the CNI bridge plugin puts every pod on that bridge with an address from the
same /24 (no NAT, no masquerade, no forwarding: pods talk to the node and to each other
on the bridge).
"""

from __future__ import annotations

import ipaddress
import json
import random
import shutil
import subprocess
from contextlib import suppress
from pathlib import Path
from typing import Any

from hangwatch_testing.node.components import NodeUnavailableError


def ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    """`ip ARGS...`; a failure (with `check`) is a NodeUnavailableError naming it."""
    done = subprocess.run(["ip", *args], capture_output=True, text=True, check=False)
    if check and done.returncode != 0:
        raise NodeUnavailableError(f"ip {' '.join(args)} failed: {done.stderr.strip()}")
    return done


def _used_networks() -> list[ipaddress.IPv4Network | ipaddress.IPv6Network]:
    routes = json.loads(ip("-j", "-4", "route", "show", "table", "all").stdout or "[]")
    addresses = json.loads(ip("-j", "-4", "addr").stdout or "[]")
    used = []
    for route in routes:
        dst = route.get("dst", "")
        if dst and dst != "default" and not dst.startswith("127."):
            with suppress(ValueError):
                used.append(ipaddress.ip_network(dst, strict=False))
    for link in addresses:
        for info in link.get("addr_info", ()):
            used.append(ipaddress.ip_network(f"{info['local']}/{info['prefixlen']}", strict=False))
    return used


def free_pod_network() -> ipaddress.IPv4Network:
    """A random 10.x.y.0/24 that no route or address of this machine overlaps."""
    used = _used_networks()
    for _ in range(200):
        network = ipaddress.IPv4Network(
            f"10.{random.randint(64, 250)}.{random.randint(0, 255)}.0/24"
        )
        if not any(network.overlaps(other) for other in used):
            return network
    raise NodeUnavailableError("no free 10.x.y.0/24 for the pod bridge: every one is routed here")


def cni_network(bridge: str, pod_network: ipaddress.IPv4Network, ipam_dir: Path) -> dict[str, Any]:
    """The CNI network list putting each pod on `bridge` with an address of
    `pod_network` (the node IP, its first address, the gateway; no masquerade)."""
    node_ip = str(pod_network.network_address + 1)
    return {
        "cniVersion": "1.0.0",
        "name": "hangwatch",
        "plugins": [
            {
                "type": "bridge",
                "bridge": bridge,
                "isGateway": True,
                "ipMasq": False,
                "hairpinMode": True,
                "ipam": {
                    "type": "host-local",
                    "dataDir": str(ipam_dir),
                    "ranges": [
                        [
                            {
                                "subnet": str(pod_network),
                                "gateway": node_ip,
                                "rangeStart": str(pod_network.network_address + 10),
                            }
                        ]
                    ],
                },
            }
        ],
    }


def tier_iptables_lines(bridge: str, network: str) -> list[str]:
    """Rules and chains in iptables-save that belong to the tier (its bridge, its pod
    network, the chains a kubelet or CNI plugin would create), in every table."""
    marks = (bridge, network, "KUBE-", "CNI-")
    lines: list[str] = []
    for tool in ("iptables-save", "ip6tables-save"):
        if shutil.which(tool) is None:
            continue
        out = subprocess.run([tool], capture_output=True, text=True, check=False).stdout
        lines += [line for line in out.splitlines() if any(mark in line for mark in marks)]
    return lines
