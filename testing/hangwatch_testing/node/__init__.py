"""The node tier's single-node Kubernetes that runs real pods, shared with the benchmarks.

`cluster` (the node: control plane, containerd, kubelet, started and cleaned as one),
`components` (its cached build), `config` (what containerd and the kubelet are told),
`network` (its bridge and pod network), `leftovers` (what it leaves on the machine,
and clearing what a killed session left), `images` (the hangwatch image built and
imported into the node), `workloads` (Spark-shaped pods, policies and the operator on
the node).
"""
