"""The kube tier's real Kubernetes, shared with the node tier and the benchmarks.

`cluster` (etcd, kube-apiserver and kube-controller-manager on loopback, and the
command lines and process handling the node tier's cluster reuses), `pki` (its CA,
certificates and service-account keys), `release` (the chart installed by real Helm and
the operator it configures), `spark` (Spark pods created as spark-submit's driver
creates them), `fleet` (executor pods "running" without a kubelet, each with a sidecar
on loopback), `readme` (the README's cluster commands).
"""
