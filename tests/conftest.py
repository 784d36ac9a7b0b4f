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

A SIGTERM (a CI timeout, a developer's `kill`) unwinds the run like Ctrl-C: the pytest
process (and every xdist worker, each its own process) raises `Terminated`, a
KeyboardInterrupt, so every fixture's teardown runs and no API server, kubelet,
sidecar, JVM, interface or iptables rule outlives the run (`pytest_configure`).
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Iterator
from pathlib import Path
from types import FrameType

import pytest
from hypothesis import HealthCheck, settings

from hangwatch_lab import Lab, netfilter
from hangwatch_testing.group_times import GroupTimes
from hangwatch_testing.spark_conf import defaults_dir

os.environ["SPARK_CONF_DIR"] = str(defaults_dir())
"""Every Spark application of the run (in this process or a child) runs its JVMs with
Spark's defaults for short local runs (`hangwatch_testing.spark_conf`)."""

settings.register_profile(
    "hangwatch",
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.load_profile("hangwatch")
"""Property tests check what a function returns, never how fast: Hypothesis's default
200 ms deadline per example and its too-slow health check are wall-clock asserts, which
the suite's own load (four workers, Spark and Kafka JVMs on two cores) trips at random
(seen: tests/operator/test_shared_limits.py and test_decisions.py under Hypothesis's
default profile, niced beside a CI run at load 7-9: a `FailedHealthCheck` "input
generation is slow" and a `FlakyFailure` past the deadline in 2 of 6 runs; with this
profile 6 of 6 passed). Speed is measured in benchmarks/."""

GROUPS = {
    "pipeline_spark": "spark",
    "demo": "demo",
    "spark_lines": "spark",
    "sidecar/test_spark_view_on_a_real_driver.py": "spark",
    "sidecar/test_failure_budget_on_a_real_driver.py": "spark",
    "sidecar/test_spark_sink_refusals.py": "spark",
    "sidecar/test_field_corpus_in_spark.py": "spark",
    "sidecar/test_seed_scenarios_on_the_lab.py::"
    "test_healthy_producer_under_load_through_the_soak_is_only_healthy": "soak",
}
"""Folder, module or test (under tests/) -> the xdist group it joins instead of its
module's. `spark`: the Spark pipeline tests, Spark's view on a real driver and the Spark
3.5 line's subset (spark_lines: a pytest of Spark tests under the 3.5 environment) start
Spark JVMs one after the other; `demo`: `hangwatch demo`'s runs, each a local-cluster
application with its sidecars and operator. Two groups, not one: together they were
46 min 38 s of one worker in a cold run whose pytest lasted 53 min 30 s, the run's
critical path; apart, each is about half of it, and one Spark application of each may
run at once (their waits are set for a loaded machine: the demo's start timeout is 180 s,
its recovery timeout 45 s; the node tier's Spark pods already ran beside the `spark`
group). The
soak (a healthy producer watched for minutes) is a group of its own, so that the rest
of its module runs beside it.
A folder's or module's entry takes only the tests of a tier above `unit`: a unit test
(nothing but Python) of such a folder keeps its module's group, so it never waits in the
queue of a group that is there for what its neighbours start (in the `spark` group's
folders: the pipeline's pure parts and refusals, the demo's parts, the line
environments: 2-3 minutes of the suite's longest group)."""

TIERS = {
    "kube": "kube",
    "kube/test_lasting_ports.py": "unit",
    "node": "node",
    "image": "image",
    "demo": "spark",
    "pipeline_spark": "spark",
    "pipeline_spark/test_transforms_and_reports.py": "unit",  # the pipeline's pure parts
    "pipeline_spark/test_bad_configuration_is_one_line.py": "unit",  # refused before Spark
    "pipeline_spark/test_connector_bad_input.py": "unit",  # refused before Spark
    "spark_lines": "spark",
    "spark_lines/test_spark_line_env.py": "unit",
    "lab": "lab",
    "lab/test_broker_names.py": "unit",
    "lab/test_broker_class_data_option.py": "unit",
    "demo/test_demo_parts.py": "unit",
    "demo/test_interceptor_build.py": "unit",
    "demo/test_demo_replays_seeds.py": "browser",
    "report/test_run_record.py": "spark",
    "sidecar/test_spark_view_on_a_real_driver.py": "spark",
    "sidecar/test_failure_budget_on_a_real_driver.py": "spark",
    "sidecar/test_spark_driver_down.py": "spark",
    "sidecar/test_spark_sink_refusals.py": "spark",
    "sidecar/test_field_corpus_in_spark.py": "spark",
    "sidecar/test_incidents_with_their_own_clients.py": "lab",
    "sidecar/test_field_corpus_on_the_lab.py": "lab",
    "sidecar/test_jvm_attach_unprivileged.py": "lab",
    "sidecar/test_seed_scenarios_on_the_lab.py": "lab",
    "sidecar/test_real_clients_on_the_lab.py": "lab",
    "sidecar/test_passive_first_on_the_lab.py": "lab",
    "sidecar/test_leader_moves_on_the_lab.py": "lab",
    "sidecar/test_many_producers_stay_bounded.py": "lab",
    "sidecar/test_bad_telemetry_never_stops_the_round.py": "lab",
    "sidecar/test_socket_view_classifies_recordings.py": "lab",
    "sidecar/test_time_to_error_budget.py": "lab",
    "sidecar/test_smallest_requests_on_the_wire.py": "lab",  # javac and a JVM
    "sidecar/test_client_releases_of_real_clients.py": "lab",  # the incidents' clients
    "chart/test_alerts_fire_in_prometheus.py": "lab",
    "chart/test_alerts_reach_a_person.py": "lab",
    "operator/test_remediation_emulated.py": "lab",
    "operator/test_early_action_emulated.py": "lab",  # an operator process
    "operator/test_cordon_walk_emulated.py": "lab",  # an operator process, 20 rounds: 40 s
    "probe": "lab",
    "probe/test_assessment_is_pure.py": "unit",
    "probe/test_bad_input.py": "unit",
    "config_check/test_librdkafka_model_bounds_real_producer.py": "lab",
    "producer_package": "lab",
    "producer_package/test_example_image.py": "unit",
    "producer_package/test_python_3_10_is_found.py": "unit",
    "producer_package/test_example_job.py": "spark",
}
"""Folder or module (under tests/) -> its tier, the `pytest -m` marker it gets (the most
specific entry wins; unlisted: `unit`, or `lab` when it uses the `lab` or
`kernel_faults` fixture). A tier names the heaviest thing its tests start: `unit` nothing
but Python (`make test-fast`); `lab` a fault lab (the mock or real Apache Kafka, kernel
rules, real clients); `spark` Spark JVMs (the pipeline, the demo, a real driver);
`kube` a real API server; `node` a real kubelet running pods; `image` a container image
build; `browser` headless Chromium."""

TIER_NAMES = ("unit", "lab", "spark", "kube", "node", "image", "browser")

FIRST = (
    "node", "demo", "spark", "real-kafka-incidents", "kafka-engine", "lab-timing", "soak",
    "kube", "python39",
)  # fmt: skip
"""The longest groups, handed to workers first and longest first, so that none of them
finishes last (`node`: the single-node cluster tier, `real-kafka-incidents`: the
incidents replayed with their own clients, `kafka-engine` and `lab-timing`: the real
Kafka engine's and the timing tests on the lab, `kube`: the real API server tier,
`python39`: the producer distribution under Debian bullseye's Python 3.9; their tests
name those groups themselves): the order of their times in docs/testing-tiers.md's
table. What is left are groups of a minute or less, which even out the workers' ends.
The Makefile's `--no-loadscope-reorder` keeps this order: pytest-xdist otherwise hands
out the groups with the most tests first, and the soak (one test, then five minutes)
started 135th of 148 groups; with only the four largest first, `lab-timing` (6 min) was
taken last, by the `node` worker, which then ran 6 minutes after the other three
finished."""


class Terminated(KeyboardInterrupt):
    """The run received SIGTERM: pytest unwinds as on Ctrl-C (fixtures torn down)."""


def pytest_configure(config: pytest.Config) -> None:
    """Make SIGTERM raise `Terminated` in this process (the run's, or an xdist worker's)."""
    if signal.getsignal(signal.SIGTERM) is _on_sigterm:
        return  # configured twice in one process
    try:
        signal.signal(signal.SIGTERM, _on_sigterm)
    except ValueError:  # not the main thread: that thread's owner handles signals
        return
    _SIGTERM["pid"] = os.getpid()


_SIGTERM = {"pid": 0, "unwinding": False}
"""The pid the handler was installed in (a forked child, such as a lab's, inherits the
handler but not the run: it takes SIGTERM's default action), and whether it fired."""


def _on_sigterm(signum: int, frame: FrameType | None) -> None:
    if os.getpid() != _SIGTERM["pid"]:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGTERM)
        return
    if _SIGTERM["unwinding"]:  # let the teardown finish (SIGKILL still ends it)
        print("SIGTERM again: still tearing fixtures down", file=sys.stderr, flush=True)
        return
    # a handler that returns, not SIG_IGN: an ignored signal stays ignored in every
    # process the teardown starts
    _SIGTERM["unwinding"] = True
    raise Terminated(f"signal {signum} (SIGTERM)")


@pytest.hookimpl(tryfirst=True)  # before xdist's own hook reads the groups
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Give every test without an `xdist_group` its group from `GROUPS`, else its module's
    (a path under tests/); put the `FIRST` groups first."""
    root = Path(__file__).parent
    for item in items:
        module = item.path.relative_to(root).as_posix()
        tier = tier_of(module, item.fixturenames)
        item.add_marker(getattr(pytest.mark, tier))
        if item.get_closest_marker("xdist_group") is not None:
            continue
        item.add_marker(pytest.mark.xdist_group(group_of(module, item.name, tier)))
    items.sort(key=lambda item: _rank(item, len(FIRST)))


def group_of(module: str, test: str, tier: str) -> str:
    """The xdist group of `test` in `module` (a path under tests/) of `tier`, when the test
    names none itself (`GROUPS`: the test's entry, else, above the unit tier, its
    module's or folder's, else its module)."""
    if (group := GROUPS.get(f"{module}::{test}")) is not None:
        return group
    if tier != "unit":
        for key in (module, module.split("/", maxsplit=1)[0]):
            if (group := GROUPS.get(key)) is not None:
                return group
    return module


def tier_of(module: str, fixtures: list[str]) -> str:
    """The tier of a test in `module` (a path under tests/) using `fixtures` (`TIERS`)."""
    parts = module.split("/")
    for n in range(len(parts), 0, -1):
        if (tier := TIERS.get("/".join(parts[:n]))) is not None:
            return tier
    return "lab" if {"lab", "kernel_faults"} & set(fixtures) else "unit"


def _rank(item: pytest.Item, last: int) -> int:
    marker = item.get_closest_marker("xdist_group")
    name = (marker.args or [marker.kwargs.get("name")])[0] if marker else None
    return FIRST.index(name) if name in FIRST else last


_TIMES = GroupTimes()
"""Each group's and worker's share of this run (filled on the controller, or on the one
process of a run without workers)."""


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """Add one test phase's duration to its group and worker (`_TIMES`)."""
    if hasattr(report, "node") or os.environ.get("PYTEST_XDIST_WORKER") is None:
        node = getattr(report, "node", None)
        worker = node.gateway.id if node is not None else "main"
        _TIMES.add(report.nodeid, report.when, report.duration, worker)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Say where the run's time went: the busiest workers first, then the longest groups
    (the run lasts as long as its busiest worker)."""
    lines = _TIMES.summary()
    if lines:
        terminalreporter.section("time by worker and group")
        for line in lines:
            terminalreporter.write_line(line)


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
