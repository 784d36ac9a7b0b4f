"""Spark on Kubernetes end to end: `spark-submit --master k8s://... --deploy-mode cluster`.

The reference pipeline is submitted with examples/spark-on-kubernetes/spark-submit.sh
itself (the tier adds only what this cluster needs: its API server, the Spark image
built here, two small executors, the namespace of this module, its Kafka cluster as
the job's arguments) to the node tier's cluster, once per supported Spark line (4.x and
3.5, hangwatch_pipeline.spark_kafka.LINES: each line's own spark-submit, from its own
pyspark, and its own image, scripts/build-spark-image.sh --line); the fault tests below
run on the default line. Spark's own submission client creates
the driver pod; the driver (in a pod, client mode, as Spark's image runs it) creates
its executor pods through the API server; the chart's webhook injects the native
sidecar into each; the executors write to a real Apache Kafka cluster (the lab's
engine) listening on the node IP, which the pods reach over the bridge. Covered:

- the driver pod runs and ends Succeeded; the job's summary says every event was sent
  and acknowledged, and `hangwatch pipeline verify` reads every event of the run back;
- each executor pod Spark created got the native sidecar from the real admission chain
  (an init container with `restartPolicy: Always`, Spark's executor container the only
  regular one, first in the list), labelled with the policy that watches it;
- the sidecar never exits non-zero by itself: each executor pod that ended shows it
  terminated with 0.

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
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from hangwatch_demo.interceptor import CLASS_NAME as WEDGE_INTERCEPTOR
from hangwatch_lab.kafka import KafkaLab
from hangwatch_operator.injection import POLICY_LABEL, SIDECAR_CONTAINER
from hangwatch_pipeline.spark_kafka import DEFAULT_LINE, LINES, SparkLine
from hangwatch_testing.containers import ROOT, bookworm_python_rootfs, require_tools, run
from hangwatch_testing.emulated_cluster import OperatorRun
from hangwatch_testing.kube.cluster import write_kubeconfig
from hangwatch_testing.kube.release import HelmRelease, running_operator
from hangwatch_testing.node.cluster import NodeCluster
from hangwatch_testing.node.workloads import ensure_namespace, policy, wait_for, wait_operator_ready
from hangwatch_testing.processes import command_lines, run_hangwatch
from hangwatch_testing.spark_line_env import python_of

pytestmark = [pytest.mark.xdist_group("node"), pytest.mark.timeout(2400)]

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


@pytest.fixture(scope="module")
def line_images(node: NodeCluster) -> Callable[[SparkLine], str]:
    """The Spark image of a line: scripts/build-spark-image.sh's (cached by content),
    imported into the node once per module."""
    images: dict[str, str] = {}

    def image(line: SparkLine) -> str:
        if line.name not in images:
            require_tools()
            script = ROOT / "scripts" / "build-spark-image.sh"
            rootfs = bookworm_python_rootfs()
            built = run(["bash", str(script), str(rootfs), "--line", line.name], timeout=3600)
            paths = dict(ln.split("=", 1) for ln in built.stdout.splitlines() if "=" in ln)
            started = time.monotonic()
            node.import_image(Path(paths["SPARK_ARCHIVE"]))
            took = time.monotonic() - started
            print(f"node tier: Spark {line.name} image imported in {took:.0f} s", flush=True)
            images[line.name] = paths["SPARK_IMAGE"]
        return images[line.name]

    return image


@pytest.fixture(scope="module")
def spark_image(line_images: Callable[[SparkLine], str]) -> str:
    """The default line's image: the one every job of the fault tests runs in."""
    return line_images(DEFAULT_LINE)


def spark_submit_bin(line: SparkLine) -> Path:
    """The directory of `line`'s own spark-submit: the bin of the environment whose
    pyspark is the line's (this interpreter's for the default line, its own virtualenv,
    hangwatch_testing.spark_line_env, for another)."""
    python = Path(sys.executable) if line == DEFAULT_LINE else python_of(line)
    return python.parent


