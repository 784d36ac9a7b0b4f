"""The wire format the producer wrapper writes and the sidecar reads, defined once.

- `telemetry`: the producer telemetry document and its files (names, lock, default
  directory), written by the producer wrapper (`hangwatch_producer.telemetry`), read by
  the sidecar (`hangwatch_sidecar.telemetry_reader`);
- `schema`: the bounded types, problem kinds and strict decoding every document of
  hangwatch is built from (the sidecar's `/status` document, `hangwatch.wire.status`,
  too).

They live in the producer distribution because an executor image installs only it; the
`hangwatch` distribution imports them from here. The version rule every document
follows is in `hangwatch.wire` and docs/telemetry.md. Pure: no I/O.
"""
