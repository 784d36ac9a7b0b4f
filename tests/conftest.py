"""Shared fixtures: a real fault lab (mock Kafka cluster in a child process).

Tests that inject kernel faults (blackholes) need iptables and root; CI installs
iptables and runs as root. They fail — never skip — when that is missing, so a
missing prerequisite cannot hide as a green run.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from hangwatch_lab import Lab, netfilter


@pytest.fixture
def lab() -> Iterator[Lab]:
    """A 3-broker lab with topic `t` (3 partitions); every fault undone afterwards."""
    with Lab(brokers=3, topics={"t": 3}) as running:
        yield running
    assert netfilter.available() is not None or netfilter.drop_rule_count(os.getpid()) == 0


@pytest.fixture
def kernel_faults() -> None:
    """Fail clearly when kernel faults cannot be injected on this machine."""
    reason = netfilter.available()
    if reason is not None:
        pytest.fail(f"this test injects kernel faults: {reason}")
