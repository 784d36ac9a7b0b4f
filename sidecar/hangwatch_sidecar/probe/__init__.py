"""Probing the Kafka cluster from this pod: the engine behind `hangwatch probe` and the sidecar.

`settings` (what to probe and how long to wait) and `types` (the results, plain data)
are pure; `endpoints` (DNS, TCP, TLS, one ApiVersions round trip per broker),
`metadata` (the cluster's metadata through the producer's own client library) and
`tls` do the I/O; `report` judges a run (pure), `output` renders it (pure) and `cli`
is the `hangwatch probe` command. import-linter keeps the pure modules free of
sockets, TLS and the Kafka client.
"""
