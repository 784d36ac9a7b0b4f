"""The operator benchmark's stages, one module each, run by benchmarks/operator_benchmark.py.

`webhook` (the injection webhook's throughput at saturation), `flips` (verdict to
action), `scale` (one operator over a stored fleet: time to watch it, memory, poll time,
verdict to action at scale), `replicas` (operators sharing that fleet through shard
Leases), `kube` (one operator over a fleet on the real API server). `common` holds
what they share (progress lines, waiting on an operator process, an operator on
loopback), `fleet` the stored fleet and the steady state read over three poll rounds.
"""
