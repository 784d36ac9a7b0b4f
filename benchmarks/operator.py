"""Benchmark of the operator: webhook throughput, verdict-to-action latency, memory at scale.

Everything runs on loopback, measured in one run on this machine:

1. Webhook throughput at saturation: an operator process (`kopf run` of the webhook and
   handler modules, as `hangwatch operator` runs them, plus
   `hangwatch_testing.kopf_admission_path`) serves the injection webhook over HTTPS on
   two paths: `/inject-sidecar`, answered directly with the injection's own JSON Patch
   (today's route), and `/inject-sidecar-via-kopf`, answered by kopf's admission
   machinery (a worker thread per request, then a diff of the whole pod: the route
   before issue 15). After `--settle` seconds (the operator's start-up is over: the
   Kubernetes client's lazily built models, the webhook's collector freeze at 60 s),
   for each path, AdmissionReviews for executor pods are sent open-loop (new requests
   leave on schedule whether or not earlier ones came back, as the API server sends
   them) at rising rates, `--seconds` each, over keep-alive connections verified
   against the webhook's CA; the generator's own garbage collector is off meanwhile.
   A rate passes with p99 under 10 ms and no error; the saturation throughput is the
   highest passing rate (one bisection between the last pass and the first failure).
   200/s and 500/s are always measured.
   Beside each figure: the operator's CPU and the load generator's own CPU (its
   thread; both share the machine's cores), so a figure limited by the generator shows.
   Target: p99 under 10 ms at 500/s.
2. Verdict-to-action latency: a real sidecar status server flips from `healthy` to
   `producer_hung`; the time until kmock's Kubernetes emulator no longer has the pod
   (the operator deleted it), repeated `--flips` times with a fresh pod each time.
   Policy probe interval 2 s (the CRD's smallest valid one). Target: p99 under one
   status-poll interval plus 1 s.
3. Scale: an operator started against `--pods` executor pods already stored (one
   policy, 100 pods per real sidecar server, default 10 s poll): the time from its start
   until the policy's status counts every pod as watched (target at 10,000 pods: 60 s),
   then over three poll rounds its RSS (next to the idle operator's of step 2; target
   under 100 KiB per pod), the mean time to poll every sidecar (target: within the 10 s
   interval) and the CPU the operator and this benchmark's process (the emulator and
   the sidecar servers) used meanwhile, as shares of one core: on a loaded machine a
   round waits for CPU, not for the operator's work. Then verdict to action at that
   scale: `--scale-flips` of the pods have a sidecar of their own, flipped one after
   the other to `producer_hung` (at different phases of the 10 s poll) until the pod
   is gone (target: p99 under the interval plus 1 s), and from the operator's first
   read of the flipped verdict (those sidecars note when they answer) until the pod
   is gone: the operator's own part, without the wait for that read.
4. Replicas: the same `--pods` pods in a fresh emulator (with the Leases'
   compare-and-swap, `ShardedCluster`), then `--replicas` operators sharing them
   through 32 shard Leases (the chart's default, Leases of 15 s renewed every 5 s): the
   time until the replicas' `hangwatch_operator_watched_pods` add up to every pod, each
   one judging some, then, over three poll rounds of every replica, each replica's RSS
   (per pod of the fleet, which each lists, and per pod it judges), its mean time to
   poll its sidecars, its CPU; the full poll is the slowest replica's mean. The single
   replica of step 3 is stopped first: the two steps run one after the other in one run.

5. The real API server (`--stages kube`, not run by default: it needs the kube tier's
   build, scripts/build-kube.sh): a fresh control plane of that tier (etcd,
   kube-apiserver, kube-controller-manager), the CRD, 50 nodes and `--pods` executor
   pods as the webhook injects them, created through the API server bound to their node
   and reported Running with pod IP 127.0.0.1 through `pods/status` by this benchmark
   (no kubelet), 100 per real sidecar server; then an operator with the admin's
   credentials: the time until the policy's status counts every pod as watched, and,
   over three rounds, its RSS, mean poll of all sidecars and CPU.

    python benchmarks/operator.py [--seconds 10] [--settle 70] [--paths direct,kopf]
                                  [--flips 20] [--pods 2000] [--scale-flips 10]
                                  [--replicas 3]
                                  [--stages webhook,flips,scale,replicas,kube]

`--paths direct` alone measures `/inject-sidecar` only (e.g. on an older checkout,
where that path is kopf's). Progress goes to stderr; results to stdout.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import itertools
import json
import math
import os
import platform
import re
import ssl
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import aiohttp
import kmock
from kubernetes import client as kube_client
from machine import cpu_model, unwind_on_sigterm

from hangwatch.contracts import Verdict
from hangwatch_operator.certificates import generate_webhook_certificates
from hangwatch_operator.webhook_configuration import WEBHOOK_ID
from hangwatch_testing.emulated_cluster import OperatorRun, running_operator
from hangwatch_testing.ports import free_port
from hangwatch_testing.processes import cpu_seconds
from hangwatch_testing.remediation_cluster import (
    BROKERS,
    FAST,
    PODS,
    POLICIES,
    VERBS,
    FakeSidecar,
    RemediationCluster,
    TimedSidecar,
    remediating_operator,
    running_hangwatch_operator,
    scrape,
    stored_policy,
    watched_executor,
)
from hangwatch_testing.spark_pods import admission_review, executor_pod
from hangwatch_testing.structural import policy_document
from hangwatch_testing.waiting import wait_for

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the control plane helpers live with the tests

from tests.kube.cluster import LocalCluster, local_cluster  # noqa: E402
from tests.kube.fleet import ensure_node  # noqa: E402
from tests.kube.release import admin_api  # noqa: E402
from tests.kube.spark import ensure_namespace  # noqa: E402

WEBHOOK_P99_TARGET_MS = 10.0
FLIP_INTERVAL_SECONDS = 2
PODS_PER_SIDECAR = 100
SCALE_INTERVAL_SECONDS = 10
"""The policy's default probe interval, used at scale."""
SHARDS = 32
"""The chart's default `operator.sharding.shards` (and its Lease timing: 15 s, 5 s)."""
LEASES = "coordination.k8s.io/v1/leases"
WAIT_SECONDS = 120.0
JSON_HEADERS = {"Content-Type": "application/json"}


