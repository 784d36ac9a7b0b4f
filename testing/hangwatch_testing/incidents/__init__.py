"""Published producer hangs replayed with their own clients, at their own versions, on Apache Kafka.

- `model`: what one replayed row is (`Incident`: its client, how it is started, its
  fault, where it runs) and, for the field corpus, the public report it replays
  (`FieldCase`: the client family, the affected and fixed releases, the recipe);
- `seeds`: the five seed incidents (S0-S4, docs/incidents.md) and their controls;
- `catalogue`: every row, in one table (`INCIDENTS`, `BY_ID`): the seeds', then each
  field-corpus module's `ROWS`;
- `replay`: one row replayed on a fresh lab next to a real `hangwatch sidecar`, and what
  it saw (`Replay`).

The clients themselves are `testing/clients/incidents/`, built by
`hangwatch_testing.clients.build` (the one build path of every client).
"""
