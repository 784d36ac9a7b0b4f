"""Benchmark of the operator: webhook latency, verdict-to-action latency, memory at scale.

Everything runs on loopback, measured in one run on this machine:

1. Webhook latency at a fixed rate: the operator (`hangwatch operator`, its own
   process) serves the injection webhook over HTTPS; AdmissionReviews for executor
   pods are sent open-loop at `--rate` per second for `--seconds` (new requests leave
   on schedule whether or not earlier ones came back, as the API server would send
   them), over keep-alive connections verified against the webhook's CA. Target: p99
   under 10 ms.
2. Verdict-to-action latency: a real sidecar status server flips from `healthy` to
   `producer_hung`; the time until kmock's Kubernetes emulator no longer has the pod
   (the operator deleted it), repeated `--flips` times with a fresh pod each time.
   Policy probe interval 2 s (the CRD's smallest valid one). Target: p99 under one
   status-poll interval plus 1 s.
3. Memory: the RSS of an operator watching `--pods` executor pods (one policy, 100
   pods per real sidecar server, default 10 s poll) over three poll rounds, next to the
   RSS of the idle operator of step 1; plus the mean time to poll them all.

    python benchmarks/operator.py [--rate 200] [--seconds 10] [--flips 20] [--pods 2000]

Progress goes to stderr; results to stdout.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import signal
import ssl
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import aiohttp
from machine import cpu_model

from hangwatch.contracts import Verdict
from hangwatch_operator.certificates import generate_webhook_certificates
from hangwatch_testing.emulated_cluster import OperatorRun
from hangwatch_testing.remediation_cluster import (
    FAST,
    PODS,
    POLICIES,
    FakeSidecar,
    RemediationCluster,
    free_port,
    running_hangwatch_operator,
    scrape,
    stored_policy,
    watched_executor,
)
from hangwatch_testing.spark_pods import admission_review, executor_pod

WEBHOOK_P99_TARGET_MS = 10.0
FLIP_INTERVAL_SECONDS = 2
PODS_PER_SIDECAR = 100
WAIT_SECONDS = 120.0


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
    deadline = time.monotonic() + WAIT_SECONDS
    while time.monotonic() < deadline:
        result = predicate()
        if result:
            return result
        if operator.process.poll() is not None:
            break
        time.sleep(0.005)
    raise RuntimeError(f"operator never got to: {what}\n{operator.log()[-3000:]}")


# --- 1. webhook ----------------------------------------------------------------------


async def _send_reviews(url: str, ca: Path, rate: float, seconds: float) -> tuple[list[float], int]:
    context = ssl.create_default_context(cafile=str(ca))
    connector = aiohttp.TCPConnector(ssl=context, limit=64)
    bodies = [
        admission_review(executor_pod(i % 500 + 1), "spark-jobs")
        for i in range(int(rate * seconds))
    ]
    latencies: list[float] = []
    errors = 0

    async def one(session: aiohttp.ClientSession, body: dict[str, Any]) -> None:
        nonlocal errors
        started = time.perf_counter()
        try:
            async with session.post(url, json=body) as reply:
                answer = await reply.json()
        except aiohttp.ClientError:
            errors += 1
            return
        latencies.append((time.perf_counter() - started) * 1000)
        if "patch" not in answer.get("response", {}):
            errors += 1

    async with aiohttp.ClientSession(connector=connector) as session:
        for body in bodies[:50]:  # warm-up: TLS handshakes, first imports in the handler
            await one(session, body)
        while errors:  # until the policy is indexed and pods get injected
            errors = 0
            await one(session, bodies[0])
            await asyncio.sleep(0.05)
        latencies.clear()
        tasks = []
        start = time.perf_counter()
        for index, body in enumerate(bodies):
            delay = start + index / rate - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            tasks.append(asyncio.create_task(one(session, body)))
            if index % int(rate) == 0:
                progress(f"webhook: {index / rate:.0f}/{seconds:.0f} s sent")
        await asyncio.gather(*tasks)
    return latencies, errors


def bench_webhook(url: str, ca: Path, rate: float, seconds: float) -> dict[str, float]:
    started = time.perf_counter()
    latencies, errors = asyncio.run(_send_reviews(url, ca, rate, seconds))
    elapsed = time.perf_counter() - started
    done(f"webhook: {len(latencies)} reviews answered, {errors} errors")
    return {
        "p50": statistics.median(latencies),
        "p99": percentile(latencies, 0.99),
        "max": max(latencies),
        "sent": len(latencies) + errors,
        "errors": errors,
        "elapsed": elapsed,
    }


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
        flipped = time.perf_counter()
        sidecar.set(Verdict.PRODUCER_HUNG, reasons=("benchmark flip",))
        wait_until(
            "the hung pod deleted",
            lambda name=name: cluster.get(PODS, "flips", name) is None,  # type: ignore[misc]
            operator,
        )
        latencies.append(time.perf_counter() - flipped)
        progress(f"verdict to action: {flip + 1}/{flips}, last {latencies[-1]:.2f} s")
    done(f"verdict to action: {flips} flips")
    return latencies


# --- 3. memory at scale --------------------------------------------------------------


def bench_memory(stack: ExitStack, workdir: Path, pods: int) -> dict[str, float]:
    """A fresh emulator holding `pods` pods before the operator starts (kmock answers
    each request in time linear in its object count, so creating 2,000 pods through its
    HTTP API one by one would take minutes), then a fresh operator watching them."""
    cluster = stack.enter_context(RemediationCluster())
    policy = stored_policy("fleet", "writers")
    sidecars = []
    for _ in range(max(1, pods // PODS_PER_SIDECAR)):
        sidecar = FakeSidecar().start()
        stack.callback(sidecar.close)
        sidecars.append(sidecar)
    for index in range(pods):
        port = sidecars[index % len(sidecars)].port
        body = watched_executor(policy, index + 1, port, node=f"node-{index % 50}")
        cluster.put(PODS, "fleet", body["metadata"]["name"], body)
        if index % 500 == 0:
            progress(f"memory: {index}/{pods} pods stored")
    cluster.put(POLICIES, "fleet", "writers", policy)
    metrics_port = free_port()
    operator, _ = stack.enter_context(operator_on(cluster, workdir, free_port(), metrics_port))
    wait_until(
        "every pod watched",
        lambda: cluster.policy_status("fleet", "writers").get("watched") == pods,
        operator,
    )
    rounds_key = ("hangwatch_operator_poll_rounds_total", (("policy", "fleet/writers"),))
    first = scrape(metrics_port).get(rounds_key, 0.0)
    samples = []
    while scrape(metrics_port).get(rounds_key, 0.0) < first + 3:
        samples.append(rss_mib(operator.process.pid))
        progress(f"memory: {pods} pods watched, RSS {samples[-1]:.0f} MiB")
        time.sleep(1)
    metrics = scrape(metrics_port)
    polls = metrics[("hangwatch_operator_status_poll_duration_seconds_count", ())]
    total = metrics[("hangwatch_operator_status_poll_duration_seconds_sum", ())]
    done(f"memory: {pods} pods, {len(samples)} samples over 3 poll rounds")
    return {
        "steady": statistics.median(samples),
        "max": max(samples),
        "mean_poll_all": total / polls,
    }


@contextmanager
def operator_on(
    cluster: RemediationCluster, workdir: Path, webhook_port: int, metrics_port: int
) -> Iterator[tuple[OperatorRun, Path]]:
    ca, cert, key = generate_webhook_certificates(["localhost"]).write(workdir / "tls")
    settings = {
        "webhook_listen_address": "127.0.0.1",
        "webhook_port": webhook_port,
        "webhook_cert_file": cert,
        "webhook_key_file": key,
        "metrics_listen_address": "127.0.0.1",
        "metrics_port": metrics_port,
    }
    with running_hangwatch_operator(cluster, workdir, settings) as operator:
        yield operator, ca


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0] if __doc__ else "")
    parser.add_argument("--rate", type=float, default=200.0)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--flips", type=int, default=20)
    parser.add_argument("--pods", type=int, default=2000)
    args = parser.parse_args()
    print(f"machine: {os.cpu_count()} CPUs, {cpu_model()}, Python {platform.python_version()}")
    webhook_port, metrics_port = free_port(), free_port()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # clean up children on kill
    with ExitStack() as stack, tempfile.TemporaryDirectory() as tmp:
        cluster = stack.enter_context(RemediationCluster())
        cluster.create(POLICIES, "spark-jobs", stored_policy("spark-jobs", "writers"))
        first, second = Path(tmp) / "first", Path(tmp) / "second"
        first.mkdir()
        second.mkdir()
        operator, ca = stack.enter_context(operator_on(cluster, first, webhook_port, metrics_port))
        wait_until("metrics served", lambda: _metrics_up(metrics_port), operator)
        time.sleep(2)  # let start-up settle before reading the idle footprint
        idle = rss_mib(operator.process.pid)
        url = f"https://localhost:{webhook_port}/inject-sidecar"
        print("measuring (progress on stderr)", file=sys.stderr)
        hook = bench_webhook(url, ca, args.rate, args.seconds)
        flips = bench_flips(cluster, operator, stack, args.flips)
        memory = bench_memory(stack, second, args.pods)
    print(
        f"webhook at {args.rate:.0f} reviews/s for {args.seconds:.0f} s over HTTPS: "
        f"p50 {hook['p50']:.2f} ms, p99 {hook['p99']:.2f} ms, max {hook['max']:.1f} ms "
        f"({hook['sent']:.0f} sent, {hook['errors']:.0f} errors)"
    )
    print(
        f"  target p99 < {WEBHOOK_P99_TARGET_MS:.0f} ms: "
        f"{'met' if hook['p99'] < WEBHOOK_P99_TARGET_MS else 'MISSED'}"
    )
    budget = FLIP_INTERVAL_SECONDS + 1.0
    p99 = percentile(flips, 0.99)
    print(
        f"verdict to action (probe interval {FLIP_INTERVAL_SECONDS} s, {len(flips)} flips): "
        f"p50 {statistics.median(flips):.2f} s, p99 {p99:.2f} s, min {min(flips):.2f} s"
    )
    print(f"  target p99 < interval + 1 s = {budget:.0f} s: {'met' if p99 < budget else 'MISSED'}")
    print(
        f"operator RSS: {idle:.0f} MiB idle (one small policy), {memory['steady']:.0f} MiB "
        f"(max {memory['max']:.0f}) watching {args.pods} pods: "
        f"{(memory['steady'] - idle) * 1024 / args.pods:.1f} KiB per pod; "
        f"mean poll of all sidecars {memory['mean_poll_all'] * 1000:.0f} ms"
    )
    return 0


def _metrics_up(port: int) -> bool:
    try:
        scrape(port)
    except OSError:
        return False
    return True


if __name__ == "__main__":
    sys.exit(main())