def progress(text: str) -> None:
    print(f"\r  {text}".ljust(78), end="", file=sys.stderr, flush=True)


def done(text: str) -> None:
    print(f"\r  {text}".ljust(78), file=sys.stderr, flush=True)


def rss_mib(pid: int) -> float:
    with open(f"/proc/{pid}/status", encoding="utf-8") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS")


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(share * (len(ordered) - 1)))]


def wait_until(what: str, predicate: Callable[[], Any], operator: OperatorRun) -> Any:
    """`predicate`'s first truthy value, polled every 5 ms (the figures' resolution)."""
    return wait_for(
        predicate,
        WAIT_SECONDS,
        f"the operator to get to: {what}",
        interval=0.005,
        give_up=lambda: operator.process.poll() is not None,
        context=lambda: operator.log()[-3000:],
    )


# --- 1. webhook ----------------------------------------------------------------------

LADDER = (100, 200, 300, 400, 500, 600, 800, 1000, 1200, 1500, 2000, 2500, 3000)
"""Rates tried in order (per second) until one fails; 200 and 500 always run."""
ALWAYS = (200, 500)
PATHS = ("direct", "kopf")
STAGES = ("webhook", "flips", "scale", "replicas", "kube")


def webhook_path(name: str) -> str:
    """The URL path of a webhook path's name (imported late: older checkouts lack kopf's)."""
    if name == "direct":
        return WEBHOOK_ID
    from hangwatch_testing.kopf_admission_path import VIA_KOPF_ID

    return VIA_KOPF_ID


@dataclass(frozen=True)
class Step:
    """One rate on one path: latencies of answered reviews and what the run cost."""

    rate: int
    latencies_ms: list[float]
    errors: int
    operator_cpu: float
    """Share of one core the operator process used while the step ran."""
    generator_cpu: float
    """Share of one core the load generator's thread used."""

    @property
    def p50(self) -> float:
        return statistics.median(self.latencies_ms) if self.latencies_ms else math.inf

    @property
    def p99(self) -> float:
        return percentile(self.latencies_ms, 0.99) if self.latencies_ms else math.inf

    @property
    def passed(self) -> bool:
        return self.errors == 0 and self.p99 < WEBHOOK_P99_TARGET_MS

    def line(self) -> str:
        return (
            f"{self.rate:>6}/s  p50 {self.p50:7.2f} ms  p99 {self.p99:8.2f} ms  "
            f"max {max(self.latencies_ms, default=math.inf):8.1f} ms  {self.errors:>4} errors  "
            f"operator CPU {self.operator_cpu:4.0%}  generator CPU {self.generator_cpu:4.0%}"
        )


