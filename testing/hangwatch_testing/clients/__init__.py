"""Real Kafka clients nobody on this project wrote, run as workloads next to a real sidecar.

`build` builds every client of `testing/clients/` into a cache when missing (the one
build path: the Go producers from Debian's packages, the incidents' own clients at
their own versions from the registries); `workloads` starts each
client (sarama, kafka-go, kcat, a plain confluent-kafka producer) with a rate and an
optional burst/idle rhythm and times the client's own first error; `runs` puts a client,
a real `hangwatch sidecar` process with an EMPTY telemetry directory and the lab
together, injects a fault and records every verdict the sidecar's /status reports.

`hangwatch_testing.incidents` does the same for the incidents' OWN clients at their
own versions (testing/clients/incidents) on the lab's Apache Kafka engine;
`producer_states` puts the real Java client into the states Spark's view classifies,
inside a real Spark executor.
"""