@pytest.fixture(scope="module")
def kafka(node: NodeCluster) -> Iterator[KafkaLab]:
    """A real Kafka cluster (one KRaft node) whose client listener is on the node IP."""
    lab = KafkaLab(brokers=1, topics={TOPIC: 4}, host=node.node_ip).start()
    try:
        yield lab
    finally:
        lab.close()


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


@pytest.fixture(scope="module")
def operator(
    node: NodeCluster,
    release: HelmRelease,
    hangwatch_image: str,
    kafka: KafkaLab,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[OperatorRun]:
    """The namespace as the example's README prepares it (rbac.yaml, the kafka-client
    Secret the executors' environment names), a policy for the application's executors
    probing this Kafka, and the chart's operator running; afterwards the namespace's
    pods deleted."""
    ensure_namespace(node, SPARK_NAMESPACE)
    rbac = [d for d in yaml.safe_load_all((EXAMPLE / "rbac.yaml").read_text()) if d]
    secret = {
        "kind": "Secret",
        "metadata": {"name": "kafka-client"},
        "stringData": {"username": "spark-writer", "password": uuid.uuid4().hex},
    }
    watched = policy(POLICY_NAME, kafka.bootstrap.split(",")[0], app=APP)
    _create_all(node, [*rbac, secret, watched])
    try:
        with running_operator(node, tmp_path_factory.mktemp("spark-operator")) as (run, _):
            wait_operator_ready(run, node, release, SPARK_NAMESPACE, POLICY_NAME)
            yield run
    finally:
        remove_pods(node)


def remove_pods(node: NodeCluster) -> None:
    """Delete the namespace's pods (Spark keeps its completed drivers) and wait until
    the kubelet removed them, so later tests find the node as this module found it."""
    pods = f"/api/v1/namespaces/{SPARK_NAMESPACE}/pods"
    for pod in node.get(pods)["items"]:
        node.delete(f"{pods}/{pod['metadata']['name']}", grace_seconds=5)
    wait_for("the Spark pods to be gone", lambda: not node.get(pods)["items"], 180)


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
    (its output in `workdir`/spark-submit.log); `stop` ends it if it still runs."""

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
            *("--run-id", run_id, "--json"),
        ]
        env = {
            # the suite's SPARK_CONF_DIR (short-run JVM options) stays out: the pods run
            # the example as a user submits it
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


def completed_run(
    node: NodeCluster,
    recorder: PodRecorder,
    submitted: subprocess.CompletedProcess[str],
    kafka: KafkaLab,
    run_id: str,
    expected: int,
) -> dict[str, Any]:
    """Check what every submission must end with: spark-submit exited 0, the driver pod
    Succeeded, the job's summary is ok, every executor pod Spark created carried the
    native sidecar and no sidecar ended non-zero, and `pipeline verify` reads every event
    of the run back. Returns the job's summary."""
    drivers = recorder.role("driver")
    assert len(drivers) == 1, submitted.stdout[-5000:]
    driver = drivers[0]
    driver_log = pod_log(node, driver, "spark-kubernetes-driver")
    context = f"--- spark-submit ---\n{submitted.stdout[-3000:]}\n--- driver ---\n"
    context += driver_log[-6000:]
    assert submitted.returncode == 0, context
    assert driver["status"].get("phase") == "Succeeded", context
    summary = job_summary(driver_log)
    assert summary["run_id"] == run_id and summary["ok"], summary
    assert summary["acknowledged"] >= expected, summary

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

    verified = run_hangwatch(
        "pipeline",
        "verify",
        *("--bootstrap", kafka.bootstrap, "--topic", TOPIC),
        *("--expect", str(expected), "--run-id", run_id),
        timeout=600,
    )
    assert verified.returncode == 0, verified.stdout + verified.stderr
    return summary


@pytest.mark.parametrize("line", LINES, ids=[line.name for line in LINES])
def test_spark_submit_runs_the_pipeline_with_sidecars_and_verify_finds_every_event(
    node: NodeCluster,
    line_images: Callable[[SparkLine], str],
    kafka: KafkaLab,
    operator: OperatorRun,
    tmp_path: Path,
    line: SparkLine,
) -> None:
    """Each supported Spark line: its own spark-submit (its pyspark's) submits the job in
    its own image (its pyspark, its Kafka connector)."""
    image = line_images(line)
    run_id = f"k8s-{uuid.uuid4().hex[:8]}"
    recorder = PodRecorder(node)
    submission = Submission(node, image, kafka, run_id, tmp_path, line=line)
    try:
        submitted = submission.wait()
    finally:
        submission.stop()
        time.sleep(1)
        recorder.close()
    completed_run(node, recorder, submitted, kafka, run_id, EVENTS)
    # Spark labels each pod with its own version: the driver's by the submission client
    # (the line's spark-submit), the executors' by the driver (the image's Spark)
    versions = {p["metadata"]["labels"].get("spark-version") for p in recorder.pods.values()}
    assert versions == {line.version}, versions


# ---- faults on a running job ----

PACED_JOB = ("--rate", "200/s", "--duration", "60s", "--partitions", "2")
"""12,000 events in two tasks of a minute each: one task per executor, long enough for
a fault to take hold while the executors write."""
PACED_EVENTS = 12000


def executor_pid(pod_name: str) -> int:
    """The executor JVM of a pod (its command line names the pod: --podName)."""
    marker = f"--podName\0{pod_name}\0"
    for pid, args in command_lines().items():
        cmdline = "\0".join(args) + "\0"
        if "KubernetesExecutorBackend" in cmdline and marker in cmdline + "\0":
            return pid
    raise AssertionError(f"no executor process of pod {pod_name}")


def process_uid(pid: int) -> int:
    line = next(
        ln for ln in Path(f"/proc/{pid}/status").read_text().splitlines() if ln.startswith("Uid:")
    )
    return int(line.split()[1])


class PodNetworkFault:
    """DROP rules in pods' own network namespaces (iptables through nsenter) for the
    traffic to one broker address: of one user only (the executor's, so its producer's
    connections go silent while the sidecar, another user, still probes the broker), or
    of every process in the pod. The rules go with the pod's namespace; `clear` removes
    the ones of pods still there."""

    def __init__(self, broker: str) -> None:
        self.host, self.port = broker.rsplit(":", 1)
        self.rules: list[tuple[int, list[str]]] = []

    def _iptables(self, pid: int, action: str, rule: list[str]) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["nsenter", f"--target={pid}", "--net", "iptables", "-w", action, "OUTPUT", *rule],
            capture_output=True,
            text=True,
            check=False,
        )

    def drop(self, pid: int, uid: int | None = None) -> None:
        rule = ["-p", "tcp", "-d", self.host, "--dport", self.port]
        if uid is not None:
            rule += ["-m", "owner", "--uid-owner", str(uid)]
        rule += ["-j", "DROP"]
        done = self._iptables(pid, "-I", rule)
        assert done.returncode == 0, f"iptables in the pod of pid {pid}: {done.stderr}"
        self.rules.append((pid, rule))

    def clear(self) -> None:
        for pid, rule in self.rules:
            if Path(f"/proc/{pid}").exists():
                self._iptables(pid, "-D", rule)
        self.rules.clear()


