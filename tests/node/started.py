"""The node tier's cluster, started and checked: one definition for the session's node
(tests/node/conftest.py) and the registry module's node of its own."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from hangwatch_testing.node.cluster import NodeCluster, node_cluster
from hangwatch_testing.node.components import NodeUnavailableError


def started_node(what: str) -> Iterator[NodeCluster]:
    """A single-node cluster for `what`, Ready; afterwards stopped, and the test that
    ends it fails if it left an interface, iptables rule, mount or process behind."""
    started = time.monotonic()
    try:
        with node_cluster() as running:
            print(f"node tier: cluster for {what} Ready in {time.monotonic() - started:.0f} s")
            yield running
            cluster = running
    except NodeUnavailableError as exc:
        pytest.fail(f"node tier: {exc}", pytrace=False)
    left = cluster.leftovers()
    assert not left, f"node tier left behind: {left}"
