"""What the tests and the benchmarks share: fixtures built on real components, and waiting.

`waiting` (poll until something holds), `structural` (the CRD's schema, defaults and
CEL rules applied as the API server would), `spark_pods` (executor, driver and other
pods as spark-submit creates them, and AdmissionReviews), `emulated_cluster` (the
operator as a process against kmock's Kubernetes emulator) and `remediation_cluster`
(that cluster with policies, injected pods and sidecar status servers),
`kopf_admission_path` (the injection webhook answered by kopf's admission machinery,
the reference of the webhook benchmark), `spark_driver` (a live local-cluster Spark
driver, and stopping a session with its JVM). Never imported
by hangwatch's own packages (import-linter checks it); needs the `dev` extra.
"""
