"""The local fault lab: a Kafka cluster that tests and the demo break on purpose.

Two engines behind one `Lab` interface: `mock` (default), librdkafka's mock cluster
(shipped in the confluent-kafka wheel) in a child process, whose faults are injected
through its C API; and `kafka`, a real 3-node Apache Kafka cluster (KRaft; the current
4.x by default, 3.9 for clients older than 2.1) whose faults have real causes (processes
stopped or frozen, controller elections, reassignments). Both blackhole brokers with real
kernel packet filtering. Use `Lab(..., engine=...)` as a context manager from Python, or
`hangwatch lab` from a shell.
"""

from hangwatch_lab import engines as _engines  # noqa: F401 - registers every engine with Lab
from hangwatch_lab.lab import DEFAULT_ENGINE, ENGINES, BrokerState, Lab, LabStatus

__all__ = ["DEFAULT_ENGINE", "ENGINES", "BrokerState", "Lab", "LabStatus"]