class LoadGenerator:
    """Open-loop AdmissionReviews over keep-alive HTTPS, on one asyncio loop."""

    def __init__(self, base_url: str, ca: Path, operator_pid: int) -> None:
        self.base_url = base_url
        self.ca = ca
        self.operator_pid = operator_pid
        self.bodies = [
            json.dumps(admission_review(executor_pod(i + 1), "spark-jobs")).encode()
            for i in range(500)
        ]

    async def _one(
        self, session: aiohttp.ClientSession, url: str, body: bytes, latencies: list[float]
    ) -> bool:
        """Send one review; True if it came back with a patch (its latency recorded)."""
        started = time.perf_counter()
        try:
            async with session.post(url, data=body, headers=JSON_HEADERS) as reply:
                answer = await reply.read()
                status = reply.status
        except aiohttp.ClientError:
            return False
        latencies.append((time.perf_counter() - started) * 1000)
        return status == 200 and b'"patch"' in answer

    async def step(
        self, session: aiohttp.ClientSession, path: str, rate: int, seconds: float
    ) -> Step:
        url = f"{self.base_url}/{path}"
        count = int(rate * seconds)
        latencies: list[float] = []
        tasks = []
        gc.collect()
        gc.disable()  # the generator's own collector pauses are not the webhook's latency
        cpu_before, thread_before = cpu_seconds(self.operator_pid), time.thread_time()
        start = time.perf_counter()
        for index in range(count):
            delay = start + index / rate - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            body = self.bodies[index % len(self.bodies)]
            tasks.append(asyncio.create_task(self._one(session, url, body, latencies)))
            if index % rate == 0:
                progress(f"webhook {path} at {rate}/s: {index / rate:.0f}/{seconds:.0f} s sent")
        answered = await asyncio.gather(*tasks)
        wall = time.perf_counter() - start
        operator_cpu = (cpu_seconds(self.operator_pid) - cpu_before) / wall
        generator_cpu = (time.thread_time() - thread_before) / wall
        gc.enable()
        return Step(rate, latencies, answered.count(False), operator_cpu, generator_cpu)

    async def saturation(self, path: str, seconds: float, settle: float) -> list[Step]:
        """The ladder on `path` after `settle` seconds; stops after the first failure
        (and a bisection)."""
        context = ssl.create_default_context(cafile=str(self.ca))
        connector = aiohttp.TCPConnector(ssl=context, limit=64)
        steps: list[Step] = []
        async with aiohttp.ClientSession(connector=connector) as session:
            warm: list[float] = []
            while not await self._one(session, f"{self.base_url}/{path}", self.bodies[0], warm):
                await asyncio.sleep(0.05)  # until the policy is indexed and pods get injected
            if settle:
                progress(f"webhook: letting the operator's start-up settle for {settle:.0f} s")
                await asyncio.sleep(settle)
            for body in self.bodies[:100]:  # warm-up: TLS handshakes, first calls
                await self._one(session, f"{self.base_url}/{path}", body, warm)
            failed = False
            for rate in LADDER:
                if failed and rate not in ALWAYS:
                    continue
                steps.append(await self.step(session, path, rate, seconds))
                done(f"webhook {path}: {steps[-1].line().strip()}")
                if not steps[-1].passed and not failed:
                    failed = True
                    passed = [s.rate for s in steps if s.passed]
                    middle = (max(passed, default=0) + rate) // 2
                    if passed and middle not in LADDER and middle > max(passed):
                        steps.append(await self.step(session, path, middle, seconds))
                        done(f"webhook {path}: {steps[-1].line().strip()}")
                await asyncio.sleep(1)  # let the previous step's stragglers finish
        return sorted(steps, key=lambda s: s.rate)


def saturation_rate(steps: list[Step]) -> int:
    """The highest rate that passed below the lowest that failed (0 if none passed)."""
    first_failure = min((s.rate for s in steps if not s.passed), default=math.inf)
    return max((s.rate for s in steps if s.passed and s.rate < first_failure), default=0)


def bench_webhook(
    cluster: RemediationCluster, workdir: Path, paths: list[str], seconds: float, settle: float
) -> dict[str, list[Step]]:
    port = free_port()
    ca, settings = webhook_settings(workdir, port)
    modules = ["hangwatch_operator.handlers"]  # as `hangwatch operator` runs, at INFO
    if "kopf" in paths:
        modules.append("hangwatch_testing.kopf_admission_path")
    with running_operator(cluster, workdir, settings, *modules, verbose=False) as operator:
        generator = LoadGenerator(f"https://localhost:{port}", ca, operator.process.pid)
        results = {}
        for name in paths:
            results[name] = asyncio.run(generator.saturation(webhook_path(name), seconds, settle))
            settle = 0
        if operator.process.poll() is not None:
            raise RuntimeError(f"the operator exited:\n{operator.log()[-3000:]}")
    return results


def webhook_settings(workdir: Path, port: int) -> tuple[Path, dict[str, Any]]:
    """A certificate for localhost (its CA returned) and the operator's webhook settings."""
    ca, cert, key = generate_webhook_certificates(["localhost"]).write(workdir / "tls")
    settings = {
        "webhook_listen_address": "127.0.0.1",
        "webhook_port": port,
        "webhook_cert_file": cert,
        "webhook_key_file": key,
        "metrics_port": 0,
    }
    return ca, settings


def report_webhook(results: dict[str, list[Step]], seconds: float) -> None:
    names = {"direct": "direct route (/inject-sidecar)", "kopf": "kopf's admission path"}
    print(
        f"webhook over HTTPS, open loop, {seconds:.0f} s per rate; a rate passes with "
        f"p99 < {WEBHOOK_P99_TARGET_MS:.0f} ms and 0 errors:"
    )
    for name, steps in results.items():
        print(f"  {names[name]}:")
        for step in steps:
            print(f"    {step.line()}{'' if step.passed else '  FAILED'}")
    saturations = {name: saturation_rate(steps) for name, steps in results.items()}
    print(
        "  throughput at saturation (highest rate passing): "
        + ", ".join(f"{names[n]} {rate}/s" for n, rate in saturations.items())
        + (
            f": {saturations['direct'] / saturations['kopf']:.1f}x"
            if saturations.get("kopf") and "direct" in saturations
            else ""
        )
    )
    if "direct" in results:
        at_500 = [s for s in results["direct"] if s.rate == 500]
        met = bool(at_500) and at_500[0].passed
        print(f"  target p99 < 10 ms at 500/s with 0 errors: {'met' if met else 'MISSED'}")


# --- 2. verdict to action ------------------------------------------------------------


