"""The hangwatch Kubernetes operator (kopf): policies, sidecar injection, remediation.

Built so far: the ProducerHealthPolicy model (`policies`, CRD in `crds/`), the pure
sidecar patch builder (`injection`), the mutating webhook with its kopf index and
HTTPS server (`webhook`, run as `kopf run -m hangwatch_operator.webhook`), its
registration (`webhook_configuration`), TLS for local runs (`certificates`) and the
settings (`settings`). Correlation and remediation come next. This package is the only
one allowed to import kopf and the Kubernetes client; it consumes the sidecar's
verdicts and the shared contracts in `hangwatch.contracts`.
"""
