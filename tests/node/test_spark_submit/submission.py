"""The job submitted as a user submits it, and what every submission must end with.

examples/spark-on-kubernetes/spark-submit.sh itself (the tier adds only what this
cluster needs: its API server, the Spark image built here, two small executors, the
package's namespace, its Kafka cluster as the job's arguments), with the line's own
spark-submit (`spark_submit_bin`); `PodRecorder` keeps the last state of each pod of
the namespace; `completed_run` checks the end of a run (spark-submit exited 0, the
driver Succeeded, every executor carried the native sidecar, no sidecar ended non-zero,
every pod carries the line's Spark version, `hangwatch pipeline verify` reads every event
back).

This cluster has no cluster DNS: the driver advertises its pod IP to the executors
(`SPARK_DRIVER_HOST_IS_POD_IP`, image/spark/entrypoint.sh) rather than its headless
Service's name, and reaches the API server at the node IP
(`spark.kubernetes.driver.master`).
"""

from __future__ import annotations

import http.client
import json
import os
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import yaml

from hangwatch_lab.kafka import KafkaLab
from hangwatch_operator.injection import POLICY_LABEL, SIDECAR_CONTAINER
from hangwatch_pipeline.spark_kafka import DEFAULT_LINE, SparkLine
from hangwatch_testing.containers import ROOT
from hangwatch_testing.kube.cluster import write_kubeconfig
from hangwatch_testing.node.cluster import NodeCluster
from hangwatch_testing.node.workloads import ensure_namespace, policy, wait_for
from hangwatch_testing.processes import run_hangwatch
from hangwatch_testing.spark_line_env import python_of

EXAMPLE = ROOT / "examples" / "spark-on-kubernetes"
SPARK_NAMESPACE = "spark-submit"
"""This module's namespace (the other node tests' policies live in spark-jobs)."""
APP = "orders-enricher"
TOPIC = "events"
POLICY_NAME = "spark-submit-executors"
EVENTS = 20000
PODS = f"/api/v1/namespaces/{SPARK_NAMESPACE}/pods"
SUBMITTER = "spark-orders"
"""The identity spark-submit uses: the driver's ServiceAccount of rbac.yaml."""
POLICIES = f"/apis/hangwatch.dev/v1alpha1/namespaces/{SPARK_NAMESPACE}/producerhealthpolicies"
HEARTBEAT_SECONDS = 15
"""The policy's heartbeat threshold here (the policy default is 30 s): how long a producer's
I/O thread may sit inside user code (Spark's view of the executor's thread dump) or its
telemetry stay unchanged before the verdict is `producer_hung`. Half the default, so the
wedge tests' verdicts come sooner; a healthy producer's telemetry changes every second
and its callbacks return at once, which leaves a loaded node plenty of room."""


def spark_submit_bin(line: SparkLine) -> Path:
    """The directory of `line`'s own spark-submit: the bin of the environment whose
    pyspark is the line's (this interpreter's for the default line, its own virtualenv,
    hangwatch_testing.spark_line_env, for another)."""
    python = Path(sys.executable) if line == DEFAULT_LINE else python_of(line)
    return python.parent


