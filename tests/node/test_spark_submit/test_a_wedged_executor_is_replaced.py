"""A wedged executor's producer on a running job (the default line): the operator acts
on that pod alone, Spark replaces the executor and the job completes with every event.

Covered: the pipeline's wrapper with its connections blackholed (the pod deleted), the
same under a `decommission` policy (Spark's own decommission, the executor leaves by
itself), and Spark's own Kafka sink with its I/O thread blocked in an interceptor (the
verdict from Spark's view alone, no telemetry). Each prints its measured intervals.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from hangwatch_demo.interceptor import CLASS_NAME as WEDGE_INTERCEPTOR
from hangwatch_lab.kafka import KafkaLab
from hangwatch_testing.emulated_cluster import OperatorRun
from hangwatch_testing.kube.release import HelmRelease
from hangwatch_testing.node.cluster import NodeCluster
from tests.node.test_spark_submit.faults import (
    PACED_EVENTS,
    connector_writing,
    paced_run,
    producer_hung_actions,
    wedge_interceptor,
    wedge_one_executor,
    wedged_run_completes,
)
from tests.node.test_spark_submit.submission import (
    POLICIES,
    POLICY_NAME,
    completed_run,
    executor_end,
    pod_log,
)

pytestmark = [pytest.mark.xdist_group("node"), pytest.mark.timeout(2400)]


def test_a_wedged_executor_is_deleted_spark_replaces_it_and_the_job_completes(
    node: NodeCluster,
    release: HelmRelease,
    spark_image: str,
    kafka: KafkaLab,
    operator: OperatorRun,
    tmp_path: Path,
) -> None:
    """One executor's producer connections blackholed inside its pod's network namespace
    -> its sidecar's verdict producer_hung -> the operator deletes that pod (and only
    it) -> Spark asks for a new executor, whose pod gets the sidecar -> the job ends
    Succeeded and verify finds every event. Prints the measured intervals."""
    w, done_at, ended = wedged_run_completes(node, release, spark_image, kafka, tmp_path, "fault")
    print(
        "spark-on-kubernetes fault: "
        f"{w.intervals()}, "
        f"fault->job done {done_at - w.fault_at:.1f} s; executor ended "
        f"{executor_end(ended)}; "
        f"reasons {w.hung['reasons']}"
    )


DECOMMISSION_CONF = {"spark.executor.decommission.forceKillTimeout": "15s"}
"""The example's decommission settings (spark.decommission.enabled and block migration
on) with a force-kill timeout inside this tier's 30 s grace period (the example's 120 s
goes with its 150 s grace)."""


def test_under_a_decommission_policy_a_wedged_executor_is_decommissioned_and_replaced(
    node: NodeCluster,
    release: HelmRelease,
    spark_image: str,
    kafka: KafkaLab,
    operator: OperatorRun,
    tmp_path: Path,
) -> None:
    """The policy says `decommission` for producer_hung: the wedged executor's pod is
    deleted with its own grace period, which runs Spark's preStop hook (decom.sh ->
    SIGPWR); the executor decommissions (the driver receives its decommissioned message)
    and leaves by itself (exit 0, within the grace period), the driver replaces it and
    the job completes with every event verified. The policy records the action as a
    decommission, never a restart; the sidecar of the decommissioned pod exits 0."""
    with (
        producer_hung_actions(node, ["decommission", "alert"]),
        paced_run(node, spark_image, kafka, tmp_path, "decom", DECOMMISSION_CONF) as run,
    ):
        w = wedge_one_executor(run, release)
        name = w.target["metadata"]["name"]
        deletion = run.recorder.deletion[w.target["metadata"]["uid"]]["metadata"]
        assert deletion["deletionGracePeriodSeconds"] == 30, deletion  # the pod's own
        submitted = run.submission.wait()
    actions = node.get(f"{POLICIES}/{POLICY_NAME}")["status"]["recentActions"]
    taken = [a for a in actions if a.get("pod") == name and a.get("action") == "decommission"]
    assert taken and taken[0].get("verdict") == "producer_hung", actions
    assert not [a for a in actions if a.get("pod") == name and a.get("action") == "restart"]
    summary = completed_run(node, run.recorder, submitted, kafka, run.run_id, PACED_EVENTS)
    final = run.recorder.pods[w.target["metadata"]["uid"]]
    # decommissioned, the JVM left by itself (a deleted wedged executor is killed instead)
    assert executor_end(final).get("exitCode") == 0, final["status"]
    driver_log = pod_log(node, run.recorder.role("driver")[0], "spark-kubernetes-driver")
    exec_id = w.target["metadata"]["labels"]["spark-exec-id"]
    told = [ln for ln in driver_log.splitlines() if f"executor {exec_id} decommissioned" in ln]
    assert told, driver_log[-5000:]  # the driver's scheduler backend heard it from the executor
    print(
        "spark-on-kubernetes decommission: "
        f"{w.intervals()}; "
        f"failed_attempts {summary.get('failed_attempts')}, retried {summary.get('retried_tasks')}"
        f"; driver: {told[0]}"
    )


CONNECTOR_WEDGE_JOB = (
    "--sink", "connector", "--option", f"kafka.interceptor.classes={WEDGE_INTERCEPTOR}",
)  # fmt: skip
"""Spark's own Kafka sink (`df.write.format("kafka")`, the connector in the image's jars)
with a producer interceptor named through the connector's own option, as a user's
monitoring interceptor is: the demo's `WedgeInterceptor` (in the image's jars), which
blocks the JVM producer's I/O thread once a `wedge` file exists in the executor's
working directory. No hangwatch code where the messages are produced, no telemetry."""


def test_a_wedged_producer_on_spark_kafka_sink_is_deleted_and_the_job_completes(
    node: NodeCluster,
    release: HelmRelease,
    spark_image: str,
    kafka: KafkaLab,
    operator: OperatorRun,
    tmp_path: Path,
) -> None:
    """The paced job on Spark's own Kafka sink: one executor's JVM producer wedged (its
    I/O thread blocked in an interceptor) -> its sidecar's producer_hung from Spark's
    view alone (the executor's real thread dump) -> the operator deletes that pod ->
    Spark runs the task again on a replacement (a new container: no wedge) -> the job
    completes and verify finds every event (duplicates allowed)."""
    w, done_at, ended = wedged_run_completes(
        node, release, spark_image, kafka, tmp_path, "connector",
        CONNECTOR_WEDGE_JOB, connector_writing, wedge_interceptor,
    )  # fmt: skip
    assert not w.hung.get("producers"), w.hung  # no telemetry: the verdict came without it
    reasons = " ".join(w.hung["reasons"])
    assert "kafka-producer-network-thread" in reasons and "WedgeInterceptor" in reasons, reasons
    print(
        f"spark-on-kubernetes connector wedge: {w.intervals()}, "
        f"fault->job done {done_at - w.fault_at:.1f} s; executor ended "
        f"{executor_end(ended)}; "
        f"reasons {w.hung['reasons']}"
    )
