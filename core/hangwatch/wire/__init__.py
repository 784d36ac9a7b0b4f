"""The wire formats between hangwatch's components, each defined once as typed data.

- `telemetry`: the producer telemetry document and its files (names, lock, default
  directory), written by the producer wrapper, read by the sidecar. It and `schema`
  (the bounded types every document is built from) are defined in
  `hangwatch_producer.wire`, the producer distribution an executor image installs
  alone; `hangwatch.wire.telemetry` and `hangwatch.wire.schema` are that same module;
- `status`: the sidecar's `/status` document, written by the sidecar, read by the
  operator (and the demo's local operator);
- `sidecar_http`: the sidecar's port and HTTP paths, served by the sidecar, dialled by
  the operator, probed by the kubelet (the injected liveness and readiness probes).

Each document is a `msgspec.Struct` tree with its bounds (string lengths, list sizes,
number ranges) in the types, an `encode` the writer calls and a `decode` the reader
calls; both sides import them, so no field name is spelled twice.

Version rule (docs/telemetry.md, docs/sidecar.md): a document carries an integer
`schema`. Within one schema, writers only ADD optional fields and readers ignore fields
they do not know. Removing a field, renaming it, or changing its type, unit or meaning
bumps `schema`. A reader accepts exactly the schemas it knows (`SUPPORTED_SCHEMAS`) and
refuses any other - a newer one included - with a reason naming both, never guessing
what a newer writer meant: the producer becomes `unknown` (telemetry) or the pod
`sidecar_unreachable` (status), and nothing is restarted on a misread. Readers learn a
new schema one release before writers start writing it.

Pure: no I/O.
"""