class PodRecorder:
    """Watches the namespace's pods in a thread and keeps the last state of each (by
    uid), with when it was first seen and when it was first seen deleted (a deletion
    timestamp, or its DELETED event): the executors Spark deletes at the end stay
    inspectable, and a deleted pod's last state is the one the kubelet reported before
    it was removed (its containers' exit codes), which polling can miss."""

    def __init__(self, node: NodeCluster) -> None:
        self.node = node
        self.pods: dict[str, dict[str, Any]] = {}
        self.first_seen: dict[str, float] = {}
        self.deleted_seen: dict[str, float] = {}
        self.deletion: dict[str, dict[str, Any]] = {}
        """The first state of each pod seen with a deletion timestamp (its grace period)."""
        listed = node.get(PODS)
        self.earlier = {pod["metadata"]["uid"] for pod in listed["items"]}
        """Pods of earlier submissions (their completed drivers stay): not this run's."""
        self._version: str | None = listed["metadata"]["resourceVersion"]
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)
        self._thread.start()

    def _record(self, pod: dict[str, Any], deleted: bool = False) -> None:
        uid = pod["metadata"]["uid"]
        if uid in self.earlier:
            return
        self.first_seen.setdefault(uid, time.monotonic())
        if deleted or pod["metadata"].get("deletionTimestamp"):
            self.deleted_seen.setdefault(uid, time.monotonic())
            self.deletion.setdefault(uid, pod)
        self.pods[uid] = pod

    def _event(self, event: dict[str, Any]) -> bool:
        """Apply one watch event; true to end this watch (stopping, or history expired)."""
        kind, obj = event.get("type"), event.get("object") or {}
        if kind == "ERROR":  # 410 Gone: the version is too old, list again
            self._version = None
            return True
        self._version = obj.get("metadata", {}).get("resourceVersion", self._version)
        if kind in ("ADDED", "MODIFIED", "DELETED"):
            self._record(obj, deleted=kind == "DELETED")
        return self._stop.is_set()

    def _watch(self) -> None:
        while not self._stop.is_set():
            try:
                if self._version is None:
                    listed = self.node.get(PODS)
                    for pod in listed["items"]:
                        self._record(pod)
                    now_listed = {pod["metadata"]["uid"] for pod in listed["items"]}
                    for uid in set(self.pods) - now_listed:
                        self.deleted_seen.setdefault(uid, time.monotonic())  # gone meanwhile
                    self._version = listed["metadata"]["resourceVersion"]
                query = f"?watch=true&resourceVersion={self._version}&timeoutSeconds=5"
                self.node.watch(f"{PODS}{query}&allowWatchBookmarks=true", self._event)
            except (OSError, ValueError, http.client.HTTPException):  # busy, expired: list again
                self._version = None
                self._stop.wait(0.5)

    def role(self, role: str) -> list[dict[str, Any]]:
        pods = list(self.pods.values())  # a copy: the watch thread adds to it
        return [p for p in pods if p["metadata"]["labels"].get("spark-role") == role]

    def close(self) -> None:
        self._stop.set()
        self._thread.join(10)


def submitter_kubeconfig(node: NodeCluster, workdir: Path) -> Path:
    """A kubeconfig with a token of the example's `spark-orders` ServiceAccount (its Role
    lets it create the driver pod, its ConfigMap and Service): what spark-submit's
    Kubernetes client (fabric8) authenticates with. The tier's admin client key is one
    fabric8 cannot read ("Invalid DER: object is not integer": it decodes PKCS#1 RSA
    keys only, without Bouncy Castle)."""
    request = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {}}
    path = f"/api/v1/namespaces/{SPARK_NAMESPACE}/serviceaccounts/{SUBMITTER}/token"
    token = node.create(path, request)["status"]["token"]
    return write_kubeconfig(
        workdir / "submitter.kubeconfig",
        node.server,
        node.ca,
        user=SUBMITTER,
        token=token,
        namespace=SPARK_NAMESPACE,
    )


