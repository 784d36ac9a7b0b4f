"""The package's fixtures, set up once for its modules: each line's Spark image in the
node, a real Kafka cluster on the node IP, the namespace as the example's README
prepares it with a policy for the job's executors, and the chart's operator running.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from hangwatch_lab.kafka import KafkaLab
from hangwatch_pipeline.spark_kafka import DEFAULT_LINE, SparkLine
from hangwatch_testing.containers import ROOT, bookworm_python_rootfs, require_tools, run
from hangwatch_testing.emulated_cluster import OperatorRun
from hangwatch_testing.kube.release import HelmRelease, running_operator
from hangwatch_testing.node.cluster import NodeCluster
from hangwatch_testing.node.workloads import ensure_namespace, policy, wait_for, wait_operator_ready
from tests.node.test_spark_submit.submission import (
    APP,
    EXAMPLE,
    POLICY_NAME,
    SPARK_NAMESPACE,
    TOPIC,
)


@pytest.fixture(scope="package")
def line_images(node: NodeCluster) -> Callable[[SparkLine], str]:
    """The Spark image of a line: scripts/build-spark-image.sh's (cached by content),
    imported into the node once for the package."""
    images: dict[str, str] = {}

    def image(line: SparkLine) -> str:
        if line.name not in images:
            require_tools()
            script = ROOT / "scripts" / "build-spark-image.sh"
            rootfs = bookworm_python_rootfs()
            built = run(["bash", str(script), str(rootfs), "--line", line.name], timeout=3600)
            paths = dict(ln.split("=", 1) for ln in built.stdout.splitlines() if "=" in ln)
            started = time.monotonic()
            node.import_image(Path(paths["SPARK_ARCHIVE"]))
            took = time.monotonic() - started
            print(f"node tier: Spark {line.name} image imported in {took:.0f} s", flush=True)
            images[line.name] = paths["SPARK_IMAGE"]
        return images[line.name]

    return image


@pytest.fixture(scope="package")
def spark_image(line_images: Callable[[SparkLine], str]) -> str:
    """The default line's image: the one every job of the fault tests runs in."""
    return line_images(DEFAULT_LINE)


@pytest.fixture(scope="package")
def kafka(node: NodeCluster) -> Iterator[KafkaLab]:
    """A real Kafka cluster (one KRaft node) whose client listener is on the node IP."""
    lab = KafkaLab(brokers=1, topics={TOPIC: 4}, host=node.node_ip).start()
    try:
        yield lab
    finally:
        lab.close()


def _create_all(node: NodeCluster, documents: list[dict[str, Any]]) -> None:
    paths = {
        "ServiceAccount": "/api/v1/namespaces/{}/serviceaccounts",
        "Secret": "/api/v1/namespaces/{}/secrets",
        "Role": "/apis/rbac.authorization.k8s.io/v1/namespaces/{}/roles",
        "RoleBinding": "/apis/rbac.authorization.k8s.io/v1/namespaces/{}/rolebindings",
        "ProducerHealthPolicy": (
            "/apis/hangwatch.dev/v1alpha1/namespaces/{}/producerhealthpolicies"
        ),
    }
    for document in documents:
        document["metadata"]["namespace"] = SPARK_NAMESPACE
        for subject in document.get("subjects", ()):
            subject["namespace"] = SPARK_NAMESPACE
        node.create(paths[document["kind"]].format(SPARK_NAMESPACE), document)


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
    ensure_namespace(node, SPARK_NAMESPACE)
    rbac = [d for d in yaml.safe_load_all((EXAMPLE / "rbac.yaml").read_text()) if d]
    secret = {
        "kind": "Secret",
        "metadata": {"name": "kafka-client"},
        "stringData": {"username": "spark-writer", "password": uuid.uuid4().hex},
    }
    watched = policy(POLICY_NAME, kafka.bootstrap.split(",")[0], app=APP)
    _create_all(node, [*rbac, secret, watched])
    try:
        with running_operator(node, tmp_path_factory.mktemp("spark-operator")) as (run, _):
            wait_operator_ready(run, node, release, SPARK_NAMESPACE, POLICY_NAME)
            yield run
    finally:
        remove_pods(node)


def remove_pods(node: NodeCluster) -> None:
    """Delete the namespace's pods (Spark keeps its completed drivers) and wait until
    the kubelet removed them, so later tests find the node as this package found it."""
    pods = f"/api/v1/namespaces/{SPARK_NAMESPACE}/pods"
    for pod in node.get(pods)["items"]:
        node.delete(f"{pods}/{pod['metadata']['name']}", grace_seconds=5)
    wait_for("the Spark pods to be gone", lambda: not node.get(pods)["items"], 180)
