"""The producers' telemetry as evidence: its judgement (`judge`: each producer's rules)
and the naming of the refusals it reports (`refusals`). The reading of the telemetry
files is `telemetry_reader`, `producer_reader` and `tracking`."""