class Submission:
    """examples/spark-on-kubernetes/spark-submit.sh with what this cluster needs, running
    (its output in `workdir`/spark-submit.log); `stop` ends it if it still runs. The
    job's arguments end with `--json` (the reference pipeline's summary) unless
    `json_summary` is false (the example's own job, orders_job.py, has none)."""

    def __init__(
        self,
        node: NodeCluster,
        image: str,
        kafka: KafkaLab,
        run_id: str,
        workdir: Path,
        job: tuple[str, ...] = ("--events", str(EVENTS), "--partitions", "8"),
        conf: dict[str, str] | None = None,
        line: SparkLine = DEFAULT_LINE,
        json_summary: bool = True,
    ) -> None:
        options = {
            "spark.kubernetes.namespace": SPARK_NAMESPACE,
            "spark.kubernetes.container.image": image,
            "spark.kubernetes.container.image.pullPolicy": "Never",
            "spark.kubernetes.driver.master": node.server,
            "spark.kubernetes.driverEnv.SPARK_DRIVER_HOST_IS_POD_IP": "true",
            "spark.kubernetes.submission.waitAppCompletion": "true",
            "spark.kubernetes.report.interval": "5s",
            "spark.executor.instances": "2",
            "spark.executor.cores": "1",
            "spark.executor.memory": "512m",
            "spark.driver.memory": "512m",
            "spark.kubernetes.driver.request.cores": "100m",
            "spark.kubernetes.executor.request.cores": "100m",
            "spark.kubernetes.executor.terminationGracePeriodSeconds": "30",
            **(conf or {}),
        }
        self.argv = ["bash", str(EXAMPLE / "spark-submit.sh")]
        for key, value in options.items():
            self.argv += ["--conf", f"{key}={value}"]
        self.argv += [
            "--",
            *("--bootstrap", kafka.bootstrap, "--topic", TOPIC),
            *job,
            *("--run-id", run_id),
            *(("--json",) if json_summary else ()),
        ]
        env = {
            # the suite's SPARK_CONF_DIR stays out: the pods run the example as a user
            # submits it, with what the test adds as `conf` (the fault tests: the
            # short-run JVM options)
            **{k: v for k, v in os.environ.items() if k not in ("SPARK_HOME", "SPARK_CONF_DIR")},
            "PATH": f"{spark_submit_bin(line)}{os.pathsep}{os.environ.get('PATH', '')}",
            "K8S_API": node.server,
            "KUBECONFIG": str(submitter_kubeconfig(node, workdir)),
            "SPARK_LOCAL_DIRS": str(workdir),
        }
        self.log = workdir / "spark-submit.log"
        with self.log.open("w") as out:
            self.process = subprocess.Popen(
                self.argv, env=env, stdout=out, stderr=subprocess.STDOUT
            )

    def wait(self) -> subprocess.CompletedProcess[str]:
        code = self.process.wait(1800)
        return subprocess.CompletedProcess(self.argv, code, self.log.read_text(), "")

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def pod_log(node: NodeCluster, pod: dict[str, Any], container: str) -> str:
    """A container's log as the kubelet wrote it (podLogsDir), without the CRI prefix."""
    meta = pod["metadata"]
    directory = node.workdir / "pod-logs" / f"{meta['namespace']}_{meta['name']}_{meta['uid']}"
    lines = []
    for path in sorted((directory / container).glob("*.log")):
        for line in path.read_text(errors="replace").splitlines():
            lines.append(line.split(" ", 3)[3] if line.count(" ") >= 3 else line)
    return "\n".join(lines)


def job_summary(driver_log: str) -> dict[str, Any]:
    """The job's `--json` summary (an indented JSON object) in the driver's log."""
    start = driver_log.index("\n{\n") + 1
    found: dict[str, Any] = json.JSONDecoder().raw_decode(driver_log[start:])[0]
    return found


