"""The MutatingWebhookConfiguration that routes Spark and opted-in pod creations to the operator.

Pure: settings and TLS/Service facts in, a manifest out. The chart renders the same
object (a chart test compares the two); `hangwatch_operator.webhook` serves the path
named here. kopf can manage a configuration too (`webhook_managed_configuration`, for
local runs), but it always sets a 30 s timeout and no reinvocation policy, so installs
use this one: a short timeout, `failurePolicy: Ignore`, `reinvocationPolicy: IfNeeded`
(our patch is idempotent), and never the system namespaces or the operator's own.

Two webhooks, one path: `inject-sidecar` for pods that carry a `spark-role` label
(Spark's), `inject-producer-sidecar` for pods labelled `hangwatch.dev/producer: "true"`
that carry none (a producer service's pods; `policies.pod_role`). The selectors exclude
each other, so the API server never calls the operator twice for one pod.
"""

from __future__ import annotations

import base64
import copy
from typing import Any

from hangwatch_operator.policies import PRODUCER_LABEL, PRODUCER_LABEL_VALUE, SPARK_ROLE_LABEL
from hangwatch_operator.settings import OperatorSettings

WEBHOOK_ID = "inject-sidecar"
"""kopf handler id of the mutating handler; kopf serves it at `/<id>`."""

WEBHOOK_NAME = "inject-sidecar.hangwatch.dev"
PRODUCER_WEBHOOK_ID = "inject-producer-sidecar"
"""kopf handler id of the same handler for `producer` pods (kopf's managed configuration
only: installs route both webhooks to `WEBHOOK_ID`'s path)."""
PRODUCER_WEBHOOK_NAME = "inject-producer-sidecar.hangwatch.dev"
OBJECT_SELECTORS: dict[str, dict[str, Any]] = {
    WEBHOOK_NAME: {"matchExpressions": [{"key": SPARK_ROLE_LABEL, "operator": "Exists"}]},
    PRODUCER_WEBHOOK_NAME: {
        "matchLabels": {PRODUCER_LABEL: PRODUCER_LABEL_VALUE},
        "matchExpressions": [{"key": SPARK_ROLE_LABEL, "operator": "DoesNotExist"}],
    },
}
"""Webhook name -> the pods it sends to the operator (they exclude each other)."""
SYSTEM_NAMESPACES = ("kube-system", "kube-public", "kube-node-lease")


def build_webhook_configuration(
    settings: OperatorSettings,
    *,
    ca_bundle: bytes,
    service_name: str,
    service_port: int = 443,
    name: str = "hangwatch-sidecar-injector",
) -> dict[str, Any]:
    """The admissionregistration.k8s.io/v1 MutatingWebhookConfiguration for injection."""
    excluded = [*SYSTEM_NAMESPACES, settings.operator_namespace]
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "MutatingWebhookConfiguration",
        "metadata": {"name": name, "labels": {"app.kubernetes.io/name": "hangwatch"}},
        "webhooks": [
            {
                "name": webhook_name,
                "admissionReviewVersions": ["v1"],
                "sideEffects": "None",
                "failurePolicy": settings.webhook_failure_policy,
                "timeoutSeconds": settings.webhook_timeout_seconds,
                "reinvocationPolicy": "IfNeeded",
                "matchPolicy": "Equivalent",
                "clientConfig": {
                    "service": {
                        "name": service_name,
                        "namespace": settings.operator_namespace,
                        "path": f"/{WEBHOOK_ID}",
                        "port": service_port,
                    },
                    "caBundle": base64.b64encode(ca_bundle).decode("ascii"),
                },
                "rules": [
                    {
                        "apiGroups": [""],
                        "apiVersions": ["v1"],
                        "resources": ["pods"],
                        "operations": ["CREATE"],
                        "scope": "Namespaced",
                    }
                ],
                "namespaceSelector": {
                    "matchExpressions": [
                        {
                            "key": "kubernetes.io/metadata.name",
                            "operator": "NotIn",
                            "values": excluded,
                        }
                    ]
                },
                "objectSelector": copy.deepcopy(selector),
            }
            for webhook_name, selector in OBJECT_SELECTORS.items()
        ],
    }
