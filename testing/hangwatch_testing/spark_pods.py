"""Spark pods and AdmissionReviews as the API server hands them to a mutating webhook.

Not a test module. `executor_pod` follows what Spark 3.5's KubernetesExecutorBuilder
(BasicExecutorFeatureStep, LocalDirsFeatureStep, MountVolumes/KerberosConf steps with
defaults) produces for `spark.kubernetes.executor.*` defaults, after the API server's
defaulting and the ServiceAccount admission plugin (token volume) ran, which happens
before mutating webhooks are called: container `spark-kubernetes-executor`, Spark's
SPARK_* environment, the spark-local-dir-1 emptyDir, the exec conf ConfigMap volume,
the labels Spark sets and an ownerReference to the driver pod.
"""

from __future__ import annotations

import copy
import uuid
from typing import Any

APP_ID = "spark-5b1f0c2ad83e4f06a7c29e1d4b3f8a60"
APP_NAME = "orders-enricher"
PREFIX = "orders-enricher-8d3c2f9a1b7e4c05"
DRIVER_UID = "0f7e6d5c-4b3a-4291-8e7f-6a5b4c3d2e1f"


def executor_pod(
    exec_id: int = 1,
    *,
    namespace: str | None = "spark-jobs",
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
) -> dict[str, Any]:
    """An executor pod as submitted by the Spark 3.5 driver (with API server defaults)."""
    name = f"{PREFIX}-exec-{exec_id}"
    local_dir = "/var/data/spark-2f1e0d9c-8b7a-4c6d-9e5f-4a3b2c1d0e9f"
    metadata: dict[str, Any] = {
        "name": name,
        "labels": {
            "spark-app-name": APP_NAME,
            "spark-app-selector": APP_ID,
            "spark-exec-id": str(exec_id),
            "spark-exec-resourceprofile-id": "0",
            "spark-role": "executor",
            "spark-version": "3.5.1",
            "team": "payments",
            **(labels or {}),
        },
        "ownerReferences": [
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "name": f"{PREFIX}-driver",
                "uid": DRIVER_UID,
                "controller": True,
            }
        ],
    }
    if namespace is not None:
        metadata["namespace"] = namespace
    if annotations:
        metadata["annotations"] = dict(annotations)
    driver_url = f"spark://CoarseGrainedScheduler@{PREFIX}-driver-svc.spark-jobs.svc:7078"
    env = [
        {"name": "SPARK_USER", "value": "spark"},
        {"name": "SPARK_DRIVER_URL", "value": driver_url},
        {"name": "SPARK_EXECUTOR_CORES", "value": "2"},
        {"name": "SPARK_EXECUTOR_MEMORY", "value": "4g"},
        {"name": "SPARK_APPLICATION_ID", "value": APP_ID},
        {"name": "SPARK_CONF_DIR", "value": "/opt/spark/conf"},
        {"name": "SPARK_EXECUTOR_ID", "value": str(exec_id)},
        {"name": "SPARK_RESOURCE_PROFILE_ID", "value": "0"},
        {
            "name": "SPARK_EXECUTOR_POD_IP",
            "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "status.podIP"}},
        },
        {
            "name": "SPARK_EXECUTOR_POD_NAME",
            "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.name"}},
        },
        {"name": "SPARK_JAVA_OPT_0", "value": "-Dspark.driver.port=7078"},
        {"name": "SPARK_LOCAL_DIRS", "value": local_dir},
    ]
    container = {
        "name": "spark-kubernetes-executor",
        "image": "apache/spark:3.5.1-scala2.12-java17-python3-ubuntu",
        "imagePullPolicy": "IfNotPresent",
        "args": ["executor"],
        "env": env,
        "ports": [{"name": "blockmanager", "containerPort": 7079, "protocol": "TCP"}],
        "resources": {
            "requests": {"cpu": "2", "memory": "4505Mi"},
            "limits": {"memory": "4505Mi"},
        },
        "volumeMounts": [
            {"name": "spark-local-dir-1", "mountPath": local_dir},
            {"name": "spark-conf-volume-exec", "mountPath": "/opt/spark/conf"},
            {
                "name": "kube-api-access-7xk2p",
                "readOnly": True,
                "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount",
            },
        ],
        "terminationMessagePath": "/dev/termination-log",
        "terminationMessagePolicy": "File",
    }
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": metadata,
        "spec": {
            "hostname": f"{PREFIX}-exec-{exec_id}",
            "restartPolicy": "Never",
            "enableServiceLinks": False,
            "containers": [container],
            "volumes": [
                {"name": "spark-local-dir-1", "emptyDir": {}},
                {
                    "name": "spark-conf-volume-exec",
                    "configMap": {
                        "name": f"spark-exec-{PREFIX}-conf-map",
                        "items": [{"key": "spark-env.sh", "path": "spark-env.sh"}],
                        "defaultMode": 420,
                    },
                },
                _token_volume(),
            ],
            "dnsPolicy": "ClusterFirst",
            "schedulerName": "default-scheduler",
            "serviceAccountName": "default",
            "securityContext": {},
            "terminationGracePeriodSeconds": 30,
            "priority": 0,
            "tolerations": [
                {
                    "key": f"node.kubernetes.io/{reason}",
                    "operator": "Exists",
                    "effect": "NoExecute",
                    "tolerationSeconds": 300,
                }
                for reason in ("not-ready", "unreachable")
            ],
        },
    }


