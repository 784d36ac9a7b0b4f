"""The local fault lab: a real Kafka-protocol cluster that tests and the demo break on purpose.

The cluster is librdkafka's mock cluster (shipped in the confluent-kafka wheel),
running in a child process so a crash in it cannot take the caller down. Faults are
injected through the mock's C API (broker down, RTT, request errors, leader moves)
and through real kernel packet filtering (blackholed brokers). Use `Lab` as a
context manager from Python, or `hangwatch lab` from a shell.
"""

from hangwatch_lab.lab import BrokerState, Lab, LabStatus

__all__ = ["BrokerState", "Lab", "LabStatus"]