def sidecar_status(pod: dict[str, Any], port: int) -> dict[str, Any] | None:
    ip = pod["status"].get("podIP")
    if not ip:
        return None
    try:
        with urllib.request.urlopen(f"http://{ip}:{port}/status", timeout=3) as answer:
            found: dict[str, Any] = json.loads(answer.read())
    except OSError:
        return None
    return found


@dataclass
class PacedRun:
    """A paced job submitted in the background, the pods it makes recorded, and the
    network faults the test puts in them."""

    run_id: str
    recorder: PodRecorder
    fault: PodNetworkFault
    submission: Submission


@contextmanager
def paced_run(
    node: NodeCluster,
    image: str,
    kafka: KafkaLab,
    workdir: Path,
    kind: str,
    conf: dict[str, str] | None = None,
    job: tuple[str, ...] = (),
) -> Iterator[PacedRun]:
    """Submit the paced job (`job` arguments added, `conf` too); afterwards (whatever
    happened) lift the faults, end spark-submit if it still runs and stop recording."""
    run_id = f"k8s-{kind}-{uuid.uuid4().hex[:8]}"
    recorder = PodRecorder(node)
    fault = PodNetworkFault(kafka.bootstrap.split(",")[0])
    submission = Submission(node, image, kafka, run_id, workdir, (*job, *PACED_JOB), conf)
    try:
        yield PacedRun(run_id, recorder, fault, submission)
    finally:
        fault.clear()
        submission.stop()  # ended already, unless the test failed before the job did
        time.sleep(1)
        recorder.close()


