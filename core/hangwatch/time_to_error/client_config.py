"""Reading producer settings: `-X key=value`, `.properties` files, typed values, key names.

`config_check` feeds the raw strings in; the per-client models read typed values
through these helpers, so every malformed value fails the same way: one line naming
the key (never echoing a secret's value, see `hangwatch_producer.secrets`).
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Collection, Iterable, Mapping, Sequence
from pathlib import Path

from hangwatch.time_to_error.estimate import ClientSettingsError
from hangwatch_producer.secrets import REDACTED, is_secret_key

_PROPERTY_LINE = re.compile(r"^([^=:\s]+)\s*(?:[=:]|\s)\s*(.*)$")
_GO_DURATION_PART = re.compile(r"(\d+\.?\d*|\.\d+)(ns|us|µs|μs|ms|s|m|h)")
_GO_UNIT_SECONDS = {
    "ns": 1e-9,
    "us": 1e-6,
    "µs": 1e-6,
    "μs": 1e-6,
    "ms": 1e-3,
    "s": 1.0,
    "m": 60.0,
    "h": 3600.0,
}
_GO_TRUE = frozenset({"1", "t", "T", "TRUE", "true", "True"})
_GO_FALSE = frozenset({"0", "f", "F", "FALSE", "false", "False"})


def shown(key: str, value: str) -> str:
    """The value as it may appear in a message: secrets are replaced by a marker."""
    return REDACTED if is_secret_key(key) else repr(value)


def parse_properties(lines: Sequence[str], source: str) -> dict[str, str]:
    """`key=value`, `key: value` or `key value` lines; `#` and `!` comments, blank lines.

    Line continuations and escapes of Java's format are not supported.
    """
    config: dict[str, str] = {}
    for number, raw in enumerate(lines, start=1):
        line = raw.strip()
        if not line or line[0] in "#!":
            continue
        match = _PROPERTY_LINE.match(line)
        if match is None:
            raise ClientSettingsError(
                f"{source}:{number}: expected key=value, got {line.split()[0]!r}"
            )
        config[match.group(1)] = match.group(2).strip()
    return config


def read_properties(path: Path) -> dict[str, str]:
    """A `.properties` file as a dict; a missing or unreadable file is one-line error."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ClientSettingsError(f"--file {path}: no such file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ClientSettingsError(
            f"--file {path}: cannot read ({exc.__class__.__name__})"
        ) from None
    return parse_properties(text.splitlines(), str(path))


def canonical_keys(
    config: Mapping[str, str],
    known: Collection[str],
    aliases: Mapping[str, str],
    client: str,
    ignored_prefixes: tuple[str, ...] = (),
) -> dict[str, str]:
    """`config` with every key spelled as the client spells it; aliases folded in order.

    Keys match case-insensitively. An unknown key is an error that suggests the closest
    known one; keys starting with one of `ignored_prefixes` are accepted and dropped.
    """
    by_lower = {k.lower(): k for k in (*known, *aliases)}
    result: dict[str, str] = {}
    for key, value in config.items():
        if key.lower().startswith(tuple(p.lower() for p in ignored_prefixes)):
            continue
        spelled = by_lower.get(key.lower())
        if spelled is None:
            raise ClientSettingsError(unknown_key_message(key, [*known, *aliases], client))
        result[aliases.get(spelled, spelled)] = value
    return result


def unknown_key_message(key: str, known: Iterable[str], client: str) -> str:
    """`unknown sarama setting 'Net.DialTimout' (did you mean 'Net.DialTimeout'?)`."""
    candidates = {k.lower(): k for k in known}
    close = difflib.get_close_matches(key.lower(), list(candidates), n=1, cutoff=0.6)
    hint = f" (did you mean {candidates[close[0]]!r}?)" if close else ""
    return f"unknown {client} setting {key!r}{hint}"


def integer(config: Mapping[str, str], key: str, default: int, minimum: int = 0) -> int:
    """An integer setting (milliseconds, counts); non-numeric or below `minimum` is an error."""
    text = config.get(key)
    if text is None:
        return default
    try:
        value = int(text.strip())
    except ValueError:
        raise ClientSettingsError(f"{key}: expected an integer, got {shown(key, text)}") from None
    if value < minimum:
        raise ClientSettingsError(f"{key}: must be >= {minimum}, got {value}")
    return value


def boolean(config: Mapping[str, str], key: str, default: bool) -> bool:
    """A boolean setting: true/false in any case, or Go's 1/0/t/f."""
    text = config.get(key)
    if text is None:
        return default
    word = text.strip()
    if word.lower() == "true" or word in _GO_TRUE:
        return True
    if word.lower() == "false" or word in _GO_FALSE:
        return False
    raise ClientSettingsError(f"{key}: expected true or false, got {shown(key, text)}")


def go_duration_seconds(text: str) -> float:
    """Go's `time.ParseDuration` syntax (`30s`, `100ms`, `1m30s`, `0`) in seconds.

    Raises ValueError for anything Go would refuse.
    """
    body = text.strip()
    sign = -1.0 if body.startswith("-") else 1.0
    body = body.lstrip("+-")
    if body == "0":
        return 0.0
    parts = _GO_DURATION_PART.findall(body)
    if not body or "".join(number + unit for number, unit in parts) != body:
        raise ValueError(text)
    return sign * sum(float(number) * _GO_UNIT_SECONDS[unit] for number, unit in parts)


def duration(config: Mapping[str, str], key: str, default: str, positive: bool = False) -> float:
    """A Go duration setting in seconds; malformed, negative (or zero if `positive`) is an error."""
    text = config.get(key, default)
    try:
        seconds = go_duration_seconds(text)
    except ValueError:
        raise ClientSettingsError(
            f"{key}: expected a Go duration such as 30s, 100ms or 1m30s, got {shown(key, text)}"
        ) from None
    if seconds < 0 or (positive and seconds == 0):
        bound = "> 0" if positive else ">= 0"
        raise ClientSettingsError(f"{key}: must be {bound}, got {text.strip()!r}")
    return seconds


def address_count(text: str | None) -> int:
    """Distinct entries of a comma-separated broker list (`host:port,host:port`)."""
    if text is None:
        return 0
    return len({entry.strip() for entry in text.split(",") if entry.strip()})
