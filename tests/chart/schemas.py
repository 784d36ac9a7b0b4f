"""JSON Schema builders for the chart tests' structural checks of rendered documents.

Not a test module. `closed` is an object with no properties beyond the ones named,
`non_empty` a list of at least one item, `DURATION` a Prometheus duration such as 30s.
"""

from __future__ import annotations

from typing import Any

DURATION = {"type": "string", "pattern": "^[0-9]+[smh]$"}


def closed(properties: dict[str, Any], *required: str) -> dict[str, Any]:
    """An object with only `properties`, of which `required` must be present."""
    schema: dict[str, Any] = {"type": "object", "additionalProperties": False}
    if required:
        schema["required"] = list(required)
    schema["properties"] = properties
    return schema


def non_empty(items: dict[str, Any]) -> dict[str, Any]:
    """A list of one or more `items`."""
    return {"type": "array", "minItems": 1, "items": items}
