"""The hangwatch Kubernetes operator (kopf): policies, sidecar injection, remediation.

Not built yet (issue: operator). This package is the only one allowed to import kopf
and the Kubernetes client; it consumes the sidecar's verdicts and the shared
contracts in `hangwatch.contracts`.
"""
