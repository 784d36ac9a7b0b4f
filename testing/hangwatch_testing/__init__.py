"""What the tests and the benchmarks share: fixtures built on real components, and waiting.

`waiting` (poll until something holds), `structural` (the CRD's schema, defaults and
CEL rules applied as the API server would), `spark_pods` (executor, driver and other
pods as spark-submit creates them, and AdmissionReviews), `emulated_cluster` (the
operator as a process against kmock's Kubernetes emulator) and `remediation_cluster`
(that cluster with policies, injected pods and sidecar status servers),
`kopf_admission_path` (the injection webhook answered by kopf's admission machinery,
the reference of the webhook benchmark), `spark_driver` (a live local-cluster Spark
driver, and stopping a session with its JVM), `kube` (the kube tier's real control
plane, its PKI, the chart installed by real Helm and the operator it configures, Spark
pods on the API server) and `node` (the node tier's single-node cluster that runs
pods, its images and workloads), `containers` (buildah and podman with a private store,
the debootstrap base), `kafka_clients` (what the real-Kafka lab tests and the engine
benchmark share). Never imported by hangwatch's own packages (import-linter checks it);
the tests' own modules (`tests`) are imported by nothing outside tests/ (likewise);
needs the `dev` extra.
"""