def bench_flips(
    cluster: RemediationCluster, operator: OperatorRun, stack: ExitStack, flips: int
) -> list[float]:
    policy = stored_policy(
        "flips", "writers", **FAST, safety={"maxActionsPerApplicationPerHour": 1000}
    )
    for index in range(1, 5):  # healthy neighbours: one hung pod of five is no storm
        sidecar = FakeSidecar().start()
        stack.callback(sidecar.close)
        cluster.create(PODS, "flips", watched_executor(policy, index, sidecar.port))
    cluster.create(POLICIES, "flips", policy)
    latencies = []
    for flip in range(flips):
        sidecar = FakeSidecar().start()
        stack.callback(sidecar.close)
        pod = watched_executor(policy, 100 + flip, sidecar.port)
        name = pod["metadata"]["name"]
        cluster.create(PODS, "flips", pod)
        wait_until(
            "the new pod polled",
            lambda: cluster.policy_status("flips", "writers").get("watched") == 5,
            operator,
        )
        time.sleep(FLIP_INTERVAL_SECONDS * (flip % 4) / 4)  # flip at different poll phases
        latencies.append(flip_to_deletion(cluster, operator, "flips", name, sidecar)[0])
        progress(f"verdict to action: {flip + 1}/{flips}, last {latencies[-1]:.2f} s")
    done(f"verdict to action: {flips} flips")
    return latencies


def flip_to_deletion(
    cluster: RemediationCluster,
    operator: OperatorRun,
    namespace: str,
    name: str,
    sidecar: FakeSidecar,
) -> tuple[float, float | None]:
    """Seconds from the pod's sidecar saying `producer_hung` until the pod is gone, and
    (for a `TimedSidecar`) from its first answer saying so until the pod is gone: the
    operator's part once it has read the verdict, without the wait for that read."""
    flipped = time.perf_counter()
    sidecar.set(Verdict.PRODUCER_HUNG, reasons=("benchmark flip",))
    wait_until(
        "the hung pod deleted",
        lambda: cluster.get(PODS, namespace, name) is None,
        operator,
    )
    gone = time.perf_counter()
    read = None
    if isinstance(sidecar, TimedSidecar):
        read = next((gone - t for t in list(sidecar.answered) if t >= flipped), None)
    return gone - flipped, read


# --- 3. memory at scale --------------------------------------------------------------


class LeaseConflict(kmock.KubernetesError):
    """HTTP 409: the Lease was written since it was read, or exists already."""

    status: int = 409
    reason: str = "Conflict"
    message: str = "the object has been modified; please apply your changes to the latest version"


class ShardedCluster(RemediationCluster):
    """The emulator with coordination.k8s.io Leases, for replicas sharing the pods.

    kmock stores what is created but has no PUT and no resourceVersion, so the Leases'
    compare-and-swap (`replica_leases`) is added here as the API server does it: a
    create or replace gets a new resourceVersion, and a replace whose resourceVersion
    is not the stored one is a 409 (a create of an existing Lease is one in kmock)."""

    def _declare(self, emulator: kmock.KubernetesEmulator) -> None:
        super()._declare(emulator)
        emulator.resources[LEASES] = kmock.ResourceInfo(kind="Lease", namespaced=True, verbs=VERBS)
        versions = itertools.count(1)
        path = r"^/apis/coordination\.k8s\.io/v1/namespaces/[^/]+/leases"

        def created(request: kmock.Request) -> Any:
            namespace = request.url.path.split("/")[5]
            stored = emulator.objects[LEASES, namespace, request.data["metadata"]["name"]]
            stored.patch(
                {"metadata": {"namespace": namespace, "resourceVersion": str(next(versions))}}
            )
            return stored.raw

        def replaced(request: kmock.Request) -> Any:
            parts = request.url.path.split("/")
            key = (LEASES, parts[5], parts[7])
            try:
                stored = emulator.objects[key]
            except KeyError:
                raise kmock.KubernetesObjectNotFoundError() from None
            if stored.deleted:
                raise kmock.KubernetesObjectNotFoundError()
            version = stored.raw["metadata"].get("resourceVersion")
            if request.data["metadata"].get("resourceVersion") != version:
                raise LeaseConflict()
            metadata = {**request.data["metadata"], "namespace": parts[5]}
            emulator.objects[key] = {
                **request.data,
                "metadata": metadata | {"resourceVersion": str(next(versions))},
            }
            return emulator.objects[key].raw

        emulator["post", re.compile(path + r"/?$")] << created
        emulator["put", re.compile(path + r"/[^/]+/?$")] << replaced


