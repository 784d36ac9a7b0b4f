"""Building blocks of the wire formats: bounded types, problem kinds, strict decoding, clamping.

`telemetry` and `status` declare their documents with these types, so every number is
finite and in range and every string and collection has a maximum size. `decode_object`
and `convert` turn untrusted bytes into those documents or raise `WireFormatError` with
a short reason and a `Problem` kind; `clamp` cuts a writer's own document to bounds.
Pure: no I/O.
"""

from __future__ import annotations

import math
from enum import Enum
from typing import Annotated, Any, TypeVar

import msgspec

T = TypeVar("T")

INT64_MAX = 2**63 - 1
"""Largest counter any document may carry (a larger one is not from a real client)."""

MAX_TIMESTAMP = 1e11
"""Wall-clock seconds beyond this (the year 5138) are not a real clock's."""

MAX_DURATION_SECONDS = 1e9
"""Durations and ages beyond this (31 years) are not a real process's."""

MAX_REASON = 240
"""A reader's reason for refusing a document is cut to this many characters."""

Count = Annotated[int, msgspec.Meta(ge=0, le=INT64_MAX)]
"""A counter or gauge that cannot be negative."""

BrokerOrPartitionId = Annotated[int, msgspec.Meta(ge=-1, le=INT64_MAX)]
"""A broker or partition id; -1 is librdkafka's "none" (bootstrap entry, no leader)."""

Timestamp = Annotated[float, msgspec.Meta(ge=0, le=MAX_TIMESTAMP)]
"""Seconds since the epoch; NaN and infinities are refused by the bounds."""

Seconds = Annotated[float, msgspec.Meta(ge=0, le=MAX_DURATION_SECONDS)]
"""A duration or an age in seconds, finite and not negative."""


class Problem(str, Enum):
    """Why a reader could not use a document or its file: the bounded label of metrics.

    A `str` whose `str()` and format are its value (what `enum.StrEnum` gives from
    Python 3.11; this package runs on 3.9).
    """

    INVALID_JSON = "invalid_json"
    """Not JSON (truncated, garbage, NaN, nested too deeply)."""
    NOT_AN_OBJECT = "not_an_object"
    UNSUPPORTED_SCHEMA = "unsupported_schema"
    """A `schema` this reader does not know, newer or older (see the version rule)."""
    FOREIGN_FILE = "foreign_file"
    """Another kind of document."""
    MISSING_FIELDS = "missing_fields"
    """A required field is absent or unusable."""
    BAD_FIELD = "bad_field"
    """A field of the wrong type, out of range (negative count, NaN) or too long."""
    TOO_LARGE = "too_large"
    UNREADABLE = "unreadable"
    NOT_REGULAR_FILE = "not_a_regular_file"
    """A FIFO, device, socket or symbolic link where a file was expected: never opened."""
    NO_DIRECTORY = "no_directory"
    TOO_MANY_PRODUCERS = "too_many_producers"

    def __str__(self) -> str:
        return str(self.value)

    def __format__(self, spec: str) -> str:
        return format(str(self.value), spec)


class WireFormatError(ValueError):
    """A document a reader cannot use: `problem` is the kind, the message a short reason."""

    def __init__(self, problem: Problem, reason: str) -> None:
        super().__init__(reason[:MAX_REASON])
        self.problem = problem

    @property
    def reason(self) -> str:
        return str(self)


def decode_object(raw: bytes, what: str) -> dict[str, Any]:
    """`raw` as a JSON object (strict JSON: no NaN or Infinity), or `WireFormatError`."""
    try:
        obj = msgspec.json.decode(raw)
    except msgspec.DecodeError:
        raise WireFormatError(
            Problem.INVALID_JSON, f"{what} is not valid JSON (truncated or garbage)"
        ) from None
    except RecursionError:
        raise WireFormatError(Problem.INVALID_JSON, f"{what} is nested too deeply") from None
    if not isinstance(obj, dict):
        raise WireFormatError(Problem.NOT_AN_OBJECT, f"{what} is not a JSON object")
    return obj


def check_schema(obj: dict[str, Any], supported: frozenset[int], what: str) -> None:
    """The version rule: only the schemas this reader knows are read."""
    schema = obj.get("schema")
    if not isinstance(schema, int) or isinstance(schema, bool) or schema not in supported:
        known = ", ".join(str(s) for s in sorted(supported))
        raise WireFormatError(
            Problem.UNSUPPORTED_SCHEMA,
            f"unsupported {what} schema {repr(schema)[:20]} (this reader knows {known})",
        )


def convert(obj: Any, kind: type[T], what: str, required: tuple[str, ...] = ()) -> T:
    """`obj` as the typed document `kind`, every bound checked, or `WireFormatError`.

    An error at one of the `required` top-level fields is reported as missing fields.
    """
    try:
        return msgspec.convert(obj, kind)
    except msgspec.ValidationError as exc:
        message = str(exc)
        missing = "missing required field" in message and " - at `" not in message
        at_required = any(message.endswith(f"- at `$.{name}`") for name in required)
        if missing or at_required:
            names = " or ".join(required)
            raise WireFormatError(
                Problem.MISSING_FIELDS, f"{what} lacks {names}: {message}"
            ) from None
        raise WireFormatError(Problem.BAD_FIELD, f"{what}: {message}") from None
    except RecursionError:
        raise WireFormatError(Problem.INVALID_JSON, f"{what} is nested too deeply") from None


def read(
    obj: Any,
    kind: type[T],
    what: str,
    supported: frozenset[int],
    required: tuple[str, ...],
    document_kind: str | None = None,
) -> T:
    """`obj` (decoded JSON) as the document `kind`: an object, of `document_kind` if given
    (absent counts as that kind), of a supported schema, every field in bounds."""
    if not isinstance(obj, dict):
        raise WireFormatError(Problem.NOT_AN_OBJECT, f"{what} is not a JSON object")
    found = obj.get("kind", document_kind)
    if document_kind is not None and found != document_kind:
        raise WireFormatError(
            Problem.FOREIGN_FILE, f"{what} kind {str(found)[:40]!r} is not {document_kind}"
        )
    check_schema(obj, supported, what)
    return convert(obj, kind, what, required)


def clamp(value: Any, max_string: int, max_items: int, max_depth: int) -> Any:
    """`value` (a struct of this package, or JSON builtins) as JSON builtins cut to bounds.

    Strings are cut to `max_string` characters, lists and objects (never a struct's own
    fields) to `max_items` entries; containers deeper than `max_depth` and non-finite
    floats become null.
    """
    if isinstance(value, str):
        return value[:max_string]
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if not isinstance(value, (msgspec.Struct, dict, list, tuple, set, frozenset)):
        return value
    if max_depth <= 0:
        return None
    deeper = max_depth - 1
    if isinstance(value, msgspec.Struct):
        return {
            name: clamp(getattr(value, name), max_string, max_items, deeper)
            for name in value.__struct_fields__
        }
    if isinstance(value, dict):
        return {
            str(k)[:max_string]: clamp(v, max_string, max_items, deeper)
            for k, v in list(value.items())[:max_items]
        }
    return [clamp(v, max_string, max_items, deeper) for v in list(value)[:max_items]]
