"""Stage 1 of the operator benchmark: the injection webhook's throughput at saturation.

An operator process (`kopf run` of the webhook and handler modules, as `hangwatch
operator` runs them, plus `hangwatch_testing.kopf_admission_path`) serves the injection
webhook over HTTPS on two paths: `/inject-sidecar`, answered directly with the
injection's own JSON Patch (today's route), and `/inject-sidecar-via-kopf`, answered by
kopf's admission machinery (a worker thread per request, then a diff of the whole pod:
the route before issue 15). After `--settle` seconds (the operator's start-up is over:
the Kubernetes client's lazily built models, the webhook's collector freeze at 60 s),
for each path, AdmissionReviews for executor pods are sent open-loop (new requests
leave on schedule whether or not earlier ones came back, as the API server sends them)
at rising rates, `--seconds` each, over keep-alive connections verified against the
webhook's CA; the generator's own garbage collector is off meanwhile. A rate passes
with p99 under 10 ms and no error; the saturation throughput is the highest passing
rate (one bisection between the last pass and the first failure). 200/s and 500/s are
always measured. Beside each figure: the operator's CPU and the load generator's own
CPU (its thread; both share the machine's cores), so a figure limited by the generator
shows. Target: p99 under 10 ms at 500/s.
"""

from __future__ import annotations

import asyncio
import gc
import json
import math
import ssl
import statistics
import time
from dataclasses import dataclass
from pathlib import Path

import aiohttp
from measuring import percentile

from hangwatch_operator.webhook_configuration import WEBHOOK_ID
from hangwatch_testing.emulated_cluster import running_operator
from hangwatch_testing.ports import free_port
from hangwatch_testing.processes import cpu_seconds
from hangwatch_testing.remediation_cluster import RemediationCluster
from hangwatch_testing.spark_pods import admission_review, executor_pod
from operator_stages.common import done, progress, webhook_settings

WEBHOOK_P99_TARGET_MS = 10.0
JSON_HEADERS = {"Content-Type": "application/json"}
LADDER = (100, 200, 300, 400, 500, 600, 800, 1000, 1200, 1500, 2000, 2500, 3000)
"""Rates tried in order (per second) until one fails; 200 and 500 always run."""
ALWAYS = (200, 500)
PATHS = ("direct", "kopf")


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
