"""The injection webhook fails open on every malformed request, over real HTTPS.

Against the real operator process of `webhook_server.serving_webhook` (kopf's HTTPS
server, our certificate, kmock's emulator holding the example policies).

Covers: each of these gets HTTP 200 and a valid AdmissionReview that allows the pod
without a patch and names the problem in a warning, and the operator logs it (none
of them may answer 500, as kopf's admission machinery did): a covered executor pod
with `spec: null` or without spec or metadata, a body that is `[]`, `{}`, `null`, a
string, not JSON, invalid UTF-8, nested 100,000 deep, empty, or larger than the
4 MiB limit, `request: null`, the object as a string, a pod of another kind or for
another resource, and wrong types in every field the webhook reads (uid, namespace,
operation, labels, annotations, containers, env, ports, volumes, hostPID); the uid
is echoed whenever the request has one, and the answer's apiVersion is the request's
(admission.k8s.io/v1 or v1beta1, v1 otherwise). Hypothesis then sends AdmissionReviews
with random subtrees replaced or removed, and random JSON and bytes, and checks the
same contract for every answer; when a fuzzed review still gets a patch, the patch
applies to its pod.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from typing import Any

import jsonpatch
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hangwatch_testing.spark_pods import admission_review, executor_pod
from tests.operator.webhook_server import Webhook, patch_ops, serving_webhook

VERSIONS = ["admission.k8s.io/v1", "admission.k8s.io/v1beta1"]
MALFORMED = "hangwatch: sidecar not injected: malformed request ("


@pytest.fixture(scope="module")
def webhook(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Webhook]:
    with serving_webhook(tmp_path_factory.mktemp("malformed")) as served:
        yield served


def _review(**changes: Any) -> dict[str, Any]:
    """A review of a covered executor pod with `changes` ("a.b.0.c" paths) applied."""
    review = admission_review(executor_pod(), "spark-jobs")
    for path, value in changes.items():
        *parents, last = path.split(".")
        target: Any = review
        for key in parents:
            target = target[int(key)] if isinstance(target, list) else target[key]
        if value is _DELETE:
            del target[last]
        elif isinstance(target, list):
            target[int(last)] = value
        else:
            target[last] = value
    return review


_DELETE = object()
_OBJECT = "request.object"
_CONTAINER = f"{_OBJECT}.spec.containers.0"


def _in_pod(path: str, value: Any) -> dict[str, Any]:
    """A review whose pod has `value` at `path` (e.g. "spec.volumes")."""
    return _review(**{f"{_OBJECT}.{path}": value})


def _in_container(path: str, value: Any) -> dict[str, Any]:
    """A review whose pod's first container has `value` at `path` (e.g. "env")."""
    return _review(**{f"{_CONTAINER}.{path}": value})


def _check_answer(status: int, body: bytes, sent: Any) -> dict[str, Any]:
    """The contract for any request: 200, a valid AdmissionReview, allowed, uid echoed."""
    assert status == 200, (status, body[:300])
    answer = json.loads(body)
    response = answer["response"]
    version = sent.get("apiVersion") if isinstance(sent, dict) else None
    assert answer["apiVersion"] == (version if version in VERSIONS else "admission.k8s.io/v1")
    assert answer["kind"] == "AdmissionReview"
    assert response["allowed"] is True
    request = sent.get("request") if isinstance(sent, dict) else None
    uid = request.get("uid") if isinstance(request, dict) else None
    assert response["uid"] == (uid if isinstance(uid, str) else "")
    assert set(response) <= {"uid", "allowed", "warnings", "patch", "patchType"}
    assert all(isinstance(w, str) and len(w) < 256 for w in response.get("warnings", []))
    return response


def _assert_malformed(webhook: Webhook, status: int, body: bytes, sent: Any, problem: str) -> None:
    response = _check_answer(status, body, sent)
    assert "patch" not in response and "patchType" not in response
    assert response["warnings"] == [f"{MALFORMED}{problem})"]
    webhook.operator.wait_for_log("Malformed admission request (")
    webhook.operator.wait_for_log(f": {problem}; admitted unchanged.")


