"""The admission cases whose answers are pinned in `webhook_operations.json`.

Not a test module. Each case is a pod and the namespace of its AdmissionReview,
answered by an operator that holds the policies of `test_webhook_https`'s fixture
(the two examples, a legacy policy in `legacy-jobs` and an invalid one in `broken`)
against an API server reporting 1.30. `record_webhook_operations.py` recorded what
the webhook answered for each of them on the code before issue 15 (kopf's admission
machinery, which diffs the whole pod into a JSON Patch); the tests compare today's
answers with that record, less what injection deliberately added since (`as_recorded`).
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hangwatch import spark_driver
from hangwatch_operator.injection import SIDECAR_CONTAINER
from hangwatch_testing.spark_pods import driver_pod, executor_pod

FIXTURE = "webhook_operations.json"
"""File name, next to this module, of the recorded answers."""
RECORDED: dict[str, Any] = (
    json.loads((Path(__file__).parent / FIXTURE).read_text())
    if (Path(__file__).parent / FIXTURE).exists()
    else {}
)
"""case -> {"pod", "namespace", "operations", "warnings"} as recorded."""

ADDED_SINCE = frozenset(
    {
        spark_driver.SIDECAR_DRIVER_URL_ENV,
        spark_driver.SIDECAR_UI_PORT_ENV,
        "HANGWATCH_FRESH_CONNECT_INTERVAL_SECONDS",
        "HANGWATCH_SOCKET_VIEW",
        "HANGWATCH_SOCKET_PORTS",
        "HANGWATCH_SOCKET_UIDS",
        "HANGWATCH_PYTHON_STACKS",
    }
)
"""Sidecar variables injection gained after the recording: the driver's address and UI
port for the Spark view; the policy's socket view and fresh-connection interval; the
Python stack view's switch."""


def as_recorded(pod: dict[str, Any]) -> dict[str, Any]:
    """A copy of injected `pod` without what injection added since the recording
    (`ADDED_SINCE`). A copy: a patched pod shares the patch's values."""
    pod = copy.deepcopy(pod)
    spec = pod["spec"]
    for container in [*(spec.get("initContainers") or []), *(spec.get("containers") or [])]:
        if container.get("name") == SIDECAR_CONTAINER:
            container["env"] = [e for e in container["env"] if e["name"] not in ADDED_SINCE]
            # the process view (added since): SYS_PTRACE for py-spy, a shared namespace
            security = container["securityContext"]
            security["capabilities"] = {"drop": ["ALL"]}
            security["allowPrivilegeEscalation"] = False
    mode = (pod.get("metadata", {}).get("annotations") or {}).get("hangwatch.dev/injection-mode")
    if mode == "native":
        spec.pop("shareProcessNamespace", None)
    return pod


def _without_env() -> dict[str, Any]:
    pod = executor_pod(3)
    del pod["spec"]["containers"][0]["env"]
    return pod


def _bare_spec() -> dict[str, Any]:
    """No volumes, no volumeMounts, no annotations: every list and map is created."""
    pod = executor_pod(4)
    del pod["spec"]["volumes"]
    del pod["spec"]["containers"][0]["volumeMounts"]
    return pod


def _two_containers() -> dict[str, Any]:
    """A user's own helper container first, Spark's second (found by SPARK_EXECUTOR_ID)."""
    pod = executor_pod(5)
    helper = {"name": "log-shipper", "image": "fluent/fluent-bit:3.0", "env": []}
    pod["spec"]["containers"].insert(0, helper)
    return pod


def _host_pid_legacy() -> dict[str, Any]:
    pod = executor_pod(6, namespace="legacy-jobs")
    pod["spec"]["hostPID"] = True
    return pod


def _env_already_set() -> dict[str, Any]:
    pod = executor_pod(8)
    pod["spec"]["containers"][0]["env"].append(
        {"name": "HANGWATCH_TELEMETRY_DIR", "value": "/custom/telemetry"}
    )
    return pod


def _volume_conflict() -> dict[str, Any]:
    pod = executor_pod()
    pod["spec"]["volumes"].append({"name": "hangwatch-telemetry", "emptyDir": {}})
    return pod


def _port_conflict() -> dict[str, Any]:
    pod = executor_pod()
    pod["spec"]["containers"][0]["ports"].append({"name": "metrics", "containerPort": 9477})
    return pod


def _already_injected() -> dict[str, Any]:
    pod = executor_pod()
    pod["metadata"]["annotations"] = {"hangwatch.dev/injected": "orders-writers"}
    return pod


CASES: dict[str, tuple[Callable[[], dict[str, Any]], str]] = {
    "executor": (executor_pod, "spark-jobs"),
    "executor-7": (lambda: executor_pod(7), "spark-jobs"),
    "no-namespace-in-object": (lambda: executor_pod(namespace=None), "spark-jobs"),
    "own-annotations": (
        lambda: executor_pod(annotations={"prometheus.io/scrape": "false", "a~b/c": "d"}),
        "spark-jobs",
    ),
    "other-annotations": (lambda: executor_pod(annotations={"owner": "payments"}), "spark-jobs"),
    "without-env": (_without_env, "spark-jobs"),
    "bare-spec": (_bare_spec, "spark-jobs"),
    "two-containers": (_two_containers, "spark-jobs"),
    "env-already-set": (_env_already_set, "spark-jobs"),
    "dry-run-policy": (lambda: executor_pod(namespace="analytics"), "analytics"),
    "legacy": (lambda: executor_pod(namespace="legacy-jobs"), "legacy-jobs"),
    "legacy-host-pid": (_host_pid_legacy, "legacy-jobs"),
    "opted-out": (
        lambda: executor_pod(annotations={"hangwatch.dev/inject": "false"}),
        "spark-jobs",
    ),
    "other-team": (lambda: executor_pod(labels={"team": "search"}), "spark-jobs"),
    "driver": (driver_pod, "spark-jobs"),
    "namespace-without-policy": (
        lambda: executor_pod(namespace="no-policy-here"),
        "no-policy-here",
    ),
    "invalid-policy-namespace": (lambda: executor_pod(namespace="broken"), "broken"),
    "already-injected": (_already_injected, "spark-jobs"),
    "volume-conflict": (_volume_conflict, "spark-jobs"),
    "port-conflict": (_port_conflict, "spark-jobs"),
}


def case_pod(name: str) -> tuple[dict[str, Any], str]:
    """A fresh copy of case `name`'s pod and its review's namespace."""
    build, namespace = CASES[name]
    return copy.deepcopy(build()), namespace
