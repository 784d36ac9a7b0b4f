"""The package's fixtures, set up once for its modules: the default line's Spark image in
the node, a real Kafka cluster on the node IP, the namespace as the example's README
prepares it with a policy for the job's executors, and the chart's operator running.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from hangwatch_lab.kafka import KafkaLab
from hangwatch_pipeline.spark_kafka import DEFAULT_LINE
from hangwatch_testing.containers import ROOT, bookworm_python_rootfs, require_tools, run
from hangwatch_testing.emulated_cluster import OperatorRun
from hangwatch_testing.kube.release import HelmRelease, running_operator
from hangwatch_testing.node.cluster import NodeCluster
from hangwatch_testing.node.workloads import wait_operator_ready
from tests.node.test_spark_submit.submission import (
    POLICY_NAME,
    SPARK_NAMESPACE,
    TOPIC,
    prepare_namespace,
    remove_pods,
)

RESTART_GRACE_SECONDS = 10
"""The operator's grace period for a `restart` here (`restart_grace_seconds`, 30 s by
default). A deleted wedged executor's JVM does not end on SIGTERM (its shutdown waits on
the wedged producer), so it runs until the grace is over, and Spark asks for a
replacement only once the pod no longer runs: the grace is part of every restart test's
time. (A `decommission` uses the pod's own grace, 30 s here.)"""


@pytest.fixture(scope="package")
def spark_image(node: NodeCluster) -> str:
    """The default line's Spark image (scripts/build-spark-image.sh's, cached by content;
    setup builds it ahead), imported into the node once for the package: the one every
    job of the package runs in. (The 3.5 line runs on Kubernetes in the example's own
    image, tests/node/test_install_from_registries.py.)"""
    require_tools()
    script = ROOT / "scripts" / "build-spark-image.sh"
    rootfs = bookworm_python_rootfs()
    built = run(["bash", str(script), str(rootfs), "--line", DEFAULT_LINE.name], timeout=3600)
    paths = dict(ln.split("=", 1) for ln in built.stdout.splitlines() if "=" in ln)
    started = time.monotonic()
    node.import_image(Path(paths["SPARK_ARCHIVE"]))
    took = time.monotonic() - started
    print(f"node tier: Spark {DEFAULT_LINE.name} image imported in {took:.0f} s", flush=True)
    return paths["SPARK_IMAGE"]


@pytest.fixture(scope="package")
def kafka(node: NodeCluster) -> Iterator[KafkaLab]:
    """A real Kafka cluster (one KRaft node) whose client listener is on the node IP."""
    lab = KafkaLab(brokers=1, topics={TOPIC: 4}, host=node.node_ip).start()
    try:
        yield lab
    finally:
        lab.close()


@pytest.fixture(scope="package")
def operator(
    node: NodeCluster,
    release: HelmRelease,
    hangwatch_image: str,
    kafka: KafkaLab,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[OperatorRun]:
    """The namespace as the example's README prepares it (rbac.yaml, the kafka-client
    Secret the executors' environment names), a policy for the application's executors
    probing this Kafka, and the chart's operator running; afterwards the namespace's
    pods deleted."""
    prepare_namespace(node, kafka)
    try:
        with running_operator(
            node,
            tmp_path_factory.mktemp("spark-operator"),
            HANGWATCH_OPERATOR_RESTART_GRACE_SECONDS=str(RESTART_GRACE_SECONDS),
        ) as (run, _):
            wait_operator_ready(run, node, release, SPARK_NAMESPACE, POLICY_NAME)
            yield run
    finally:
        remove_pods(node)