def store_fleet(
    stack: ExitStack, cluster: RemediationCluster, pods: int, flips: int = 0
) -> list[tuple[str, FakeSidecar]]:
    """`pods` pods stored before any operator starts (kmock answers each request in time
    linear in its object count, so creating them through its HTTP API one by one would
    take minutes), 100 per real sidecar server; `flips` of them, spread over the list and
    over the nodes (so over any order a round reads them in, not all read last), with a
    sidecar of their own, returned (name, sidecar) for the verdict-to-action flips."""
    policy = stored_policy("fleet", "writers", safety={"maxActionsPerApplicationPerHour": 1000})
    sidecars = []
    for _ in range(max(1, (pods - flips) // PODS_PER_SIDECAR)):
        sidecar = FakeSidecar().start()
        stack.callback(sidecar.close)
        sidecars.append(sidecar)
    step = pods // max(1, flips)
    flipped = {k * step + (k * 5) % step for k in range(flips)}
    own = []
    for index in range(pods):
        if index in flipped:
            sidecar = TimedSidecar(clock=time.perf_counter).start()
            stack.callback(sidecar.close)
        else:
            sidecar = sidecars[index % len(sidecars)]
        body = watched_executor(policy, index + 1, sidecar.port, node=f"node-{index % 50}")
        cluster.put(PODS, "fleet", body["metadata"]["name"], body)
        if index in flipped:
            own.append((body["metadata"]["name"], sidecar))
        if index % 500 == 0:
            progress(f"scale: {index}/{pods} pods stored")
    cluster.put(POLICIES, "fleet", "writers", policy)
    return own


@dataclass
class Steady:
    """One operator process over three poll rounds at scale."""

    rss: list[float]
    mean_poll_all: float
    operator_cpu: float
    judged: float

    @property
    def steady(self) -> float:
        return statistics.median(self.rss)


def measure_rounds(operators: list[tuple[OperatorRun, int]], what: str) -> list[Steady]:
    """Each operator's RSS (sampled every second), mean time to poll all its sidecars and
    CPU over the three poll rounds after the next round of the slowest one starts."""
    rounds_key = ("hangwatch_operator_poll_rounds_total", (("policy", "fleet/writers"),))
    count = ("hangwatch_operator_status_poll_duration_seconds_count", ())
    total = ("hangwatch_operator_status_poll_duration_seconds_sum", ())
    watched = ("hangwatch_operator_watched_pods", (("policy", "fleet/writers"),))
    firsts = [scrape(port).get(rounds_key, 0.0) for _, port in operators]
    for (_, port), first in zip(operators, firsts, strict=True):
        while scrape(port).get(rounds_key, 0.0) < first + 1:  # from a round's start
            time.sleep(0.1)
    before = [scrape(port) for _, port in operators]
    cpu_before = [cpu_seconds(run.process.pid) for run, _ in operators]
    began = time.monotonic()
    samples: list[list[float]] = [[] for _ in operators]
    while any(
        scrape(port).get(rounds_key, 0.0) < first + 4
        for (_, port), first in zip(operators, firsts, strict=True)
    ):
        for (run, _), rss in zip(operators, samples, strict=True):
            rss.append(rss_mib(run.process.pid))
        progress(f"{what}: RSS {', '.join(f'{r[-1]:.0f}' for r in samples)} MiB")
        time.sleep(1)
    wall = time.monotonic() - began
    done(f"{what}: {len(samples[0])} samples over 3 poll rounds")
    results = []
    for index, (run, port) in enumerate(operators):
        after = scrape(port)
        polls = after[count] - before[index][count]
        results.append(
            Steady(
                rss=samples[index],
                mean_poll_all=(after[total] - before[index][total]) / polls,
                operator_cpu=(cpu_seconds(run.process.pid) - cpu_before[index]) / wall,
                judged=after.get(watched, 0.0),
            )
        )
    return results


def bench_memory(stack: ExitStack, workdir: Path, pods: int, flips: int) -> dict[str, Any]:
    """A fresh emulator holding `pods` pods, then a fresh operator watching them: time to
    watch them all, three rounds at scale, then `flips` verdict-to-action flips."""
    cluster = stack.enter_context(RemediationCluster())
    own = store_fleet(stack, cluster, pods, flips)
    metrics_port = free_port()
    started = time.monotonic()
    operator, _ = stack.enter_context(operator_on(cluster, workdir, free_port(), metrics_port))
    wait_until(
        "every pod watched",
        lambda: cluster.policy_status("fleet", "writers").get("watched") == pods,
        operator,
    )
    watched_after = time.monotonic() - started
    done(f"scale: {pods} pods watched {watched_after:.1f} s after the operator started")
    own_before = time.process_time()
    began = time.monotonic()
    (steady,) = measure_rounds([(operator, metrics_port)], f"scale: {pods} pods")
    own_cpu = (time.process_time() - own_before) / (time.monotonic() - began)
    latencies = []
    after_read = []
    interval = SCALE_INTERVAL_SECONDS
    for flip, (name, sidecar) in enumerate(own):
        time.sleep(interval * (flip % 4) / 4)  # flip at different poll phases
        latency, read = flip_to_deletion(cluster, operator, "fleet", name, sidecar)
        latencies.append(latency)
        if read is not None:
            after_read.append(read)
        progress(f"scale: verdict to action {flip + 1}/{flips}, last {latencies[-1]:.2f} s")
    done(f"scale: verdict to action at {pods} pods, {flips} flips")
    return {
        "watched_after": watched_after,
        "steady": steady.steady,
        "max": max(steady.rss),
        "mean_poll_all": steady.mean_poll_all,
        "operator_cpu": steady.operator_cpu,
        "own_cpu": own_cpu,
        "load": os.getloadavg()[0],
        "flips": latencies,
        "after_read": after_read,
        "flip_load": os.getloadavg()[0],
    }


def bench_replicas(stack: ExitStack, workdir: Path, pods: int, replicas: int) -> dict[str, Any]:
    """A fresh emulator holding `pods` pods, then `replicas` operators sharing them
    through `SHARDS` shard Leases (the chart's default and Lease timing): the time until
    every pod is judged by one replica, then each replica over three rounds."""
    cluster = stack.enter_context(ShardedCluster())
    store_fleet(stack, cluster, pods)
    watched = ("hangwatch_operator_watched_pods", (("policy", "fleet/writers"),))
    operators = []
    started = time.monotonic()
    for index in range(replicas):
        place = workdir / f"replica-{index}"
        place.mkdir()
        metrics_port = free_port()
        _, settings = webhook_settings(place, free_port())
        settings |= {
            "metrics_listen_address": "127.0.0.1",
            "metrics_port": metrics_port,
            "shards": SHARDS,
            "replica_identity": f"replica-{index}",
        }
        run = stack.enter_context(running_hangwatch_operator(cluster, place, settings))
        operators.append((run, metrics_port))

    def partitioned() -> bool:
        try:
            judged = [scrape(port).get(watched, 0.0) for _, port in operators]
        except OSError:
            return False
        progress(f"replicas: judged {', '.join(f'{j:.0f}' for j in judged)}")
        return sum(judged) == pods and all(judged)

    wait_for(
        partitioned,
        WAIT_SECONDS,
        "every pod judged by one of the replicas",
        interval=0.2,
        give_up=lambda: any(run.process.poll() is not None for run, _ in operators),
        context=lambda: operators[0][0].log()[-3000:],
    )
    watched_after = time.monotonic() - started
    done(f"replicas: {pods} pods judged {watched_after:.1f} s after {replicas} replicas started")
    steady = measure_rounds(operators, f"replicas: {pods} pods")
    return {"watched_after": watched_after, "replicas": steady, "load": os.getloadavg()[0]}


# --- 5. the real API server --------------------------------------------------------

KUBE_NODES = 50
KUBE_WRITERS = 8
"""Threads creating the pods (each its own client): a kubelet per node reports its pods."""


@dataclass(frozen=True)
class AdminKubeconfig:
    """The control plane's admin kubeconfig, for `running_hangwatch_operator`."""

    cluster: LocalCluster

    def write_kubeconfig(self, path: Path) -> Path:
        return self.cluster.admin_kubeconfig


def store_on_apiserver(stack: ExitStack, cluster: LocalCluster, pods: int) -> None:
    """The CRD, 50 nodes, one policy and `pods` executor pods as the webhook injects them,
    created through the API server bound to their node, then Running with pod IP
    127.0.0.1 through `pods/status` (no kubelet here: the benchmark plays it), 100 pods per
    real sidecar server (its port the pod's `hangwatch` port)."""
    cluster.kubectl("apply", "-f", str(ROOT / "crds"))
    crd = "crd/producerhealthpolicies.hangwatch.dev"
    cluster.kubectl("wait", "--for", "condition=established", crd, "--timeout", "60s")
    ensure_namespace(cluster, "fleet")
    for node in range(KUBE_NODES):
        ensure_node(cluster, f"node-{node}")
    policy = policy_document(
        "fleet", "writers", list(BROKERS), safety={"maxActionsPerApplicationPerHour": 1000}
    )
    cluster.kubectl("apply", "-f", "-", stdin=json.dumps(policy))
    sidecars = []
    for _ in range(max(1, pods // PODS_PER_SIDECAR)):
        sidecar = FakeSidecar().start()
        stack.callback(sidecar.close)
        sidecars.append(sidecar)
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    running = {
        "status": {
            "phase": "Running",
            "podIP": "127.0.0.1",
            "podIPs": [{"ip": "127.0.0.1"}],
            "hostIP": "127.0.0.1",
            "startTime": now,
            "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": now}],
        }
    }
    stored = [0]
    failed: list[str] = []

    def write(indices: range) -> None:
        with admin_api(cluster) as api:
            core = kube_client.CoreV1Api(api)
            for index in indices:
                port = sidecars[index % len(sidecars)].port
                body = watched_executor(policy, index + 1, port, node=f"node-{index % KUBE_NODES}")
                del body["status"], body["metadata"]["uid"]
                try:
                    core.create_namespaced_pod("fleet", cast(Any, body), _preload_content=False)
                    name = body["metadata"]["name"]
                    core.patch_namespaced_pod_status(name, "fleet", running, _preload_content=False)
                except kube_client.ApiException as exc:
                    failed.append(f"{body['metadata']['name']}: {exc.status} {exc.reason}")
                    return
                stored[0] += 1

    writers = [
        threading.Thread(target=write, args=(range(start, pods, KUBE_WRITERS),), daemon=True)
        for start in range(KUBE_WRITERS)
    ]
    for writer in writers:
        writer.start()
    while any(writer.is_alive() for writer in writers):
        progress(f"kube: {stored[0]}/{pods} pods stored and Running")
        time.sleep(1)
    if failed:
        raise SystemExit(f"benchmark: pods not stored on the API server: {failed[0]}")
    done(f"kube: {pods} pods stored and Running")


def bench_kube(stack: ExitStack, workdir: Path, pods: int) -> dict[str, Any]:
    """A fresh control plane (etcd, kube-apiserver, kube-controller-manager: the kube
    tier's) holding `pods` pods, then a fresh operator watching them: time to watch them
    all, then three rounds (RSS, mean poll of all sidecars, CPU)."""
    cluster = stack.enter_context(local_cluster())
    stored_at = time.monotonic()
    store_on_apiserver(stack, cluster, pods)
    stored_in = time.monotonic() - stored_at
    started = time.monotonic()
    operator, metrics_port = stack.enter_context(  # the sidecars' timeout: the default
        remediating_operator(AdminKubeconfig(cluster), workdir, status_timeout_seconds=2.0)
    )

    def watched() -> bool:
        got = cluster.kubectl("get", "phpolicy", "writers", "-n", "fleet", "-o", "json")
        return bool(json.loads(got.stdout).get("status", {}).get("watched") == pods)

    wait_until("every pod watched (real API server)", watched, operator)
    watched_after = time.monotonic() - started
    done(f"kube: {pods} pods watched {watched_after:.1f} s after the operator started")
    (steady,) = measure_rounds([(operator, metrics_port)], f"kube: {pods} pods")
    return {
        "stored_in": stored_in,
        "watched_after": watched_after,
        "steady": steady.steady,
        "max": max(steady.rss),
        "mean_poll_all": steady.mean_poll_all,
        "operator_cpu": steady.operator_cpu,
        "load": os.getloadavg()[0],
    }


def report_kube(kube: dict[str, Any], idle: float, pods: int) -> None:
    per_pod = (kube["steady"] - idle) * 1024 / pods
    print(
        f"real API server, {pods} pods (stored and Running in {kube['stored_in']:.0f} s): "
        f"every pod watched {kube['watched_after']:.1f} s after the operator started; "
        f"operator RSS {kube['steady']:.0f} MiB (max {kube['max']:.0f}): {per_pod:.1f} KiB "
        f"per pod over the idle {idle:.0f} MiB; mean poll of all sidecars "
        f"{kube['mean_poll_all'] * 1000:.0f} ms; operator CPU {kube['operator_cpu']:.0%} of a "
        f"core, load average {kube['load']:.1f}"
    )


@contextmanager
def operator_on(
    cluster: RemediationCluster, workdir: Path, webhook_port: int, metrics_port: int
) -> Iterator[tuple[OperatorRun, Path]]:
    ca, settings = webhook_settings(workdir, webhook_port)
    settings |= {"metrics_listen_address": "127.0.0.1", "metrics_port": metrics_port}
    with running_hangwatch_operator(cluster, workdir, settings) as operator:
        yield operator, ca


def arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0] if __doc__ else "")
    parser.add_argument("--seconds", type=float, default=10.0, help="per webhook rate")
    parser.add_argument("--paths", default="direct,kopf", help="webhook paths: direct, kopf")
    parser.add_argument(
        "--settle",
        type=float,
        default=70.0,
        help="seconds from the webhook's first answer to the first measurement "
        "(past the operator's start-up, into its steady state)",
    )
    parser.add_argument("--flips", type=int, default=20)
    parser.add_argument("--pods", type=int, default=2000)
    parser.add_argument("--scale-flips", type=int, default=10, help="flips at --pods pods")
    parser.add_argument("--replicas", type=int, default=3, help="for the replicas stage")
    parser.add_argument(
        "--stages",
        default=",".join(name for name in STAGES if name != "kube"),
        help="of webhook, flips, scale, replicas, kube (kube: not by default, it needs "
        "scripts/build-kube.sh)",
    )
    args = parser.parse_args()
    args.paths = [name for name in args.paths.split(",") if name]
    if not args.paths or set(args.paths) - set(PATHS):
        parser.error(f"--paths: a comma-separated list of {', '.join(PATHS)}")
    args.stages = [name for name in args.stages.split(",") if name]
    if not args.stages or set(args.stages) - set(STAGES):
        parser.error(f"--stages: a comma-separated list of {', '.join(STAGES)}")
    return args