STRUCTURE_CASES = {
    "spec-null": (_in_pod("spec", None), "object.spec is not an object"),
    "no-spec": (_in_pod("spec", _DELETE), "object.spec is not an object"),
    "no-metadata": (
        _in_pod("metadata", _DELETE),
        "object.metadata is not an object",
    ),
    "empty-list": ([], "request body is not a JSON object"),
    "empty-object": ({}, "apiVersion is not admission.k8s.io/v1 or v1beta1"),
    "json-null": (None, "request body is not a JSON object"),
    "a-string": ("AdmissionReview", "request body is not a JSON object"),
    "request-null": (_review(request=None), "request is not an object"),
    "request-a-list": (_review(request=[]), "request is not an object"),
    "object-as-string": (
        _review(**{_OBJECT: json.dumps(executor_pod())}),
        "request.object is not an object",
    ),
    "object-null": (_review(**{_OBJECT: None}), "request.object is not an object"),
    "wrong-kind": (_review(kind="Pod"), "kind is not AdmissionReview"),
    "unknown-version": (
        _review(apiVersion="admission.k8s.io/v2"),
        "apiVersion is not admission.k8s.io/v1 or v1beta1",
    ),
    "no-uid": (_review(**{"request.uid": _DELETE}), "request.uid is not a non-empty string"),
    "uid-a-number": (_review(**{"request.uid": 7}), "request.uid is not a non-empty string"),
    "namespace-a-list": (_review(**{"request.namespace": []}), "request.namespace is not a string"),
    "operation-a-number": (
        _review(**{"request.operation": 1}),
        "request.operation is not a string",
    ),
    "a-deployment": (
        _review(
            **{"request.resource": {"group": "apps", "version": "v1", "resource": "deployments"}}
        ),
        "request.resource is not core pods",
    ),
    "object-of-another-kind": (_in_pod("kind", "Secret"), "object.kind is not Pod"),
    "labels-a-list": (
        _in_pod("metadata.labels", ["spark-role"]),
        "metadata.labels is not an object",
    ),
    "label-a-number": (
        _in_pod("metadata.labels.spark-exec-id", 1),
        "metadata.labels has a value that is not a string",
    ),
    "annotation-a-boolean": (
        _in_pod("metadata.annotations", {"hangwatch.dev/inject": False}),
        "metadata.annotations has a value that is not a string",
    ),
    "name-an-object": (
        _in_pod("metadata.name", {}),
        "metadata.name is not a string",
    ),
    "containers-an-object": (
        _in_pod("spec.containers", {"spark": {}}),
        "spec.containers is not a list",
    ),
    "container-a-string": (
        _review(**{_CONTAINER: "spark"}),
        "spec.containers has an item that is not an object",
    ),
    "env-a-string": (
        _in_container("env", "not-a-list"),
        "spec.containers[0].env is not a list",
    ),
    "env-name-a-number": (
        _in_container("env.0.name", 5),
        "spec.containers[0].env[0].name is not a string",
    ),
    "port-a-string": (
        _in_container("ports.0.containerPort", "9477"),
        "spec.containers[0].ports[0].containerPort is not an integer",
    ),
    "port-a-boolean": (
        _in_container("ports.0.containerPort", True),
        "spec.containers[0].ports[0].containerPort is not an integer",
    ),
    "volume-mounts-a-number": (
        _in_container("volumeMounts", 3),
        "spec.containers[0].volumeMounts is not a list",
    ),
    "volumes-a-string": (
        _in_pod("spec.volumes", "none"),
        "spec.volumes is not a list",
    ),
    "volume-name-a-list": (
        _in_pod("spec.volumes.0.name", ["x"]),
        "spec.volumes[0].name is not a string",
    ),
    "init-containers-a-string": (
        _in_pod("spec.initContainers", "x"),
        "spec.initContainers is not a list",
    ),
    "host-pid-a-string": (
        _in_pod("spec.hostPID", "yes"),
        "spec.hostPID is not a boolean",
    ),
}


@pytest.mark.parametrize("case", sorted(STRUCTURE_CASES))
def test_a_malformed_review_is_allowed_unchanged_and_named(webhook: Webhook, case: str) -> None:
    sent, problem = STRUCTURE_CASES[case]
    status, body = webhook.post(json.dumps(sent).encode())
    _assert_malformed(webhook, status, body, sent, problem)


@pytest.mark.parametrize(
    ("data", "problem"),
    [
        (b"", "request body is not JSON"),
        (b"{not json", "request body is not JSON"),
        (b'{"apiVersion": "\xff\xfe"}', "request body is not JSON"),
        (b"[" * 100_000 + b"]" * 100_000, "request body is not JSON"),
        (b" " * (4 * 1024 * 1024 + 1), "request body larger than 4194304 bytes"),
    ],
    ids=["empty", "not-json", "invalid-utf8", "nested-deep", "too-large"],
)
def test_a_body_that_is_not_a_review_is_allowed_unchanged(
    webhook: Webhook, data: bytes, problem: str
) -> None:
    status, body = webhook.post(data, timeout=30)
    _assert_malformed(webhook, status, body, None, problem)


