"""Stage 3 of the operator benchmark: one operator over a fleet, memory at scale.

An operator started against `--pods` executor pods already stored (one policy, 100
pods per real sidecar server, default 10 s poll): the time from its start until the
policy's status counts every pod as watched (target at 10,000 pods: 60 s), then over
three poll rounds its RSS (next to the idle operator's of the flips stage; target
under 100 KiB per pod), the mean time to poll every sidecar (target: within the 10 s
interval) and the CPU the operator and this benchmark's process (the emulator and the
sidecar servers) used meanwhile, as shares of one core: on a loaded machine a round
waits for CPU, not for the operator's work. Then verdict to action at that scale:
`--scale-flips` of the pods have a sidecar of their own, flipped one after the other
to `producer_hung` (at different phases of the 10 s poll) until the pod is gone
(target: p99 under the interval plus 1 s), and from the operator's first read of the
flipped verdict (those sidecars note when they answer) until the pod is gone: the
operator's own part, without the wait for that read.
"""

from __future__ import annotations

import os
import statistics
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from measuring import percentile

from hangwatch_testing.ports import free_port
from hangwatch_testing.remediation_cluster import RemediationCluster
from operator_stages.common import done, operator_on, progress, wait_until
from operator_stages.fleet import measure_rounds, store_fleet
from operator_stages.flips import flip_to_deletion

SCALE_INTERVAL_SECONDS = 10
"""The policy's default probe interval, used at scale."""


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
        **steady.figures(),
        "own_cpu": own_cpu,
        "load": os.getloadavg()[0],
        "flips": latencies,
        "after_read": after_read,
        "flip_load": os.getloadavg()[0],
    }


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
