"""Real Kafka clients nobody on this project wrote, run as workloads next to a real sidecar.

`build` compiles the Go producers in `testing/clients/` (sarama and kafka-go from
Debian's packages, GOPATH mode) into a cache when missing; `workloads` starts each
client (sarama, kafka-go, kcat, a plain confluent-kafka producer) with a rate and an
optional burst/idle rhythm and times the client's own first error; `runs` puts a client,
a real `hangwatch sidecar` process with an EMPTY telemetry directory and the lab
together, injects a fault and records every verdict the sidecar's /status reports.

`incidents` does the same for the incidents' OWN clients at their own versions
(testing/clients/incidents, built from the registries by scripts/build-clients.sh) on
the lab's Apache Kafka engine; `producer_states` puts the real Java client into the
states Spark's view classifies, inside a real Spark executor.
"""