def main() -> int:
    args = arguments()
    paths, stages = args.paths, args.stages
    print(f"machine: {os.cpu_count()} CPUs, {cpu_model()}, Python {platform.python_version()}")
    print(f"load average before: {', '.join(f'{x:.2f}' for x in os.getloadavg())}")
    webhook_port, metrics_port = free_port(), free_port()
    with ExitStack() as stack, tempfile.TemporaryDirectory() as tmp:
        cluster = stack.enter_context(RemediationCluster())
        cluster.create(POLICIES, "spark-jobs", stored_policy("spark-jobs", "writers"))
        workdirs = [Path(tmp) / name for name in ("webhook", "first", "second", "third", "kube")]
        for workdir in workdirs:
            workdir.mkdir()
        print("measuring (progress on stderr)", file=sys.stderr)
        if "webhook" in stages:
            hook = bench_webhook(cluster, workdirs[0], paths, args.seconds, args.settle)
        operator, _ = stack.enter_context(
            operator_on(cluster, workdirs[1], webhook_port, metrics_port)
        )
        wait_until("metrics served", lambda: _metrics_up(metrics_port), operator)
        time.sleep(2)  # let start-up settle before reading the idle footprint
        idle = rss_mib(operator.process.pid)
        if "flips" in stages:
            flips = bench_flips(cluster, operator, stack, args.flips)
        if "scale" in stages:
            with ExitStack() as scale:  # the single replica stops before the three start
                memory = bench_memory(scale, workdirs[2], args.pods, args.scale_flips)
        if "replicas" in stages:
            fleet = bench_replicas(stack, workdirs[3], args.pods, args.replicas)
        if "kube" in stages:
            with ExitStack() as kube_stack:
                kube = bench_kube(kube_stack, workdirs[4], args.pods)
    if "webhook" in stages:
        report_webhook(hook, args.seconds)
    if "flips" in stages:
        report_flips(flips)
    if "scale" in stages:
        report_scale(memory, idle, args.pods)
    if "replicas" in stages:
        report_replicas(fleet, idle, args.pods)
    if "kube" in stages:
        report_kube(kube, idle, args.pods)
    print(f"load average after: {', '.join(f'{x:.2f}' for x in os.getloadavg())}")
    return 0


