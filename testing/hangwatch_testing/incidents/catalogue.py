"""Every replayed row in one table: the seeds', then each field-corpus module's rows.

A field-corpus module (one per client family or report group) defines `ROWS`, a tuple of
`Incident`s naming their `FieldCase`, and is added to `MODULES` below; ids are unique
across the table (checked at import).
"""

from __future__ import annotations

from hangwatch_testing.incidents import (
    kafka_clients,
    kafka_go,
    kafkajs,
    librdkafka,
    sarama_2150,
    seeds,
)
from hangwatch_testing.incidents.model import FieldCase, Incident

MODULES = (
    seeds.SEEDS,
    librdkafka.ROWS,
    kafka_go.ROWS,
    sarama_2150.ROWS,
    kafkajs.ROWS,
    kafka_clients.ROWS,
)
"""Each module's rows, in the table's order."""
INCIDENTS: tuple[Incident, ...] = tuple(row for rows in MODULES for row in rows)
BY_ID = {incident.id: incident for incident in INCIDENTS}
if len(BY_ID) != len(INCIDENTS):
    raise ValueError("two replayed rows share an id")
CASES: dict[str, FieldCase] = {i.case.id: i.case for i in INCIDENTS if i.case is not None}
"""The field corpus's reports, by id."""


def rows_of(case: str) -> tuple[Incident, ...]:
    """The rows replaying field case `case` (its affected release, its control, ...)."""
    return tuple(i for i in INCIDENTS if i.case is not None and i.case.id == case)