def wrapper_writing(status: dict[str, Any]) -> bool:
    """The sidecar reads a producer's telemetry (the pipeline's wrapper writes it)."""
    return bool(status.get("producers"))


def connector_writing(status: dict[str, Any]) -> bool:
    """Spark's view shows a task running and the JVM producer's network thread in the
    executor's thread dump (Spark's Kafka sink: no telemetry)."""
    spark = status.get("spark") or {}
    return bool(spark.get("task_running")) and spark.get("producer_threads_total", 0) > 0


SINKS: dict[str, tuple[tuple[str, ...], Callable[[dict[str, Any]], bool]]] = {
    "wrapper": ((), wrapper_writing),
    "connector": (("--sink", "connector"), connector_writing),
}
"""The paced job's sinks: the job's arguments, and how a sidecar's /status shows its
task writing. `connector` is Spark's own Kafka sink (`df.write.format("kafka")`, the
connector's jars in the Spark image, the Java client's defaults): no hangwatch code where
messages are produced, no telemetry."""


def writing_executors(
    recorder: PodRecorder, port: int, writing: Callable[[dict[str, Any]], bool] = wrapper_writing
) -> list[tuple[dict[str, Any], Any]]:
    """Both executors Running, each sidecar's /status showing its task `writing`."""
    running = [p for p in recorder.role("executor") if p["status"].get("phase") == "Running"]
    if len(running) < 2:
        return []
    statuses = [(pod, sidecar_status(pod, port)) for pod in running]
    if all(status and writing(status) for _, status in statuses):
        return statuses
    return []


@dataclass
class Wedged:
    """One executor wedged, acted on and replaced: the pods and when each step was seen
    (monotonic clock)."""

    target: dict[str, Any]
    replacement: dict[str, Any]
    hung: dict[str, Any]
    fault_at: float
    verdict_at: float
    deleted_at: float
    created_at: float
    replaced_at: float

    def intervals(self) -> str:
        """The measured steps, as the tests print them (the README quotes them)."""
        return (
            f"fault->verdict {self.verdict_at - self.fault_at:.1f} s, "
            f"verdict->pod deleted {self.deleted_at - self.verdict_at:.1f} s, "
            f"deleted->replacement pod created {self.created_at - self.deleted_at:.1f} s, "
            f"deleted->replacement running {self.replaced_at - self.deleted_at:.1f} s"
        )


def blackhole_user(fault: PodNetworkFault, pid: int) -> None:
    """Every packet of the process's user to the broker dropped."""
    fault.drop(pid, uid=process_uid(pid))