def ended_cleanly(
    node: NodeCluster,
    recorder: PodRecorder,
    submitted: subprocess.CompletedProcess[str],
    line: SparkLine = DEFAULT_LINE,
) -> str:
    """Check how every submission must end, whatever its job: spark-submit exited 0, the
    driver pod Succeeded, every executor pod Spark created carried the native sidecar
    and no sidecar ended non-zero, every pod is labelled with `line`'s Spark version (the
    driver's by the submission client, the executors' by the driver in the image).
    Returns the driver's log."""
    drivers = recorder.role("driver")
    assert len(drivers) == 1, submitted.stdout[-5000:]
    driver = drivers[0]
    driver_log = pod_log(node, driver, "spark-kubernetes-driver")
    context = f"--- spark-submit ---\n{submitted.stdout[-3000:]}\n--- driver ---\n"
    context += driver_log[-6000:]
    assert submitted.returncode == 0, context
    assert driver["status"].get("phase") == "Succeeded", context

    executors = recorder.role("executor")
    assert len(executors) >= 2, [p["metadata"]["name"] for p in executors]
    for pod in executors:
        spec, meta = pod["spec"], pod["metadata"]
        assert meta["labels"].get(POLICY_LABEL) == POLICY_NAME, meta["labels"]
        assert [c["name"] for c in spec["initContainers"]] == [SIDECAR_CONTAINER], spec
        assert spec["initContainers"][0]["restartPolicy"] == "Always"
        assert [c["name"] for c in spec["containers"]] == ["spark-kubernetes-executor"]
        for status in pod["status"].get("initContainerStatuses", ()):
            ended = status["state"].get("terminated") or status.get("lastState", {}).get(
                "terminated"
            )
            assert ended is None or ended["exitCode"] == 0, (meta["name"], status)
    versions = {p["metadata"]["labels"].get("spark-version") for p in recorder.pods.values()}
    assert versions == {line.version}, versions
    return driver_log


def every_event_read_back(kafka: KafkaLab, run_id: str, expected: int) -> None:
    """`hangwatch pipeline verify` reads every event of the run back from the topic."""
    verified = run_hangwatch(
        "pipeline",
        "verify",
        *("--bootstrap", kafka.bootstrap, "--topic", TOPIC),
        *("--expect", str(expected), "--run-id", run_id),
        timeout=600,
    )
    assert verified.returncode == 0, verified.stdout + verified.stderr


def completed_run(
    node: NodeCluster,
    recorder: PodRecorder,
    submitted: subprocess.CompletedProcess[str],
    kafka: KafkaLab,
    run_id: str,
    expected: int,
    line: SparkLine = DEFAULT_LINE,
) -> dict[str, Any]:
    """Check what every submission of the reference pipeline must end with: it
    `ended_cleanly`, the job's summary is ok, and `pipeline verify` reads every event of
    the run back. Returns the job's summary."""
    driver_log = ended_cleanly(node, recorder, submitted, line)
    summary = job_summary(driver_log)
    assert summary["run_id"] == run_id and summary["ok"], summary
    assert summary["acknowledged"] >= expected, summary
    every_event_read_back(kafka, run_id, expected)
    return summary


def executor_end(pod: dict[str, Any]) -> dict[str, Any]:
    """How the pod's Spark container ended (its `terminated` state; empty if it had not)."""
    for container in pod["status"].get("containerStatuses", ()):
        if container["name"] == "spark-kubernetes-executor":
            ended: dict[str, Any] = container["state"].get("terminated") or {}
            return ended
    return {}


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


def prepare_namespace(node: NodeCluster, kafka: KafkaLab) -> None:
    """The namespace as the example's README prepares it (rbac.yaml, the kafka-client
    Secret the executors' environment names) and a policy for the application's
    executors probing `kafka`."""
    ensure_namespace(node, SPARK_NAMESPACE)
    rbac = [d for d in yaml.safe_load_all((EXAMPLE / "rbac.yaml").read_text()) if d]
    secret = {
        "kind": "Secret",
        "metadata": {"name": "kafka-client"},
        "stringData": {"username": "spark-writer", "password": uuid.uuid4().hex},
    }
    watched = policy(POLICY_NAME, kafka.bootstrap.split(",")[0], app=APP)
    watched["spec"]["detection"]["heartbeatSeconds"] = HEARTBEAT_SECONDS
    _create_all(node, [*rbac, secret, watched])


def remove_pods(node: NodeCluster) -> None:
    """Delete the namespace's pods (Spark keeps its completed drivers) and wait until
    the kubelet removed them, so later tests find the node as this package found it."""
    for pod in node.get(PODS)["items"]:
        node.delete(f"{PODS}/{pod['metadata']['name']}", grace_seconds=5)
    wait_for("the Spark pods to be gone", lambda: not node.get(PODS)["items"], 180)
