"""Which labelled pods a policy watches: the ones its webhook injected (pure).

Covers `watched.watched_pod` and `watched.injection_problem`: a pod as the webhook
injected it (native and legacy) is watched, with its sidecar port read from the
sidecar container itself; a pod that only carries the `hangwatch.dev/policy` label, a
forged `hangwatch-sidecar` from another image (or with the annotation forged too), a
sidecar probing another bootstrap list, a pod injected for another policy, a role the
policy does not cover, a renamed command, two sidecar containers and a port claimed by
another container are not; a new tag of the same image repository, or the policy's
own `spec.sidecar.image`, are; image repositories are compared without tag or digest;
random pods (hypothesis, typed as the API server stores them) never raise, are never
watched without the annotation naming the policy, and when watched are polled on
their sidecar's own port with the policy's bootstrap list; and `history.CordonLedger`
counts each cordon once, whether or not the node index shows it yet (a round's index
read may be older than its poll), until it is released or two minutes pass.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hangwatch_operator.history import PENDING_CORDON_SECONDS, CordonLedger
from hangwatch_operator.injection import apply_add_ops, build_sidecar_patch
from hangwatch_operator.policies import parse_policy
from hangwatch_operator.settings import InjectionMode, OperatorSettings
from hangwatch_operator.watched import (
    CordonedNode,
    image_repository,
    injection_problem,
    watched_pod,
)
from hangwatch_testing.spark_pods import executor_pod

SETTINGS = OperatorSettings()
BODY = {
    "metadata": {"name": "writers", "namespace": "spark-jobs"},
    "spec": {"kafka": {"bootstrapServers": ["kafka-0:9092", "kafka-1:9092"]}},
}
POLICY = parse_policy(BODY)


def injected(mode: InjectionMode = InjectionMode.NATIVE, policy: Any = POLICY) -> dict[str, Any]:
    pod = executor_pod()
    apply_add_ops(pod, build_sidecar_patch(pod, policy, SETTINGS, mode))
    return pod


def sidecar_of(pod: dict[str, Any]) -> dict[str, Any]:
    spec = pod["spec"]
    containers = [*(spec.get("initContainers") or ()), *spec["containers"]]
    found: dict[str, Any] = next(c for c in containers if c["name"] == "hangwatch-sidecar")
    return found


def problem(pod: dict[str, Any], policy: Any = POLICY) -> str | None:
    return injection_problem(watched_pod(pod, 9477), policy, SETTINGS.sidecar_image)


@pytest.mark.parametrize("mode", [InjectionMode.NATIVE, InjectionMode.LEGACY])
def test_a_pod_the_webhook_injected_is_watched(mode: InjectionMode) -> None:
    pod = injected(mode)
    sidecar_of(pod)["ports"][0]["containerPort"] = 19477
    assert problem(pod) is None
    assert watched_pod(pod, 9477).port == 19477


def test_a_new_tag_or_the_policys_own_image_is_still_the_sidecar() -> None:
    pod = injected()
    sidecar_of(pod)["image"] = "ghcr.io/hangwatch/hangwatch:0.2.0@sha256:" + "0" * 64
    assert problem(pod) is None
    own = parse_policy({**BODY, "spec": {**BODY["spec"], "sidecar": {"image": "reg:5000/hw:1"}}})
    pod = injected(policy=own)
    assert problem(pod, own) is None
    sidecar_of(pod)["image"] = "ghcr.io/hangwatch/hangwatch:0.1.0"
    assert problem(pod, own) is None, "the operator's default repository stays accepted"


def _label_only(pod: dict[str, Any]) -> None:
    pod["metadata"]["labels"]["hangwatch.dev/policy"] = "writers"


def _forged_container(pod: dict[str, Any]) -> None:
    _label_only(pod)
    pod["metadata"]["annotations"] = {"hangwatch.dev/injected": "writers"}
    pod["spec"]["containers"].append(
        {
            "name": "hangwatch-sidecar",
            "image": "evil.example/fake-sidecar:1",
            "command": ["hangwatch", "sidecar"],
            "args": ["--bootstrap", "kafka-0:9092,kafka-1:9092"],
            "ports": [{"name": "hangwatch", "containerPort": 9477}],
        }
    )


def _other_bootstrap(pod: dict[str, Any]) -> None:
    args = sidecar_of(pod)["args"]
    args[args.index("--bootstrap") + 1] = "10.255.255.1:9092"


def _other_policy(pod: dict[str, Any]) -> None:
    pod["metadata"]["annotations"]["hangwatch.dev/injected"] = "readers"


def _driver(pod: dict[str, Any]) -> None:
    pod["metadata"]["labels"]["spark-role"] = "driver"


def _command(pod: dict[str, Any]) -> None:
    sidecar_of(pod)["command"] = ["sh", "-c", "python3 -m http.server 9477"]


def _two_sidecars(pod: dict[str, Any]) -> None:
    pod["spec"]["containers"].append(copy.deepcopy(sidecar_of(pod)))


def _port_elsewhere(pod: dict[str, Any]) -> None:
    sidecar_of(pod).pop("ports")
    pod["spec"]["containers"][0]["ports"] = [{"name": "hangwatch", "containerPort": 8000}]


@pytest.mark.parametrize(
    ("forge", "reason"),
    [
        (_label_only, "annotation hangwatch.dev/injected does not name policy writers"),
        (_forged_container, "image is not from ghcr.io/hangwatch/hangwatch"),
        (_other_bootstrap, "probes another bootstrap list than the policy's"),
        (_other_policy, "does not name policy writers"),
        (_driver, "role 'driver' is not one of the policy's roles"),
        (_command, "does not run hangwatch sidecar"),
        (_two_sidecars, "no hangwatch-sidecar container"),
        (_port_elsewhere, "declares no port named hangwatch"),
    ],
    ids=lambda v: getattr(v, "__name__", "")[1:] or None,
)
def test_a_pod_that_only_looks_injected_is_not_watched(forge: Any, reason: str) -> None:
    pod = executor_pod() if forge in {_label_only, _forged_container} else injected()
    forge(pod)
    found = problem(pod)
    assert found is not None and reason in found


@pytest.mark.parametrize(
    ("image", "repository"),
    [
        ("ghcr.io/hangwatch/hangwatch:0.1.0", "ghcr.io/hangwatch/hangwatch"),
        ("ghcr.io/hangwatch/hangwatch", "ghcr.io/hangwatch/hangwatch"),
        ("registry:5000/team/app:1.2@sha256:abc", "registry:5000/team/app"),
        ("registry:5000/team/app", "registry:5000/team/app"),
        ("app@sha256:abc", "app"),
    ],
)
def test_image_repository_drops_tag_and_digest(image: str, repository: str) -> None:
    assert image_repository(image) == repository


TEXT = st.text(alphabet="ab-:/,.hangwtcsiderkfo0129", max_size=24)
PORTS = st.lists(
    st.fixed_dictionaries(
        {"containerPort": st.integers(1, 65535)},
        optional={"name": st.sampled_from(["hangwatch", "metrics", "x"])},
    ),
    max_size=2,
)
CONTAINER = st.fixed_dictionaries(
    {"name": st.sampled_from(["hangwatch-sidecar", "spark-kubernetes-executor", "x"])},
    optional={
        "image": st.sampled_from(["ghcr.io/hangwatch/hangwatch:9", "evil/hw:1"]) | TEXT,
        "command": st.lists(st.sampled_from(["hangwatch", "sidecar", "sh"]) | TEXT, max_size=3),
        "args": st.lists(
            st.sampled_from(["--bootstrap", "kafka-0:9092,kafka-1:9092", "--port"]) | TEXT,
            max_size=5,
        ),
        "ports": PORTS,
    },
)
"""Containers as the API server stores them (typed), with hangwatch's names likely."""


