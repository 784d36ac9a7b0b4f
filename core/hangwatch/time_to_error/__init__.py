"""Time-to-error models: how long a producer configuration can stay silent before a send fails.

Pure functions of a client's configuration (librdkafka/confluent-kafka, the Java
client, Go sarama): `models.worst_case(client, config, brokers, budget_seconds)` gives an
`estimate.Estimate` with each term of the formula and warnings for risky settings.
Used by `hangwatch config-check` (the pipeline package) and by the sidecar, which
compares each producer's actual settings with its policy's time-to-error budget.
"""
