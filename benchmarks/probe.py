"""Benchmark of the probing engine on the local lab: healthy speed and the cost of faults.

Prints, measured in one run on this machine: the median wall time of a healthy 3-broker
probe, of a probe with one broker blackholed (against the connect timeout), and of the
S1 situation (two blackholed brokers and a wedged one), each next to a sequential probe
of the same brokers built from the engine's own single-endpoint function. Targets:
healthy under 50 ms; one blackholed broker costs at most the connect timeout + 20 %.
Needs root and iptables (kernel blackholes). Run: python benchmarks/probe.py
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable, Sequence

from machine import describe, unwind_on_sigterm

from hangwatch_lab import Lab, netfilter
from hangwatch_sidecar.probe.endpoints import advertised_only, probe_cluster, probe_endpoint
from hangwatch_sidecar.probe.metadata import MetadataClient
from hangwatch_sidecar.probe.settings import Endpoint, ProbeSettings, parse_bootstrap
from hangwatch_sidecar.probe.tls import tls_context

SETTINGS = ProbeSettings(connect_timeout_ms=1000, request_timeout_ms=1000)
HEALTHY_RUNS = 20
FAULT_RUNS = 5
HEALTHY_TARGET_MS = 50.0
BLACKHOLE_ALLOWANCE = 1.2


def sequential_probe(bootstrap: Sequence[Endpoint], settings: ProbeSettings) -> None:
    """The same steps as probe_cluster, one after the other (metadata first, as there)."""
    tls = tls_context(settings)
    with MetadataClient(bootstrap, settings) as client:
        metadata = client.fetch(())
        for endpoint in [*bootstrap, *advertised_only(bootstrap, metadata.metadata)]:
            probe_endpoint(endpoint, settings, tls)


def concurrent_probe(bootstrap: Sequence[Endpoint], settings: ProbeSettings) -> None:
    probe_cluster(bootstrap, (), settings)


def median_ms(
    label: str, runs: int, probe: Callable[[Sequence[Endpoint], ProbeSettings], None], lab: Lab
) -> float:
    bootstrap = parse_bootstrap(lab.bootstrap)
    probe(bootstrap, SETTINGS)  # warm-up: imports, first client
    times = []
    for n in range(1, runs + 1):
        print(f"\r  {label}: run {n}/{runs}", end="", file=sys.stderr, flush=True)
        start = time.perf_counter()
        probe(bootstrap, SETTINGS)
        times.append((time.perf_counter() - start) * 1000)
    print(f"\r  {label}: done ({runs} runs)".ljust(60), file=sys.stderr, flush=True)
    return statistics.median(times)


def scenario(lab: Lab, label: str, runs: int) -> tuple[float, float]:
    concurrent = median_ms(f"{label}, concurrent", runs, concurrent_probe, lab)
    sequential = median_ms(f"{label}, sequential", runs, sequential_probe, lab)
    return concurrent, sequential


def main() -> int:
    argparse.ArgumentParser(description=__doc__.splitlines()[0]).parse_args()  # --help; no options
    reason = netfilter.available()
    if reason is not None:
        print(f"benchmarks/probe.py: cannot blackhole brokers: {reason}", file=sys.stderr)
        return 1
    print(
        f"machine: {describe()}, "
        f"connect/request timeout {SETTINGS.connect_timeout_ms}/{SETTINGS.request_timeout_ms} ms"
    )
    results: dict[str, tuple[float, float]] = {}
    with Lab(brokers=3, topics={"t": 3}) as lab:
        print(f"lab engine: {lab.engine_description}")
        print("measuring (progress on stderr)", file=sys.stderr)
        results["healthy, 3 brokers"] = scenario(lab, "healthy", HEALTHY_RUNS)
        lab.blackhole(2)
        results["1 broker blackholed"] = scenario(lab, "1 blackholed", FAULT_RUNS)
        lab.blackhole(1)
        lab.unresponsive(3)
        results["2 blackholed + 1 unresponsive (S1)"] = scenario(lab, "S1", FAULT_RUNS)
        lab.restore()
    print(f"{'scenario':38} {'concurrent':>12} {'sequential':>12} {'ratio':>7}")
    for name, (conc, seq) in results.items():
        print(f"{name:38} {conc:10.1f}ms {seq:10.1f}ms {conc / seq:7.2f}")
    healthy = results["healthy, 3 brokers"][0]
    blackholed = results["1 broker blackholed"][0]
    budget = SETTINGS.connect_timeout_ms * BLACKHOLE_ALLOWANCE
    print(
        f"target healthy < {HEALTHY_TARGET_MS:.0f} ms: {healthy:.1f} ms "
        f"({'met' if healthy < HEALTHY_TARGET_MS else 'MISSED'})"
    )
    print(
        f"target 1 blackholed <= connect timeout + 20 % = {budget:.0f} ms: {blackholed:.1f} ms "
        f"({'met' if blackholed <= budget else 'MISSED'})"
    )
    return 0


if __name__ == "__main__":
    unwind_on_sigterm()
    sys.exit(main())