@given(
    labels=st.dictionaries(st.sampled_from(["hangwatch.dev/policy", "spark-role"]), TEXT),
    annotations=st.dictionaries(st.sampled_from(["hangwatch.dev/injected", "x"]), TEXT),
    init=st.lists(CONTAINER, max_size=2),
    containers=st.lists(CONTAINER, min_size=1, max_size=3),
)
@settings(max_examples=400)
def test_no_pod_is_watched_unless_its_annotation_names_the_policy(
    labels: dict[str, str],
    annotations: dict[str, str],
    init: list[dict[str, Any]],
    containers: list[dict[str, Any]],
) -> None:
    body = {
        "metadata": {"name": "p", "namespace": "spark-jobs", "labels": labels},
        "spec": {"initContainers": init, "containers": containers},
    }
    if annotations:
        body["metadata"]["annotations"] = annotations
    pod = watched_pod(body, 9477)
    found = injection_problem(pod, POLICY, SETTINGS.sidecar_image)
    if annotations.get("hangwatch.dev/injected") != "writers":
        assert found is not None
    if found is None:
        assert pod.sidecar is not None and pod.port == pod.sidecar.port
        assert pod.sidecar.bootstrap == ("kafka-0:9092", "kafka-1:9092")


def test_the_ledger_counts_each_cordon_once_until_released_or_expired() -> None:
    ledger = CordonLedger()
    ledger.reserve("node-a", "jobs/writers", 100.0)
    assert [c.name for c in ledger.known([], 101.0)] == ["node-a"]
    shown = [CordonedNode("node-a", "jobs/writers", 100.5)]
    assert ledger.known(shown, 102.0) == shown, "counted once"
    assert [c.name for c in ledger.known([], 103.0)] == ["node-a"], "a stale index read"
    ledger.release("node-a")
    ledger.reserve("node-b", "jobs/writers", 100.0)
    ledger.release("node-b")
    assert ledger.known([], 101.0) == []
    ledger.reserve("node-c", "other/policy", 100.0)
    assert len(ledger.known([], 100.0 + PENDING_CORDON_SECONDS - 1)) == 1
    assert ledger.known([], 100.0 + PENDING_CORDON_SECONDS) == []
