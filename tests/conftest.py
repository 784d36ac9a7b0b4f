"""Shared fixtures: a real fault lab (mock Kafka cluster in a child process); test groups.

Tests that inject kernel faults (blackholes) need iptables and root; CI installs
iptables and runs as root. They fail — never skip — when that is missing, so a
missing prerequisite cannot hide as a green run.

`make test` runs the suite on several pytest-xdist workers with `--dist loadgroup`:
tests of one `xdist_group` run one after the other on one worker. A test without a
group of its own joins its module's, so a module-scoped fixture (an operator process,
a SparkSession, a lab) is built once, on one worker; `GROUPS` puts whole folders
together where their tests must not overlap (see there). The lab's iptables chains,
ports and state files are per process, so labs of different workers never meet. The
real Apache Kafka lab's tests (`lab/test_kafka_engine_*.py`) name their own group,
`kafka-engine`: their clusters start one at a time, on one worker.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from hangwatch_lab import Lab, netfilter

GROUPS = {
    "pipeline_spark": "spark",
    "demo": "spark",
    "sidecar/test_spark_view_on_a_real_driver.py": "spark",
    "sidecar/test_seed_scenarios_on_the_lab.py::"
    "test_healthy_producer_under_load_for_five_minutes_is_only_healthy": "five-minute-soak",
}
"""Folder, module or test (under tests/) -> the xdist group it joins instead of its
module's. `spark`: the Spark pipeline tests and the demo each start Spark JVMs that
take both cores; two of them at once slow each other past their deadlines. The
five-minute soak is a group of its own, so that the rest of its module runs beside it."""

FIRST = ("five-minute-soak", "spark", "kube")
"""The longest groups, handed to workers first so that none of them finishes last
(`kube`: the real API server tier, whose tests name that group themselves)."""


@pytest.hookimpl(tryfirst=True)  # before xdist's own hook reads the groups
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Give every test without an `xdist_group` its group from `GROUPS`, else its module's
    (a path under tests/); put the `FIRST` groups first."""
    root = Path(__file__).parent
    for item in items:
        if item.get_closest_marker("xdist_group") is not None:
            continue
        module = item.path.relative_to(root).as_posix()
        test = f"{module}::{item.name}"
        group = GROUPS.get(test) or GROUPS.get(module) or GROUPS.get(module.split("/")[0])
        item.add_marker(pytest.mark.xdist_group(group or module))
    items.sort(key=lambda item: _rank(item, len(FIRST)))


def _rank(item: pytest.Item, last: int) -> int:
    marker = item.get_closest_marker("xdist_group")
    name = (marker.args or [marker.kwargs.get("name")])[0] if marker else None
    return FIRST.index(name) if name in FIRST else last


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