def wedge_one_executor(
    run: PacedRun,
    release: HelmRelease,
    writing: Callable[[dict[str, Any]], bool] = wrapper_writing,
    wedge: Callable[[PodNetworkFault, int], object] = blackhole_user,
) -> Wedged:
    """Wedge one writing executor's producer (`wedge`, given the executor JVM's pid: by
    default its user's traffic to the broker blackholed in its pod's network namespace),
    then wait for its sidecar's producer_hung, the pod's deletion and a replacement
    executor Running; the other executor must not be touched."""
    recorder, fault = run.recorder, run.fault
    (target, _), (other, _) = wait_for(
        "both executors writing",
        lambda: writing_executors(recorder, release.sidecar_port, writing),
        timeout=600,
    )
    known = {p["metadata"]["uid"] for p in recorder.role("executor")}
    wedge(fault, executor_pid(target["metadata"]["name"]))
    fault_at = time.monotonic()
    seen: list[dict[str, Any]] = []

    def judged() -> dict[str, Any] | None:
        status = sidecar_status(target, release.sidecar_port)
        if status:
            seen[:] = [status]
        return status if status and status["verdict"] == "producer_hung" else None

    try:
        hung = wait_for("the sidecar's verdict producer_hung", judged)
    except BaseException:
        last = seen[0] if seen else {}
        print(f"last sidecar status: verdict {last.get('verdict')}; reasons {last.get('reasons')}")
        print(f"  spark {json.dumps(last.get('spark'))[:2000]}")
        raise
    # when the sidecar's verdict began (its `since`, wall clock), on the monotonic clock
    verdict_at = time.monotonic() - (time.time() - float(hung["since"]))
    target_uid = target["metadata"]["uid"]
    wait_for("the wedged pod deleted", lambda: target_uid in recorder.deleted_seen, 300)
    replacement = wait_for(
        "a replacement executor running",
        lambda: next(
            (
                p
                for p in recorder.role("executor")
                if p["metadata"]["uid"] not in known and p["status"].get("phase") == "Running"
            ),
            None,
        ),
        timeout=300,
    )
    replaced_at = time.monotonic()
    other_now = recorder.pods[other["metadata"]["uid"]]
    assert "deletionTimestamp" not in other_now["metadata"], "the healthy executor was hit"
    assert replacement["spec"]["initContainers"][0]["name"] == SIDECAR_CONTAINER
    return Wedged(
        target=recorder.pods[target_uid],
        replacement=replacement,
        hung=hung,
        fault_at=fault_at,
        verdict_at=verdict_at,
        deleted_at=recorder.deleted_seen[target_uid],
        created_at=recorder.first_seen[replacement["metadata"]["uid"]],
        replaced_at=replaced_at,
    )


def wedged_run_completes(
    node: NodeCluster,
    release: HelmRelease,
    spark_image: str,
    kafka: KafkaLab,
    tmp_path: Path,
    kind: str,
    job: tuple[str, ...] = (),
    writing: Callable[[dict[str, Any]], bool] = wrapper_writing,
    wedge: Callable[[PodNetworkFault, int], object] = blackhole_user,
) -> tuple[Wedged, float, dict[str, Any]]:
    """The paced job (`job` arguments) with one executor wedged and replaced
    (`wedge_one_executor`), run to its end: the steps came in order, Spark ran a task
    again, verify found every event. The wedge's record, when the job was done and the
    wedged pod as last recorded."""
    with paced_run(node, spark_image, kafka, tmp_path, kind, job=job) as run:
        w = wedge_one_executor(run, release, writing, wedge)
        submitted = run.submission.wait()
        done_at = time.monotonic()
    summary = completed_run(node, run.recorder, submitted, kafka, run.run_id, PACED_EVENTS)
    assert w.fault_at < w.verdict_at <= w.deleted_at <= w.created_at <= w.replaced_at < done_at
    assert summary["failed_attempts"] >= 1 or summary["retried_tasks"] >= 1, summary
    return w, done_at, run.recorder.pods[w.target["metadata"]["uid"]]


def test_a_wedged_executor_is_deleted_spark_replaces_it_and_the_job_completes(
    node: NodeCluster,
    release: HelmRelease,
    spark_image: str,
    kafka: KafkaLab,
    operator: OperatorRun,
    tmp_path: Path,
) -> None:
    """One executor's producer connections blackholed inside its pod's network namespace
    -> its sidecar's verdict producer_hung -> the operator deletes that pod (and only
    it) -> Spark asks for a new executor, whose pod gets the sidecar -> the job ends
    Succeeded and verify finds every event. Prints the measured intervals."""
    w, done_at, ended = wedged_run_completes(node, release, spark_image, kafka, tmp_path, "fault")
    print(
        "spark-on-kubernetes fault: "
        f"{w.intervals()}, "
        f"fault->job done {done_at - w.fault_at:.1f} s; executor ended "
        f"{executor_end(ended)}; "
        f"reasons {w.hung['reasons']}"
    )


def executor_end(pod: dict[str, Any]) -> dict[str, Any]:
    """How the pod's Spark container ended (its `terminated` state; empty if it had not)."""
    for container in pod["status"].get("containerStatuses", ()):
        if container["name"] == "spark-kubernetes-executor":
            ended: dict[str, Any] = container["state"].get("terminated") or {}
            return ended
    return {}