def report_flips(flips: list[float]) -> None:
    budget = FLIP_INTERVAL_SECONDS + 1.0
    p99 = percentile(flips, 0.99)
    print(
        f"verdict to action (probe interval {FLIP_INTERVAL_SECONDS} s, {len(flips)} flips): "
        f"p50 {statistics.median(flips):.2f} s, p99 {p99:.2f} s, min {min(flips):.2f} s"
    )
    print(f"  target p99 < interval + 1 s = {budget:.0f} s: {'met' if p99 < budget else 'MISSED'}")


def report_scale(memory: dict[str, Any], idle: float, pods: int) -> None:
    per_pod = (memory["steady"] - idle) * 1024 / pods
    print(
        f"{pods} pods: every pod watched {memory['watched_after']:.1f} s after the operator "
        f"started; operator RSS {idle:.0f} MiB idle (one small policy), "
        f"{memory['steady']:.0f} MiB (max {memory['max']:.0f}) watching them: "
        f"{per_pod:.1f} KiB per pod; mean poll of all sidecars "
        f"{memory['mean_poll_all'] * 1000:.0f} ms"
    )
    print(
        f"  over 3 rounds: operator CPU {memory['operator_cpu']:.0%} of a core, this "
        f"benchmark's process (emulator, sidecar servers) {memory['own_cpu']:.0%}, "
        f"load average {memory['load']:.1f}"
    )
    flips = memory["flips"]
    if flips:
        budget = SCALE_INTERVAL_SECONDS + 1.0
        p99 = percentile(flips, 0.99)
        print(
            f"  verdict to action at {pods} pods (probe interval {SCALE_INTERVAL_SECONDS} s, "
            f"{len(flips)} flips): p50 {statistics.median(flips):.2f} s, p99 {p99:.2f} s, "
            f"max {max(flips):.2f} s, load average {memory['flip_load']:.1f}; target p99 < "
            f"interval + 1 s = {budget:.0f} s: {'met' if p99 < budget else 'MISSED'}"
        )
    after = memory.get("after_read") or []
    if after:
        print(
            f"  from the operator's first read of the verdict to the pod gone: p50 "
            f"{statistics.median(after):.2f} s, p99 {percentile(after, 0.99):.2f} s, max "
            f"{max(after):.2f} s (the rest of verdict to action is the wait for that read)"
        )
    if pods >= 10_000:
        targets = [
            ("watched within 60 s", memory["watched_after"] < 60),
            ("every sidecar read within the 10 s interval", memory["mean_poll_all"] < 10),
            ("under 100 KiB per pod", per_pod < 100),
        ]
        print("  targets: " + ", ".join(f"{n} {'met' if ok else 'MISSED'}" for n, ok in targets))


