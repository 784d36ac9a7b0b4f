"""The package's ground, checked before its jobs run (the package's first test; it sets up
the package's fixtures, so their time is its own row in the time table, not the first
job's): the default line's Spark image in the node, the namespace as the example's README
prepares it (rbac.yaml's ServiceAccount, Role and RoleBinding, the kafka-client Secret),
the policy for the job's executors read by the running operator.

A failure here names what the example's preparation missed instead of failing the first
job's spark-submit minutes later.
"""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from hangwatch_lab.kafka import KafkaLab
from hangwatch_testing.emulated_cluster import OperatorRun
from hangwatch_testing.node.cluster import NodeCluster
from tests.node.test_spark_submit.submission import (
    EXAMPLE,
    POLICIES,
    POLICY_NAME,
    SPARK_NAMESPACE,
)

pytestmark = [pytest.mark.xdist_group("node"), pytest.mark.timeout(1200)]

KIND_PATHS = {
    "ServiceAccount": f"/api/v1/namespaces/{SPARK_NAMESPACE}/serviceaccounts",
    "Role": f"/apis/rbac.authorization.k8s.io/v1/namespaces/{SPARK_NAMESPACE}/roles",
    "RoleBinding": f"/apis/rbac.authorization.k8s.io/v1/namespaces/{SPARK_NAMESPACE}/rolebindings",
}


def test_the_jobs_run_where_the_examples_readme_prepares_them(
    node: NodeCluster, spark_image: str, kafka: KafkaLab, operator: OperatorRun
) -> None:
    """The Spark image is in containerd; each object of the example's rbac.yaml and the
    kafka-client Secret are in the namespace; the operator has read the policy's current
    generation, which probes this package's Kafka."""
    images = node.ctr("images", "ls", "-q").stdout.split()
    assert spark_image in images, images
    rbac = [d for d in yaml.safe_load_all((EXAMPLE / "rbac.yaml").read_text()) if d]
    assert sorted(d["kind"] for d in rbac) == sorted(KIND_PATHS), rbac
    for document in rbac:
        found = node.get(f"{KIND_PATHS[document['kind']]}/{document['metadata']['name']}")
        assert found["metadata"]["namespace"] == SPARK_NAMESPACE, found
    secret = node.get(f"/api/v1/namespaces/{SPARK_NAMESPACE}/secrets/kafka-client")
    assert sorted(secret["data"]) == ["password", "username"], sorted(secret["data"])
    watched: dict[str, Any] = node.get(f"{POLICIES}/{POLICY_NAME}")
    status = watched.get("status") or {}
    assert status.get("observedGeneration") == watched["metadata"]["generation"], status
    assert kafka.bootstrap.split(",")[0] in yaml.safe_dump(watched["spec"]), watched["spec"]