POLICIES = f"/apis/hangwatch.dev/v1alpha1/namespaces/{SPARK_NAMESPACE}/producerhealthpolicies"


@contextmanager
def producer_hung_actions(node: NodeCluster, actions: list[str]) -> Iterator[None]:
    """The module's policy acting with `actions` on producer_hung (once the operator has
    seen that generation), restored afterwards."""
    path = f"{POLICIES}/{POLICY_NAME}"

    def set_actions(wanted: list[str]) -> None:
        document = node.get(path)
        document["spec"]["actions"]["producerHung"] = wanted
        generation = node.replace(path, document)["metadata"]["generation"]
        wait_for(
            f"the operator to see policy generation {generation}",
            lambda: node.get(path).get("status", {}).get("observedGeneration") == generation,
        )

    before = node.get(path)["spec"]["actions"]["producerHung"]
    set_actions(actions)
    try:
        yield
    finally:
        set_actions(before)


DECOMMISSION_CONF = {"spark.executor.decommission.forceKillTimeout": "15s"}
"""The example's decommission settings (spark.decommission.enabled and block migration
on) with a force-kill timeout inside this tier's 30 s grace period (the example's 120 s
goes with its 150 s grace)."""


def test_under_a_decommission_policy_a_wedged_executor_is_decommissioned_and_replaced(
    node: NodeCluster,
    release: HelmRelease,
    spark_image: str,
    kafka: KafkaLab,
    operator: OperatorRun,
    tmp_path: Path,
) -> None:
    """The policy says `decommission` for producer_hung: the wedged executor's pod is
    deleted with its own grace period, which runs Spark's preStop hook (decom.sh ->
    SIGPWR); the executor decommissions (the driver receives its decommissioned message)
    and leaves by itself (exit 0, within the grace period), the driver replaces it and
    the job completes with every event verified. The policy records the action as a
    decommission, never a restart; the sidecar of the decommissioned pod exits 0."""
    with (
        producer_hung_actions(node, ["decommission", "alert"]),
        paced_run(node, spark_image, kafka, tmp_path, "decom", DECOMMISSION_CONF) as run,
    ):
        w = wedge_one_executor(run, release)
        name = w.target["metadata"]["name"]
        deletion = run.recorder.deletion[w.target["metadata"]["uid"]]["metadata"]
        assert deletion["deletionGracePeriodSeconds"] == 30, deletion  # the pod's own
        submitted = run.submission.wait()
    actions = node.get(f"{POLICIES}/{POLICY_NAME}")["status"]["recentActions"]
    taken = [a for a in actions if a.get("pod") == name and a.get("action") == "decommission"]
    assert taken and taken[0].get("verdict") == "producer_hung", actions
    assert not [a for a in actions if a.get("pod") == name and a.get("action") == "restart"]
    summary = completed_run(node, run.recorder, submitted, kafka, run.run_id, PACED_EVENTS)
    final = run.recorder.pods[w.target["metadata"]["uid"]]
    # decommissioned, the JVM left by itself (a deleted wedged executor is killed instead)
    assert executor_end(final).get("exitCode") == 0, final["status"]
    driver_log = pod_log(node, run.recorder.role("driver")[0], "spark-kubernetes-driver")
    exec_id = w.target["metadata"]["labels"]["spark-exec-id"]
    told = [ln for ln in driver_log.splitlines() if f"executor {exec_id} decommissioned" in ln]
    assert told, driver_log[-5000:]  # the driver's scheduler backend heard it from the executor
    print(
        "spark-on-kubernetes decommission: "
        f"{w.intervals()}; "
        f"failed_attempts {summary.get('failed_attempts')}, retried {summary.get('retried_tasks')}"
        f"; driver: {told[0]}"
    )


