"""Spark's view of this executor: the driver's REST API read by the sidecar.

`types` (plain data), `address` (where the driver's UI is), `answers` (REST answers
parsed and checked), `threads` (thread dump -> Kafka producer thread states),
`tracking` (snapshots over time -> `SparkView`) and `judge` (view -> findings for the
verdict engine) are pure; `client` is the one I/O edge (HTTP to the driver, bounded).
"""
