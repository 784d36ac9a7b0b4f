"""The pod's own TCP connections to brokers, as the kernel sees them (issue 12's socket view).

The sidecar shares the pod's network namespace, so the kernel's per-socket TCP state of
every Kafka client in the pod is readable without the client's cooperation. `types`
holds the plain data (one snapshot of connections, the evidence derived from it);
`reader` takes snapshots through sock_diag netlink (pyroute2) and the namespace's TCP
counters; `classify` (pure) turns snapshots into evidence per connection and per broker;
`judge` (pure) turns evidence into findings the verdict engine weighs.
"""
