"""`lasting_port`: the ports a release fixes at install never collide, within a test
process or between pytest-xdist workers; `listeners` names who holds a port (unit tier:
no control plane)."""

from __future__ import annotations

import socket

import pytest

from hangwatch_testing.kube import cluster
from hangwatch_testing.kube.cluster import LASTING_PORTS, ClusterUnavailableError, lasting_port
from hangwatch_testing.ports import listeners


def test_workers_take_disjoint_shares_of_the_lasting_ports(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    shares = []
    for index in range(3):
        monkeypatch.setenv("PYTEST_XDIST_WORKER", f"gw{index}")
        monkeypatch.setenv("PYTEST_XDIST_WORKER_COUNT", "3")
        shares.append(set(cluster._worker_share(LASTING_PORTS)))
    assert all(share and share <= set(LASTING_PORTS) for share in shares)
    assert not (shares[0] & shares[1]) and not (shares[1] & shares[2])
    assert not (shares[0] & shares[2])


def test_a_port_is_handed_out_once_per_process(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)
    monkeypatch.setattr(cluster, "_LASTING_TAKEN", set())
    port = next(port for port in LASTING_PORTS if _bindable(port))
    monkeypatch.setattr(cluster, "LASTING_PORTS", range(port, port + 1))
    assert lasting_port() == port
    with pytest.raises(ClusterUnavailableError, match="no free port"):
        lasting_port()


def _bindable(port: int) -> bool:
    with socket.socket() as sock:
        try:
            sock.bind(("0.0.0.0", port))
        except OSError:
            return False
        return True


def test_listeners_names_each_address_listening_on_a_port() -> None:
    with socket.create_server(("127.5.6.7", 0)) as four:
        port = four.getsockname()[1]
        with socket.create_server(("::1", port), family=socket.AF_INET6):
            assert sorted(listeners(port)) == [f"127.5.6.7:{port}", f"[::1]:{port}"]
    assert listeners(port) == []