CONNECTOR_WEDGE_JOB = (
    "--sink", "connector", "--option", f"kafka.interceptor.classes={WEDGE_INTERCEPTOR}",
)  # fmt: skip
"""Spark's own Kafka sink (`df.write.format("kafka")`, the connector in the image's jars)
with a producer interceptor named through the connector's own option, as a user's
monitoring interceptor is: the demo's `WedgeInterceptor` (in the image's jars), which
blocks the JVM producer's I/O thread once a `wedge` file exists in the executor's
working directory. No hangwatch code where the messages are produced, no telemetry."""


def wedge_interceptor(fault: PodNetworkFault, pid: int) -> None:
    """The `wedge` file created in the executor JVM's working directory (inside its
    container, through /proc): its producer's I/O thread blocks at the next record
    acknowledged, inside the interceptor."""
    (Path(f"/proc/{pid}/cwd") / "wedge").touch()


def test_a_wedged_producer_on_spark_kafka_sink_is_deleted_and_the_job_completes(
    node: NodeCluster,
    release: HelmRelease,
    spark_image: str,
    kafka: KafkaLab,
    operator: OperatorRun,
    tmp_path: Path,
) -> None:
    """The paced job on Spark's own Kafka sink: one executor's JVM producer wedged (its
    I/O thread blocked in an interceptor) -> its sidecar's producer_hung from Spark's
    view alone (the executor's real thread dump) -> the operator deletes that pod ->
    Spark runs the task again on a replacement (a new container: no wedge) -> the job
    completes and verify finds every event (duplicates allowed)."""
    w, done_at, ended = wedged_run_completes(
        node, release, spark_image, kafka, tmp_path, "connector",
        CONNECTOR_WEDGE_JOB, connector_writing, wedge_interceptor,
    )  # fmt: skip
    assert not w.hung.get("producers"), w.hung  # no telemetry: the verdict came without it
    reasons = " ".join(w.hung["reasons"])
    assert "kafka-producer-network-thread" in reasons and "WedgeInterceptor" in reasons, reasons
    print(
        f"spark-on-kubernetes connector wedge: {w.intervals()}, "
        f"fault->job done {done_at - w.fault_at:.1f} s; executor ended "
        f"{executor_end(ended)}; "
        f"reasons {w.hung['reasons']}"
    )


@pytest.mark.parametrize("sink", SINKS)
def test_every_broker_unreachable_from_the_executors_alerts_and_deletes_no_pod(
    node: NodeCluster,
    release: HelmRelease,
    spark_image: str,
    kafka: KafkaLab,
    operator: OperatorRun,
    tmp_path: Path,
    sink: str,
) -> None:
    """Every broker unreachable from every executor pod (all their traffic to Kafka
    dropped, the sidecars' probes included), with the pipeline's wrapper and with Spark's
    own Kafka sink: the operator alerts (cluster_unreachable) and deletes no pod; once the
    fault is lifted the job completes and verify finds every event."""
    base = POLICIES
    job, writing = SINKS[sink]
    with paced_run(node, spark_image, kafka, tmp_path, f"outage-{sink}", job=job) as run:
        recorder, fault = run.recorder, run.fault
        executors = wait_for(
            "both executors writing",
            lambda: writing_executors(recorder, release.sidecar_port, writing),
            timeout=600,
        )
        names = {pod["metadata"]["name"] for pod, _ in executors}
        for pod, _ in executors:
            fault.drop(executor_pid(pod["metadata"]["name"]))

        def alerted() -> bool:
            actions = node.get(f"{base}/{POLICY_NAME}").get("status", {}).get("recentActions")
            return any(
                a.get("action") == "alert"
                and a.get("verdict") == "cluster_unreachable"
                and a.get("pod") in names
                for a in actions or ()
            )

        wait_for("the operator's cluster_unreachable alert", alerted, 300)
        deleted = [
            p["metadata"]["name"]
            for p in recorder.role("executor")
            if p["metadata"]["uid"] in recorder.deleted_seen
        ]
        assert not deleted, deleted
        actions = node.get(f"{base}/{POLICY_NAME}")["status"]["recentActions"]
        assert not [a for a in actions if a.get("action") == "restart" and a.get("pod") in names], (
            actions
        )
        fault.clear()
        submitted = run.submission.wait()
    completed_run(node, run.recorder, submitted, kafka, run.run_id, PACED_EVENTS)
