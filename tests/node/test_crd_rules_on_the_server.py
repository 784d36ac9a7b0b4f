"""The chart's CRD on a current server: every rule, CEL included, enforced by the server.

The chart is installed by Helm with server-side apply (the session's `release`). Covered:

- the ProducerHealthPolicy CRD is Established with its CEL rules
  (`x-kubernetes-validations`) kept by the server;
- both example policies are accepted;
- every document in examples/invalid is rejected by the server with the error its
  `# expect:` line names, item indexes included (this release words a CEL failure
  without the `"object": ` older servers print); that covers the five that only a
  CEL rule catches (on v1.20 the server dropped those rules and accepted them).
"""

from __future__ import annotations

import json
import urllib.error
from typing import Any

import pytest
import yaml

from hangwatch_testing.kube.release import HelmRelease
from hangwatch_testing.node.cluster import NodeCluster
from hangwatch_testing.node.workloads import ensure_namespace
from hangwatch_testing.structural import CEL_ONLY_INVALID, EXAMPLES, expected_error

pytestmark = pytest.mark.xdist_group("node")

CRD = "producerhealthpolicies.hangwatch.dev"
INVALID = sorted(p.name for p in (EXAMPLES / "invalid").glob("*.yaml"))
NAMESPACE = "crd-rules"


def _collection(namespace: str) -> str:
    return f"/apis/hangwatch.dev/v1alpha1/namespaces/{namespace}/producerhealthpolicies"


def _rules(schema: Any) -> int:
    """How many x-kubernetes-validations rules the schema carries, at any depth."""
    if isinstance(schema, dict):
        own = len(schema.get("x-kubernetes-validations", ()))
        return own + sum(_rules(value) for value in schema.values())
    if isinstance(schema, list):
        return sum(_rules(value) for value in schema)
    return 0


def test_crd_is_established_with_its_cel_rules(node: NodeCluster, release: HelmRelease) -> None:
    crd = node.get(f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{CRD}")
    conditions = {c["type"]: c["status"] for c in crd["status"]["conditions"]}
    assert conditions["Established"] == "True"
    assert "NonStructuralSchema" not in conditions
    stored = sum(_rules(v["schema"]) for v in crd["spec"]["versions"])
    assert stored >= len(CEL_ONLY_INVALID)


@pytest.mark.parametrize("example", ["policy-spark-executors.yaml", "policy-dry-run.yaml"])
def test_example_policies_are_accepted(
    node: NodeCluster, release: HelmRelease, example: str
) -> None:
    body = yaml.safe_load((EXAMPLES / example).read_text())
    namespace = body["metadata"]["namespace"]
    ensure_namespace(node, namespace)
    stored = node.create(_collection(namespace), body)
    assert stored["metadata"]["name"] == body["metadata"]["name"]


@pytest.mark.parametrize("example", INVALID)
def test_invalid_examples_are_rejected_by_the_server(
    node: NodeCluster, release: HelmRelease, example: str
) -> None:
    path = EXAMPLES / "invalid" / example
    body = yaml.safe_load(path.read_text())
    ensure_namespace(node, NAMESPACE)
    body["metadata"]["namespace"] = NAMESPACE
    with pytest.raises(urllib.error.HTTPError) as rejected:
        node.create(_collection(NAMESPACE), body)
    assert rejected.value.code == 422, rejected.value
    message = json.loads(rejected.value.read())["message"]
    assert _current(expected_error(path)) in message, message


def _current(expected: str) -> str:
    """The error as servers since 1.3x word a CEL rule's failure: without the
    `"object": ` that older servers (and the `# expect:` lines) put before the message."""
    return expected.replace('Invalid value: "object": ', "Invalid value: ")
