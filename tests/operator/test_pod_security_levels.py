"""Injection under Pod Security levels, in the pure parts (tests/kube checks the real
admission of the injected pods).

Covers: a namespace's enforced level from its labels (hypothesis: any labels, any
string values - an exact level counts, none the cluster default, anything else
restricted, never an exception); which features each level forbids; `admit` leaves
the process view out below privileged, with a warning naming the namespace, the level
and the evidence lost, and tells the sidecar (`HANGWATCH_NOT_JUDGED`), while the
default injection never adds a capability at any level; the sidecar runs as the
executor's declared user and group, never root (hypothesis: any securityContext
values); the webhook reads a namespace only for a policy that asks for such a feature,
caches it, shares concurrent reads and treats a failed read as restricted; an Event on
the policy once per `renotify_seconds` with the count of pods since, none for a dry
run; the policy's
status counts the pods whose sidecars report features left out.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hangwatch import pod_security
from hangwatch.pod_security import (
    ENFORCE_LABEL,
    NOT_JUDGED_ENV,
    Feature,
    Level,
    enforced_level,
    forbidden,
    format_not_judged,
    parse_not_judged,
)
from hangwatch_operator.admission import Result, Review, admit, read_review
from hangwatch_operator.injection import SIDECAR_UID, executor_identity
from hangwatch_operator.namespace_levels import NamespaceLevels
from hangwatch_operator.policies import ProcessView, parse_policy
from hangwatch_operator.reporting import LEFT_OUT_REASON
from hangwatch_operator.settings import InjectionMode, OperatorSettings
from hangwatch_operator.webhook import Injector
from hangwatch_testing.spark_pods import admission_review, executor_pod
from tests.operator.webhook_server import POLICY_OF

SETTINGS = OperatorSettings()
POLICY = parse_policy(POLICY_OF["spark-jobs"][0])
VIEWING = dataclasses.replace(POLICY, process_view=ProcessView(enabled=True))
RESTRICTED_CONTEXT = {
    "runAsNonRoot": True,
    "runAsUser": SIDECAR_UID,
    "runAsGroup": SIDECAR_UID,
    "readOnlyRootFilesystem": True,
    "allowPrivilegeEscalation": False,
    "capabilities": {"drop": ["ALL"]},
    "seccompProfile": {"type": "RuntimeDefault"},
}


def _review(pod: dict[str, Any] | None = None, namespace: str = "spark-jobs") -> Review:
    review = read_review(json.dumps(admission_review(pod or executor_pod(), namespace)).encode())
    assert isinstance(review, Review)
    return review


def _sidecar(ops: Any) -> dict[str, Any]:
    (sidecar,) = [
        op["value"][0] if isinstance(op["value"], list) else op["value"]
        for op in ops
        if op["path"].startswith("/spec/initContainers")
        or (op["path"].startswith("/spec/containers") and "hangwatch-sidecar" in str(op["value"]))
    ]
    assert sidecar["name"] == "hangwatch-sidecar"
    return dict(sidecar)


def _env(sidecar: dict[str, Any]) -> dict[str, Any]:
    return {e["name"]: e.get("value") for e in sidecar["env"]}


@given(
    st.dictionaries(st.text(max_size=60), st.text(max_size=40), max_size=6),
    st.sampled_from(Level),
)
def test_any_labels_give_a_level(labels: dict[str, str], default: Level) -> None:
    level = enforced_level(labels, default)
    assert isinstance(level, Level)
    if ENFORCE_LABEL not in labels:
        assert level is default


@given(st.text(max_size=40), st.sampled_from(Level))
def test_an_enforce_label_is_its_exact_level_else_restricted(value: str, default: Level) -> None:
    level = enforced_level({ENFORCE_LABEL: value, "team": "payments"}, default)
    exact = value in {"privileged", "baseline", "restricted"}
    assert level is (Level(value) if exact else Level.RESTRICTED)


@pytest.mark.parametrize("labels", [None, [], "restricted", {ENFORCE_LABEL: 3}])
def test_labels_of_the_wrong_shape_are_read_safely(labels: Any) -> None:
    level = enforced_level(labels, Level.PRIVILEGED)
    assert level is (Level.RESTRICTED if isinstance(labels, dict) else Level.PRIVILEGED)


def test_only_privileged_admits_the_process_view() -> None:
    wanted = [Feature.PROCESS_VIEW]
    assert forbidden(wanted, Level.PRIVILEGED) == ()
    assert forbidden(wanted, Level.BASELINE) == (Feature.PROCESS_VIEW,)
    assert forbidden(wanted, Level.RESTRICTED) == (Feature.PROCESS_VIEW,)
    assert forbidden([], Level.RESTRICTED) == ()


@given(st.lists(st.sampled_from(Feature)))
def test_the_not_judged_list_round_trips(features: list[Feature]) -> None:
    assert set(parse_not_judged(format_not_judged(features))) == set(features)


@given(st.text(max_size=80))
def test_any_not_judged_text_is_read(text: str) -> None:
    assert all(isinstance(f, Feature) for f in parse_not_judged(text))


@pytest.mark.parametrize("level", list(Level))
@pytest.mark.parametrize("mode", [30, 28])  # native, legacy
def test_the_default_injection_passes_restricted_at_every_level(level: Level, mode: int) -> None:
    admission = admit(_review(), [POLICY], SETTINGS, mode, level)
    assert admission.result is Result.INJECTED and admission.warnings == ()
    sidecar = _sidecar(admission.ops)
    assert sidecar["securityContext"] == RESTRICTED_CONTEXT
    assert NOT_JUDGED_ENV not in _env(sidecar)
    assert {"op": "add", "path": "/spec/shareProcessNamespace", "value": True} in admission.ops


def test_the_process_view_is_injected_in_privileged_namespaces_only() -> None:
    kept = admit(_review(), [VIEWING], SETTINGS, 30, Level.PRIVILEGED)
    context = _sidecar(kept.ops)["securityContext"]
    assert context["capabilities"] == {"drop": ["ALL"], "add": ["SYS_PTRACE"]}
    assert context["allowPrivilegeEscalation"] is True
    assert kept.warnings == () and kept.left_out == ()
    assert _env(_sidecar(kept.ops))["HANGWATCH_PYTHON_STACKS"] == "true"
    for level in (Level.BASELINE, Level.RESTRICTED):
        cut = admit(_review(), [VIEWING], SETTINGS, 30, level)
        assert cut.result is Result.INJECTED and cut.left_out == (Feature.PROCESS_VIEW,)
        sidecar = _sidecar(cut.ops)
        assert sidecar["securityContext"] == RESTRICTED_CONTEXT
        env = _env(sidecar)
        assert env["HANGWATCH_PYTHON_STACKS"] == "false"
        assert env[NOT_JUDGED_ENV] == "process_view"
        (warning,) = cut.warnings
        assert f"namespace spark-jobs enforces Pod Security {level}" in warning
        assert "SYS_PTRACE" in warning and "producer_silent" in warning


def test_an_unknown_level_counts_as_restricted() -> None:
    assert admit(_review(), [VIEWING], SETTINGS, 30).left_out == (Feature.PROCESS_VIEW,)


@given(
    st.one_of(st.none(), st.integers(), st.booleans(), st.text(max_size=5), st.floats()),
    st.one_of(st.none(), st.integers(), st.booleans(), st.text(max_size=5)),
    st.one_of(st.none(), st.integers(min_value=-5, max_value=2**40)),
)
def test_the_sidecar_never_runs_as_root_whatever_the_pod_declares(
    container_uid: Any, pod_uid: Any, gid: Any
) -> None:
    container = {
        "name": "spark-kubernetes-executor",
        "securityContext": {"runAsUser": container_uid},
    }
    spec = {"securityContext": {"runAsUser": pod_uid, "runAsGroup": gid}, "containers": [container]}
    uid, group = executor_identity(spec, [container])
    assert isinstance(uid, int) and 1 <= uid <= 2**31 - 1
    assert isinstance(group, int) and 0 <= group <= 2**31 - 1


def test_the_sidecar_takes_the_executors_declared_user_and_group() -> None:
    pod = executor_pod()
    pod["spec"]["securityContext"] = {"runAsUser": 1000, "runAsGroup": 3000}
    pod["spec"]["containers"][0]["securityContext"] = {"runAsUser": 185}
    context = _sidecar(admit(_review(pod), [POLICY], SETTINGS, 30).ops)["securityContext"]
    assert (context["runAsUser"], context["runAsGroup"]) == (185, 3000)
    pod["spec"]["containers"][0]["securityContext"] = {"runAsUser": 0}  # root: not copied
    context = _sidecar(admit(_review(pod), [POLICY], SETTINGS, 30).ops)["securityContext"]
    assert (context["runAsUser"], context["runAsGroup"]) == (SIDECAR_UID, 3000)


class _Reader:
    def __init__(self, labels: dict[str, str] | None, fail: bool = False) -> None:
        self.labels, self.fail, self.calls = labels, fail, 0

    async def __call__(self, name: str, timeout: float) -> dict[str, Any]:
        self.calls += 1
        await asyncio.sleep(0.01)
        if self.fail:
            raise OSError("no route to the API server")
        return {"metadata": {"name": name, "labels": self.labels}}


def test_namespace_levels_are_read_once_cached_and_fail_safe() -> None:
    async def scenario() -> None:
        now = [0.0]
        reader = _Reader({ENFORCE_LABEL: "privileged"})
        levels = NamespaceLevels(reader, Level.RESTRICTED, clock=lambda: now[0])
        got = await asyncio.gather(*(levels.level("spark-jobs") for _ in range(5)))
        assert got == [Level.PRIVILEGED] * 5 and reader.calls == 1
        assert await levels.level("spark-jobs") is Level.PRIVILEGED and reader.calls == 1
        now[0] += 31
        reader.labels = None  # the label was removed: the cluster default
        assert await levels.level("spark-jobs") is Level.RESTRICTED and reader.calls == 2
        broken = NamespaceLevels(_Reader(None, fail=True), Level.PRIVILEGED)
        assert await broken.level("spark-jobs") is Level.RESTRICTED

    asyncio.run(scenario())


def test_the_webhook_reads_a_namespace_only_for_a_policy_that_needs_it() -> None:
    async def scenario() -> None:
        reader = _Reader({ENFORCE_LABEL: "baseline"})
        plain = Injector(SETTINGS, 30, {"spark-jobs": [POLICY]})
        plain.levels = NamespaceLevels(reader, Level.PRIVILEGED)
        assert await plain.level_for(_review()) is Level.RESTRICTED and reader.calls == 0
        viewing = Injector(SETTINGS, 30, {"spark-jobs": [VIEWING]})
        viewing.levels = NamespaceLevels(reader, Level.PRIVILEGED)
        assert await viewing.level_for(_review()) is Level.BASELINE and reader.calls == 1

    asyncio.run(scenario())


class _Api:
    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []

    async def create_event(self, body: dict[str, Any]) -> dict[str, Any]:
        self.events.append(body)
        return body


def test_a_left_out_feature_is_an_event_on_the_policy_once_per_renotify() -> None:
    async def scenario() -> list[dict[str, Any]]:
        api = _Api()
        policy = dataclasses.replace(VIEWING, uid="0f0f")
        injector = Injector(SETTINGS, 30, {"spark-jobs": [policy]}, api=api)  # type: ignore[arg-type]
        for _ in range(3):
            injector.answer(json.dumps(admission_review(executor_pod(), "spark-jobs")).encode())
        await asyncio.sleep(0)
        await asyncio.gather(*injector._posting)
        return api.events

    (event,) = asyncio.run(scenario())
    assert event["reason"] == LEFT_OUT_REASON and event["type"] == "Warning"
    assert event["involvedObject"] == {
        "apiVersion": "hangwatch.dev/v1alpha1",
        "kind": "ProducerHealthPolicy",
        "name": VIEWING.name,
        "namespace": "spark-jobs",
        "uid": "0f0f",
    }
    assert "process_view left out" in event["message"]
    assert f"Pod spark-jobs/{executor_pod()['metadata']['name']}" in event["message"]


def test_a_dry_run_posts_no_event() -> None:
    async def scenario() -> list[dict[str, Any]]:
        api = _Api()
        injector = Injector(SETTINGS, 30, {"spark-jobs": [VIEWING]}, api=api)  # type: ignore[arg-type]
        review = admission_review(executor_pod(), "spark-jobs")
        review["request"]["dryRun"] = True
        body = json.loads(injector.answer(json.dumps(review).encode()))
        assert body["response"]["warnings"]  # the warning still reaches the client
        await asyncio.sleep(0)
        return api.events

    assert asyncio.run(scenario()) == []


def test_the_answer_carries_the_warning() -> None:
    injector = Injector(SETTINGS, 30, {"spark-jobs": [VIEWING]})
    body = injector.answer(json.dumps(admission_review(executor_pod(), "spark-jobs")).encode())
    (warning,) = json.loads(body)["response"]["warnings"]
    assert warning == pod_security.warning(Feature.PROCESS_VIEW, Level.RESTRICTED, "spark-jobs")


def test_legacy_mode_resolution_is_unaffected() -> None:
    assert admit(_review(), [POLICY], SETTINGS, 28).mode is InjectionMode.LEGACY
