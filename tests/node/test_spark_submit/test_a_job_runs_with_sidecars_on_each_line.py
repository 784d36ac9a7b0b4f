"""The reference pipeline submitted with spark-submit on each supported Spark line runs
to the end with the native sidecar in every executor, and nothing is lost.

Once per line (4.x and 3.5, hangwatch_pipeline.spark_kafka.LINES: each line's own
spark-submit, from its own pyspark, and its own image, scripts/build-spark-image.sh
--line). On the default line (4.x) the fault tests of this package are that run: each
submits the whole job with the same spark-submit and image and checks its end with the
same `completed_run` (and more: one executor wedged and replaced, or every broker
unreachable and no pod deleted), so this module submits a healthy job only on the other
lines (3.5): one spark-submit of the default line fewer. Spark's own submission client
creates the driver pod; the driver (in a pod, client mode, as Spark's image runs it)
creates its executor pods through the API server; the chart's webhook injects the
native sidecar into each; the executors write to a real Apache Kafka cluster (the lab's
engine) listening on the node IP, which the
pods reach over the bridge. Covered:

- the driver pod runs and ends Succeeded; the job's summary says every event was sent
  and acknowledged, and `hangwatch pipeline verify` reads every event of the run back;
- each executor pod Spark created got the native sidecar from the real admission chain
  (an init container with `restartPolicy: Always`, Spark's executor container the only
  regular one, first in the list), labelled with the policy that watches it;
- the sidecar never exits non-zero by itself: each executor pod that ended shows it
  terminated with 0;
- Spark labels each pod with the line's version.

(`completed_run` checks all of this for every submission of the package.)
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest

from hangwatch_lab.kafka import KafkaLab
from hangwatch_pipeline.spark_kafka import DEFAULT_LINE, LINES, SparkLine
from hangwatch_testing.emulated_cluster import OperatorRun
from hangwatch_testing.node.cluster import NodeCluster
from tests.node.test_spark_submit.submission import (
    EVENTS,
    PodRecorder,
    Submission,
    completed_run,
)

pytestmark = [pytest.mark.xdist_group("node"), pytest.mark.timeout(2400)]


OTHER_LINES = [line for line in LINES if line != DEFAULT_LINE]
"""The lines this module submits a healthy job on: the default line's run is every fault
test's (see above)."""


@pytest.mark.parametrize("line", OTHER_LINES, ids=[line.name for line in OTHER_LINES])
def test_spark_submit_runs_the_pipeline_with_sidecars_and_verify_finds_every_event(
    node: NodeCluster,
    line_images: Callable[[SparkLine], str],
    kafka: KafkaLab,
    operator: OperatorRun,
    tmp_path: Path,
    line: SparkLine,
) -> None:
    """Each supported Spark line: its own spark-submit (its pyspark's) submits the job in
    its own image (its pyspark, its Kafka connector)."""
    image = line_images(line)
    run_id = f"k8s-{uuid.uuid4().hex[:8]}"
    recorder = PodRecorder(node)
    submission = Submission(node, image, kafka, run_id, tmp_path, line=line)
    try:
        submitted = submission.wait()
    finally:
        submission.stop()
        time.sleep(1)
        recorder.close()
    completed_run(node, recorder, submitted, kafka, run_id, EVENTS, line)
