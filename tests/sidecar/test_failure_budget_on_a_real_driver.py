"""The failure budget read from a real Spark driver, and the restart it refuses.

One `local-cluster[1,2,1024]` application (a standalone worker whose executor is a
separate JVM, as on Kubernetes) with `spark.executor.maxNumFailures=2`. Covers: the
sidecar's reader finds the setting in the driver's environment endpoint and the
Spark version in its version endpoint (budget 2, nothing failed); each executor JVM
killed (SIGKILL, as a node or the kubelet ends a pod) shows up in `allexecutors` as a
dead executor and the budget the sidecar's `SparkWatch` reports drops by one, after
the kill and because of it; with no failure left, the budget crosses /status into the
operator, whose decision refuses to restart the hung executor and raises an alert
instead, the suppression's Event naming the setting and the failure it would be. And
the default the sidecar computes when the application sets no limit is the one this
driver's own Spark computes (`ExecutorFailureTracker.maxNumExecutorFailures`, called in
its JVM) for each way an application sizes itself: the same test runs on each Spark
line (tests/spark_lines), so each line's defaults are checked against its own code.

What is not exercised here: a standalone cluster does not end applications on
`maxNumFailures` (Kubernetes and YARN do); the test proves the reading and the
refusal, not Spark's own enforcement.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest

from hangwatch.wire import status
from hangwatch.wire.status import FailureBudget
from hangwatch_demo.spark_cluster import executors_of
from hangwatch_operator.correlation import correlate
from hangwatch_operator.decisions import decide
from hangwatch_operator.history import History
from hangwatch_operator.operations import Operation, Outcome, Suppression
from hangwatch_operator.reporting import decision_message, event_reason
from hangwatch_operator.sidecar_status import PodReport, parse_status
from hangwatch_sidecar.spark import failures
from hangwatch_sidecar.spark.client import API, DriverClient, DriverReader
from hangwatch_sidecar.spark.tracking import SparkTracker
from hangwatch_sidecar.spark.watch import SparkWatch
from hangwatch_testing.spark_driver import Driver, local_cluster_driver
from hangwatch_testing.waiting import wait_for
from tests.operator.builders import pod, policy

from .test_spark_failure_budget import LIMITS

LIMIT = 2


@pytest.fixture(scope="module")
def driver(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Driver]:
    work = tmp_path_factory.mktemp("failure-budget")
    conf = {"spark.executor.maxNumFailures": str(LIMIT)}
    with local_cluster_driver(work, "hangwatch-failure-budget-test", conf=conf) as live:
        yield live


@pytest.mark.parametrize(("props", "limit"), LIMITS)
def test_the_sidecars_default_budget_is_the_one_this_spark_computes(
    driver: Driver, props: dict[str, str], limit: int
) -> None:
    live = driver
    jvm = live.spark.sparkContext._jvm
    assert jvm is not None
    conf = jvm.org.apache.spark.SparkConf(False)
    for key, value in props.items():
        conf.set(key, value)
    sparks = jvm.org.apache.spark.deploy.ExecutorFailureTracker.maxNumExecutorFailures(conf)
    version = failures.spark_version({"spark": live.spark.version})
    environment = {"sparkProperties": [[k, v] for k, v in props.items()]}
    assert failures.budget_settings(version, environment).max_failures == sparks == limit


def _kill_executor(live: Driver, client: DriverClient) -> str:
    """SIGKILL the executor JVM the driver has registered (one the driver never knew is
    not in its lists); its id."""
    path = f"{API}/{live.application_id}/executors"

    def registered() -> list[int]:
        active = {e["id"] for e in client.get_json(path) if e["id"] != "driver"}
        return [e.pid for e in executors_of(live.application_id, live.work_root) if e.id in active]

    pids = wait_for(registered, 120, "a registered executor JVM of the application")
    os.kill(pids[0], signal.SIGKILL)
    return str(pids[0])


def test_each_killed_executor_spends_the_budget_until_a_restart_is_refused(
    driver: Driver,
) -> None:
    live = driver
    reader = DriverReader(DriverClient(live.ui, 60.0), live.application_id, live.executor_id)
    first = reader.read_budget(time.time())
    assert (first.max_failures, first.configured, first.failures, first.remaining) == (
        LIMIT, True, 0, LIMIT,
    )  # fmt: skip
    assert first.spark_version == live.spark.version
    assert first.validity_seconds is None

    with ThreadPoolExecutor(max_workers=1) as pool:
        watch = SparkWatch(reader, SparkTracker(5.0, live.executor_id), pool, 0.5, 120.0)
        for spent in range(1, LIMIT + 1):
            before = watch.budget
            assert before is None or before.failures == spent - 1
            killed = _kill_executor(live, reader.client)

            def spent_now(n: int = spent) -> FailureBudget | None:
                watch.poll()
                seen = watch.budget
                return seen if seen is not None and seen.failures == n else None

            budget = wait_for(spent_now, 120, f"the killed executor's (pid {killed}) failure")
            assert budget.remaining == LIMIT - spent
        watch.close()

    exhausted = watch.budget
    assert exhausted is not None and exhausted.remaining == 0
    now = time.time()
    doc = status.StatusDocument(
        verdict="producer_hung",
        reasons=["the task thread has waited in flush for 40 s"],
        sidecar=status.SidecarInfo(evaluated_ts=now),
        spark=status.SparkStatus(driver_ui=live.ui.url, available=True, failure_budget=exhausted),
    )
    report = parse_status(status.encode(doc), now=now, stale_after_seconds=30)
    hung = pod(f"executor-{live.executor_id}", app=live.application_id)
    decisions = decide(correlate([PodReport(hung, report)]), policy(), History(), now)
    restart, alert = decisions
    assert (restart.operation, restart.outcome, restart.suppression) == (
        Operation.RESTART, Outcome.SUPPRESSED, Suppression.FAILURE_BUDGET,
    )  # fmt: skip
    assert (alert.operation, alert.outcome) == (Operation.ALERT, Outcome.ACTED)
    assert event_reason(restart) == ("Warning", "HangwatchSuppressed")
    message = decision_message(restart, "jobs/writers")
    assert f"executor failure {LIMIT + 1} of the application" in message
    assert f"spark.executor.maxNumFailures is {LIMIT}" in message
    assert "Spark would end the application; alerting instead" in message
