"""Every broker unreachable from every executor pod of a running job: an alert, no pod
deleted, and the job completes once the fault is lifted (with the pipeline's wrapper
and with Spark's own Kafka sink).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from hangwatch_lab.kafka import KafkaLab
from hangwatch_testing.emulated_cluster import OperatorRun
from hangwatch_testing.kube.release import HelmRelease
from hangwatch_testing.node.cluster import NodeCluster
from hangwatch_testing.node.workloads import wait_for
from tests.node.test_spark_submit.faults import (
    PACED_EVENTS,
    SINKS,
    executor_pid,
    paced_run,
    writing_executors,
)
from tests.node.test_spark_submit.submission import (
    POLICIES,
    POLICY_NAME,
    completed_run,
)

pytestmark = [pytest.mark.xdist_group("node"), pytest.mark.timeout(2400)]


@pytest.mark.parametrize("sink", SINKS)
def test_every_broker_unreachable_from_the_executors_alerts_and_deletes_no_pod(
    node: NodeCluster,
    release: HelmRelease,
    spark_image: str,
    kafka: KafkaLab,
    operator: OperatorRun,
    tmp_path: Path,
    sink: str,
) -> None:
    """Every broker unreachable from every executor pod (all their traffic to Kafka
    dropped, the sidecars' probes included), with the pipeline's wrapper and with Spark's
    own Kafka sink: the operator alerts (cluster_unreachable) and deletes no pod; once the
    fault is lifted the job completes and verify finds every event."""
    base = POLICIES
    job, writing = SINKS[sink]
    with paced_run(node, spark_image, kafka, tmp_path, f"outage-{sink}", job=job) as run:
        recorder, fault = run.recorder, run.fault
        executors = wait_for(
            "both executors writing",
            lambda: writing_executors(recorder, release.sidecar_port, writing),
            timeout=600,
        )
        names = {pod["metadata"]["name"] for pod, _ in executors}
        for pod, _ in executors:
            fault.drop(executor_pid(pod["metadata"]["name"]))

        def alerted() -> bool:
            actions = node.get(f"{base}/{POLICY_NAME}").get("status", {}).get("recentActions")
            return any(
                a.get("action") == "alert"
                and a.get("verdict") == "cluster_unreachable"
                and a.get("pod") in names
                for a in actions or ()
            )

        wait_for("the operator's cluster_unreachable alert", alerted, 300)
        deleted = [
            p["metadata"]["name"]
            for p in recorder.role("executor")
            if p["metadata"]["uid"] in recorder.deleted_seen
        ]
        assert not deleted, deleted
        actions = node.get(f"{base}/{POLICY_NAME}")["status"]["recentActions"]
        assert not [a for a in actions if a.get("action") == "restart" and a.get("pod") in names], (
            actions
        )
        fault.clear()
        submitted = run.submission.wait()
    completed_run(node, run.recorder, submitted, kafka, run.run_id, PACED_EVENTS)