def driver_pod() -> dict[str, Any]:
    """The driver of the same application (spark-role=driver, no exec id)."""
    pod = executor_pod()
    labels = pod["metadata"]["labels"]
    for key in ("spark-exec-id", "spark-exec-resourceprofile-id"):
        labels.pop(key)
    labels["spark-role"] = "driver"
    pod["metadata"]["name"] = f"{PREFIX}-driver"
    pod["metadata"].pop("ownerReferences")
    container = pod["spec"]["containers"][0]
    container["name"] = "spark-kubernetes-driver"
    container["args"] = ["driver", "--properties-file", "/opt/spark/conf/spark.properties"]
    container["env"] = [e for e in container["env"] if e["name"].startswith("SPARK_USER")]
    return pod


def admission_review(pod: dict[str, Any], namespace: str) -> dict[str, Any]:
    """An admission.k8s.io/v1 AdmissionReview for creating `pod` in `namespace`."""
    gvk = {"group": "", "version": "v1", "kind": "Pod"}
    gvr = {"group": "", "version": "v1", "resource": "pods"}
    return {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": str(uuid.uuid4()),
            "kind": gvk,
            "resource": gvr,
            "requestKind": gvk,
            "requestResource": gvr,
            "name": pod["metadata"]["name"],
            "namespace": namespace,
            "operation": "CREATE",
            "userInfo": {
                "username": "system:serviceaccount:spark-jobs:spark",
                "uid": "3c1b2a09-8f7e-4d6c-b5a4-93827160f5e4",
                "groups": [
                    "system:serviceaccounts",
                    "system:serviceaccounts:spark-jobs",
                    "system:authenticated",
                ],
            },
            "object": copy.deepcopy(pod),
            "oldObject": None,
            "dryRun": False,
            "options": {"apiVersion": "meta.k8s.io/v1", "kind": "CreateOptions"},
        },
    }


def _token_volume() -> dict[str, Any]:
    return {
        "name": "kube-api-access-7xk2p",
        "projected": {
            "defaultMode": 420,
            "sources": [
                {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
                {
                    "configMap": {
                        "name": "kube-root-ca.crt",
                        "items": [{"key": "ca.crt", "path": "ca.crt"}],
                    }
                },
                {
                    "downwardAPI": {
                        "items": [
                            {
                                "path": "namespace",
                                "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"},
                            }
                        ]
                    }
                },
            ],
        },
    }


SPARK_UID = 185
"""The user Spark's Kubernetes images run as."""


def make_restricted(pod: dict[str, Any], uid: int = SPARK_UID) -> dict[str, Any]:
    """`pod` changed (in place, and returned) to meet the restricted Pod Security Standard
    as a team would write it in a pod template: non-root as `uid` (and its group),
    seccomp RuntimeDefault, no privilege escalation, every capability dropped."""
    pod["spec"]["securityContext"] = {
        "runAsNonRoot": True,
        "runAsUser": uid,
        "runAsGroup": uid,
        "seccompProfile": {"type": "RuntimeDefault"},
    }
    for container in pod["spec"]["containers"]:
        container["securityContext"] = {
            "allowPrivilegeEscalation": False,
            "capabilities": {"drop": ["ALL"]},
        }
    return pod
