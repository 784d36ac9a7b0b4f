"""Faults on a running job: a paced job in the background, network faults in the pods'
own namespaces, one executor wedged and replaced, the policy's action changed.

`paced_run` submits a job of two 40-second tasks (one per executor), its driver and
executor JVMs on the suite's short-run options (C1 only, the serial collector), and
records its pods; `PodNetworkFault` drops a broker's traffic inside pods (of one user, or all);
`wedge_one_executor` wedges one writing executor (`blackhole_user`, or
`wedge_interceptor` for Spark's own sink) and waits for the verdict, the deletion and a
replacement; `producer_hung_actions` changes what the package's policy does.
"""

from __future__ import annotations

import json
import subprocess
import time
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hangwatch_lab.kafka import KafkaLab
from hangwatch_operator.injection import SIDECAR_CONTAINER
from hangwatch_pipeline.run_options import SHORT_RUN_JVM_OPTIONS, short_run_conf
from hangwatch_testing.kube.release import HelmRelease
from hangwatch_testing.node.cluster import NodeCluster
from hangwatch_testing.node.workloads import wait_for
from hangwatch_testing.processes import command_lines
from tests.node.test_spark_submit.submission import (
    POLICIES,
    POLICY_NAME,
    PodRecorder,
    Submission,
    completed_run,
)

PACED_JOB = ("--rate", "300/s", "--duration", "40s", "--partitions", "2")
"""12,000 events in two tasks of 40 s each: one task per executor, long enough for a fault
to take hold while both executors write (the tasks start together: Spark waits up to
30 s for both executors to register). A wedged task runs again in full on the
replacement, so this is part of every wedge test's time (60 s at 200/s before)."""
PACED_EVENTS = 12000


def executor_process(pod_name: str) -> tuple[int, list[str]]:
    """The executor JVM of a pod (its command line names the pod: --podName): its pid and
    its arguments."""
    marker = f"--podName\0{pod_name}\0"
    for pid, args in command_lines().items():
        cmdline = "\0".join(args) + "\0"
        if "KubernetesExecutorBackend" in cmdline and marker in cmdline + "\0":
            return pid, args
    raise AssertionError(f"no executor process of pod {pod_name}")


def executor_pid(pod_name: str) -> int:
    """The pid of a pod's executor JVM (`executor_process`)."""
    return executor_process(pod_name)[0]


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
    # the JVMs of a fault test's pods live a minute or two: the suite's short-run options
    # (the example's own job, tests/node/test_install_from_registries.py, keeps Spark's)
    conf = {**short_run_conf(), **(conf or {})}
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
    pid, jvm_args = executor_process(target["metadata"]["name"])
    for option in SHORT_RUN_JVM_OPTIONS.split():
        assert option in jvm_args, jvm_args
    wedge(fault, pid)
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


def wedge_interceptor(fault: PodNetworkFault, pid: int) -> None:
    """The `wedge` file created in the executor JVM's working directory (inside its
    container, through /proc): its producer's I/O thread blocks at the next record
    acknowledged, inside the interceptor."""
    (Path(f"/proc/{pid}/cwd") / "wedge").touch()
