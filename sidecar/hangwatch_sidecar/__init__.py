"""hangwatch sidecar: runs next to a Spark executor and judges whether its Kafka producers hang.

It probes the brokers and the cluster metadata from the pod (`probes`, reused by the
`hangwatch probe` command), reads the producer telemetry the pipeline writes, decides a
verdict and serves `/metrics`, `/status` and `/healthz`. It holds no Kubernetes
credentials and never imports kopf or the Kubernetes client (import-linter checks it).
"""
