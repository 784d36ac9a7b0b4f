"""The webhook's pure parts: AdmissionReviews in and out, the decision, logging.

Covers: `read_review` takes the namespace from the object, else the request, and
names a pod by name or generateName; `admit` injects what `build_sidecar_patch`
computes, skips uncovered pods, other operations and already-injected pods, turns a
conflict into a warning naming the policy, and a failure inside into `error` with the
exception's type (never raising); `response_body` is a valid AdmissionReview for v1
and v1beta1 with the patch as base64 JSON and no patch keys without operations;
`Injector.answer` counts every result in `hangwatch_operator_webhook_requests_total`,
logs nothing per injection at INFO but one line a minute with the count, a DEBUG line
per request, and always a conflict, a malformed request or an error (with its
traceback); settling freezes what start-up built out of the cyclic collector, which still
collects what comes later. Hypothesis: `read_review` and `Injector.answer` never raise, for any JSON
value or bytes, and always answer a valid AdmissionReview that allows the pod.
"""

from __future__ import annotations

import base64
import dataclasses
import gc
import json
import logging
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hangwatch_operator import webhook
from hangwatch_operator.admission import (
    Admission,
    Malformed,
    Result,
    Review,
    admit,
    read_review,
    response_body,
)
from hangwatch_operator.injection import build_sidecar_patch
from hangwatch_operator.operator_metrics import REGISTRY
from hangwatch_operator.policies import parse_policy
from hangwatch_operator.settings import InjectionMode, OperatorSettings
from hangwatch_operator.webhook import Injector
from hangwatch_testing.spark_pods import admission_review, driver_pod, executor_pod
from tests.operator.webhook_server import POLICY_OF

SETTINGS = OperatorSettings()
POLICY_BODY = POLICY_OF["spark-jobs"][0]
POLICY = parse_policy(POLICY_BODY)
POD_NAME = executor_pod()["metadata"]["name"]


def _read(pod: dict[str, Any], namespace: str = "spark-jobs", **request: Any) -> Review:
    review = admission_review(pod, namespace)
    review["request"] |= request
    parsed = read_review(json.dumps(review).encode())
    assert isinstance(parsed, Review), parsed
    return parsed


def _counts() -> dict[str, float]:
    return {
        result.value: REGISTRY.get_sample_value(
            "hangwatch_operator_webhook_requests_total", {"result": result.value}
        )
        or 0.0
        for result in Result
    }


def _injector() -> Injector:
    return Injector(SETTINGS, 30, {"spark-jobs": [POLICY]})


def _broken_injector() -> Injector:
    """An injector whose policy makes the builder fail (a stand-in for a bug)."""
    broken = dataclasses.replace(POLICY, kafka=None)  # type: ignore[arg-type]
    return Injector(SETTINGS, 30, {"spark-jobs": [broken]})


def test_namespace_comes_from_the_object_else_the_request() -> None:
    assert _read(executor_pod(namespace="spark-jobs"), "elsewhere").namespace == "spark-jobs"
    assert _read(executor_pod(namespace=None), "spark-jobs").namespace == "spark-jobs"
    generated = admission_review(executor_pod(), "spark-jobs")
    meta = generated["request"]["object"]["metadata"]
    meta["generateName"] = "exec-"
    del meta["name"]
    parsed = read_review(json.dumps(generated).encode())
    assert isinstance(parsed, Review) and parsed.pod_name == "spark-jobs/exec-*"


def test_a_covered_pod_gets_exactly_the_builders_operations() -> None:
    pod = executor_pod()
    admission = admit(_read(pod), [POLICY], SETTINGS, 30)
    assert admission.result is Result.INJECTED and admission.policy == "orders-writers"
    assert admission.mode is InjectionMode.NATIVE
    assert list(admission.ops) == build_sidecar_patch(pod, POLICY, SETTINGS, InjectionMode.NATIVE)
    legacy = admit(_read(pod), [POLICY], SETTINGS, 28)  # before native sidecars
    assert legacy.mode is InjectionMode.LEGACY


@pytest.mark.parametrize(
    ("pod", "request_fields"),
    [
        (driver_pod(), {}),
        (executor_pod(labels={"team": "search"}), {}),
        (executor_pod(), {"operation": "UPDATE"}),
        (executor_pod(annotations={"hangwatch.dev/injected": "orders-writers"}), {}),
    ],
    ids=["driver", "other-team", "update", "already-injected"],
)
def test_pods_not_to_inject_are_skipped_without_warning(
    pod: dict[str, Any], request_fields: dict[str, Any]
) -> None:
    admission = admit(_read(pod, **request_fields), [POLICY], SETTINGS, 30)
    assert admission.result is Result.SKIPPED and not admission.ops and not admission.warnings


def test_a_conflict_is_skipped_with_a_warning_naming_it() -> None:
    pod = executor_pod()
    pod["spec"]["containers"][0]["ports"].append({"containerPort": SETTINGS.sidecar_port})
    admission = admit(_read(pod), [POLICY], SETTINGS, 30)
    assert admission.result is Result.SKIPPED and admission.policy == "orders-writers"
    assert admission.warnings == (
        "hangwatch: sidecar not injected: container spark-kubernetes-executor already uses "
        "port 9477",
    )


def test_a_failure_inside_is_an_error_that_still_admits() -> None:
    broken = dataclasses.replace(POLICY, kafka=None)  # type: ignore[arg-type]
    admission = admit(_read(executor_pod()), [broken], SETTINGS, 30)
    assert admission.result is Result.ERROR and not admission.ops
    assert admission.warnings == (
        "hangwatch: sidecar not injected: internal error (AttributeError)",
    )
    assert isinstance(admission.error, AttributeError)