def report_replicas(fleet: dict[str, Any], idle: float, pods: int) -> None:
    replicas: list[Steady] = fleet["replicas"]
    print(
        f"{pods} pods over {len(replicas)} replicas ({SHARDS} shards): every pod judged "
        f"{fleet['watched_after']:.1f} s after the replicas started; full poll (the slowest "
        f"replica's mean) {max(r.mean_poll_all for r in replicas) * 1000:.0f} ms; "
        f"load average {fleet['load']:.1f}"
    )
    for index, replica in enumerate(replicas):
        print(
            f"  replica-{index}: judges {replica.judged:.0f} pods, RSS {replica.steady:.0f} MiB "
            f"(max {max(replica.rss):.0f}): {(replica.steady - idle) * 1024 / pods:.1f} KiB per "
            f"pod of the fleet (each replica lists them all), "
            f"{(replica.steady - idle) * 1024 / max(1.0, replica.judged):.1f} KiB per pod it "
            f"judges; mean poll of its sidecars {replica.mean_poll_all * 1000:.0f} ms; CPU "
            f"{replica.operator_cpu:.0%} of a core"
        )


def _metrics_up(port: int) -> bool:
    try:
        scrape(port)
    except OSError:
        return False
    return True


if __name__ == "__main__":
    unwind_on_sigterm()
    sys.exit(main())
