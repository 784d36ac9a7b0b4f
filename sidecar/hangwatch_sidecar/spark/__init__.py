"""Spark's view of this executor: the driver's REST API read by the sidecar, or a thread
dump of the pod's own JVM through HotSpot's attach mechanism.

`types` (plain data), `address` (where the driver's UI is), `answers` (REST answers
parsed and checked), `threads` (thread dump -> Kafka producer thread states),
`tracking` (snapshots over time -> `SparkView`) and `judge` (view -> findings for the
verdict engine) are pure, and so is `hotspot` (a HotSpot thread dump's text -> the
entries `threads` classifies); `client` (HTTP to the driver, bounded) and `attach` (the
local JVM's attach mechanism, bounded) are the I/O edges.
"""