@pytest.mark.parametrize("version", ["admission.k8s.io/v1", "admission.k8s.io/v1beta1"])
def test_the_response_is_an_admission_review_of_the_requests_version(version: str) -> None:
    ops = [{"op": "add", "path": "/metadata/labels/a", "value": "b"}]
    answer = json.loads(response_body(version, "u-1", Admission(Result.INJECTED, ops)))
    patch = answer["response"].pop("patch")
    assert answer == {
        "apiVersion": version,
        "kind": "AdmissionReview",
        "response": {"uid": "u-1", "allowed": True, "patchType": "JSONPatch"},
    }
    assert json.loads(base64.b64decode(patch)) == ops
    plain = json.loads(response_body(version, "u-2", Admission(Result.SKIPPED, warnings=("w",))))
    assert plain["response"] == {"uid": "u-2", "allowed": True, "warnings": ["w"]}


def test_every_result_is_counted() -> None:
    injector = _injector()
    before = _counts()
    injector.answer(json.dumps(admission_review(executor_pod(), "spark-jobs")).encode())
    injector.answer(json.dumps(admission_review(driver_pod(), "spark-jobs")).encode())
    injector.answer(b"[]")
    _broken_injector().answer(json.dumps(admission_review(executor_pod(), "spark-jobs")).encode())
    after = _counts()
    assert {k: after[k] - before[k] for k in after} == {
        "injected": 1,
        "skipped": 1,
        "malformed": 1,
        "error": 1,
    }


def test_injections_are_one_info_line_a_minute_and_a_debug_line_each(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    now = [1000.0]
    monkeypatch.setattr(webhook.time, "monotonic", lambda: now[0])
    injector = _injector()
    body = json.dumps(admission_review(executor_pod(), "spark-jobs")).encode()
    with caplog.at_level(logging.INFO, logger=webhook.log.name):
        for _ in range(5):
            injector.answer(body)
            now[0] += 1
    (line,) = [r for r in caplog.records if r.name == webhook.log.name]
    assert line.levelno == logging.INFO
    assert line.getMessage() == (
        f"Injected the hangwatch sidecar into pod spark-jobs/{POD_NAME} "
        "(policy orders-writers, native mode); 1 pods injected since the last such line."
    )
    caplog.clear()
    now[0] += 60
    with caplog.at_level(logging.DEBUG, logger=webhook.log.name):
        injector.answer(body)
        injector.answer(body)
    first, second = [r for r in caplog.records if r.name == webhook.log.name]
    assert first.levelno == logging.INFO and "; 5 pods injected since" in first.getMessage()
    assert second.levelno == logging.DEBUG


def test_conflicts_malformed_requests_and_errors_are_always_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    pod = executor_pod()
    pod["spec"]["volumes"].append({"name": "hangwatch-telemetry", "emptyDir": {}})
    broken = _broken_injector()
    with caplog.at_level(logging.WARNING, logger=webhook.log.name):
        _injector().answer(json.dumps(admission_review(pod, "spark-jobs")).encode())
        _injector().answer(b'{"kind": "AdmissionReview"}')
        broken.answer(json.dumps(admission_review(executor_pod(), "spark-jobs")).encode())
    conflict, bad, error = [r for r in caplog.records if r.name == webhook.log.name]
    assert conflict.levelno == logging.WARNING and "already has a volume" in conflict.getMessage()
    assert bad.getMessage() == (
        "Malformed admission request (uid -): apiVersion is not admission.k8s.io/v1 or "
        "v1beta1; admitted unchanged."
    )
    assert error.levelno == logging.ERROR and error.exc_info is not None
    assert f"spark-jobs/{POD_NAME}" in error.getMessage()


def test_settling_freezes_what_start_up_built_out_of_the_collector(
    caplog: pytest.LogCaptureFixture,
) -> None:
    try:
        with caplog.at_level(logging.INFO, logger=webhook.log.name):
            webhook.settle_garbage_collector()
        assert gc.get_freeze_count() > 1000  # this test process: pytest, kopf, ...
        (line,) = [r.getMessage() for r in caplog.records if r.name == webhook.log.name]
        assert line.startswith("Start-up settled: ") and "kept out of the garbage" in line
        cycle: list[Any] = []
        cycle.append(cycle)
        del cycle
        assert gc.collect() >= 1  # objects made afterwards are still collected
    finally:
        gc.unfreeze()


# --- never raises ----------------------------------------------------------------------

_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=8), children, max_size=3)
    ),
    max_leaves=10,
)


def _valid_answer(body: bytes) -> dict[str, Any]:
    answer = json.loads(body)
    assert answer["kind"] == "AdmissionReview" and answer["response"]["allowed"] is True
    return dict(answer["response"])


@settings(max_examples=100)
@given(
    st.sampled_from(["", "request", "request.object", "request.object.metadata"]),
    _JSON,
)
def test_any_value_anywhere_is_answered(path: str, value: Any) -> None:
    review: Any = admission_review(executor_pod(), "spark-jobs")
    if path:
        *parents, last = path.split(".")
        target = review
        for key in parents:
            target = target[key]
        target[last] = value
    else:
        review = value
    parsed = read_review(json.dumps(review).encode())
    assert isinstance(parsed, Review | Malformed)
    _valid_answer(_injector().answer(json.dumps(review).encode()))


@settings(max_examples=100)
@given(st.binary(max_size=256))
def test_any_bytes_are_answered(data: bytes) -> None:
    response = _valid_answer(_injector().answer(data))
    assert "patch" not in response


def test_policies_index_is_per_namespace() -> None:
    injector = Injector(SETTINGS, 30, {"analytics": [POLICY]})
    body = json.dumps(admission_review(executor_pod(), "spark-jobs")).encode()
    assert "patch" not in _valid_answer(injector.answer(body))  # no policy in spark-jobs