def test_a_malformed_v1beta1_review_is_answered_in_v1beta1_with_its_uid(webhook: Webhook) -> None:
    sent = _review(apiVersion="admission.k8s.io/v1beta1", **{f"{_OBJECT}.spec": None})
    status, body = webhook.post(json.dumps(sent).encode())
    _assert_malformed(webhook, status, body, sent, "object.spec is not an object")
    assert json.loads(body)["response"]["uid"] == sent["request"]["uid"]


def test_a_review_for_another_operation_is_skipped_without_warning(webhook: Webhook) -> None:
    sent = _review(**{"request.operation": "UPDATE"})
    response = _check_answer(*webhook.post(json.dumps(sent).encode()), sent)
    assert response == {"uid": sent["request"]["uid"], "allowed": True}


# --- fuzzing ---------------------------------------------------------------------------

_JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats()
    | st.text(max_size=12)
    | st.sampled_from(["admission.k8s.io/v1", "AdmissionReview", "spark-jobs", "CREATE"]),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=10), children, max_size=4)
    ),
    max_leaves=12,
)
"""Any JSON value (with NaN and infinities, which Python's json reads and writes)."""

_PATHS = [
    "",
    "apiVersion",
    "kind",
    "request",
    "request.uid",
    "request.namespace",
    "request.operation",
    "request.resource",
    _OBJECT,
    f"{_OBJECT}.kind",
    f"{_OBJECT}.metadata",
    f"{_OBJECT}.metadata.name",
    f"{_OBJECT}.metadata.namespace",
    f"{_OBJECT}.metadata.labels",
    f"{_OBJECT}.metadata.labels.spark-role",
    f"{_OBJECT}.metadata.labels.team",
    f"{_OBJECT}.metadata.annotations",
    f"{_OBJECT}.spec",
    f"{_OBJECT}.spec.hostPID",
    f"{_OBJECT}.spec.volumes",
    f"{_OBJECT}.spec.volumes.0",
    f"{_OBJECT}.spec.volumes.0.name",
    f"{_OBJECT}.spec.initContainers",
    f"{_OBJECT}.spec.containers",
    _CONTAINER,
    f"{_CONTAINER}.name",
    f"{_CONTAINER}.env",
    f"{_CONTAINER}.env.0",
    f"{_CONTAINER}.env.6.name",
    f"{_CONTAINER}.ports",
    f"{_CONTAINER}.ports.0.containerPort",
    f"{_CONTAINER}.volumeMounts",
]
"""Every field the webhook reads, and the objects around them."""


@st.composite
def _mutated_reviews(draw: st.DrawFn) -> Any:
    """A valid review with one to three subtrees replaced by any JSON, or removed."""
    review: Any = copy.deepcopy(_VALID)
    for _ in range(draw(st.integers(1, 3))):
        path = draw(st.sampled_from(_PATHS))
        value = draw(st.none() if draw(st.booleans()) and path else _JSON)
        if not path:
            return value
        *parents, last = path.split(".")
        target = review
        for key in parents:
            if isinstance(target, dict):
                target = target.get(key)
            elif isinstance(target, list) and key.isdigit() and int(key) < len(target):
                target = target[int(key)]
            else:
                target = None
        if isinstance(target, dict):
            if draw(st.booleans()) and value is None:
                target.pop(last, None)
            else:
                target[last] = value
        elif isinstance(target, list) and last.isdigit() and int(last) < len(target):
            target[int(last)] = value
    return review


_VALID = admission_review(executor_pod(), "spark-jobs")
_FUZZ = settings(
    max_examples=100,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


@_FUZZ
@given(sent=_mutated_reviews())
def test_fuzzed_reviews_are_always_allowed(webhook: Webhook, sent: Any) -> None:
    response = _check_answer(*webhook.post(json.dumps(sent).encode()), sent)
    if "patch" in response:  # still a readable pod a policy covers: the patch must apply
        assert response["patchType"] == "JSONPatch"
        jsonpatch.apply_patch(sent["request"]["object"], patch_ops(response))
    else:
        assert "patchType" not in response


@_FUZZ
@given(sent=_JSON)
def test_any_json_value_is_allowed(webhook: Webhook, sent: Any) -> None:
    response = _check_answer(*webhook.post(json.dumps(sent).encode()), sent)
    assert "patch" not in response


@_FUZZ
@given(data=st.binary(max_size=512))
def test_any_bytes_are_allowed(webhook: Webhook, data: bytes) -> None:
    try:
        sent = json.loads(data)
    except ValueError:
        sent = None
    response = _check_answer(*webhook.post(data), sent)
    assert "patch" not in response
