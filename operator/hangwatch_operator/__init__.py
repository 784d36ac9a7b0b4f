"""The hangwatch Kubernetes operator (kopf): policies, sidecar injection, remediation.

Injection: the ProducerHealthPolicy model (`policies`, CRD in `crds/`), the pure
sidecar patch builder (`injection`), the mutating webhook with its kopf index and
HTTPS server (`webhook`), its registration (`webhook_configuration`) and TLS for local
runs (`certificates`).

Remediation: what is known of watched pods and cordoned nodes, and which pods a
policy watches (`watched`), the sidecars' /status read (`sidecar_status`) and polled
(`status_polling`), correlation across pods and nodes (`correlation`), the decision
vocabulary (`operations`) and memory (`history`), the pure decisions under the safety
limits (`decisions`), Events and policy status (`reporting`), one round's two pure
halves shared with the demo (`rounds`), the API calls (`kube_api`, `actuation`), one
policy's round as I/O glue (`remediation`), the kopf handlers (`handlers`), metrics
(`operator_metrics`) and the `hangwatch operator` command (`operator_cli`). One
settings object (`settings`) serves both halves.

This package is the only one allowed to import kopf and the Kubernetes client; it
talks to sidecars over HTTP only (never imports `hangwatch_sidecar`) and shares the
contracts in `hangwatch.contracts`.
"""
