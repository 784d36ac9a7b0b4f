"""Reading settings: Go durations, .properties lines, -X arguments, broker lists.

Covers: Go duration syntax accepted (`30s`, `100ms`, `1m30s`, `1.5h`, `.5s`, `0`) and
refused (no unit, spaces, unknown unit, empty); `.properties` separators (`=`, `:`,
whitespace), comments and blank lines; `-X` keeps the text after the first `=`;
sarama keys match case-insensitively and `bootstrap.servers` stands for `Addrs`;
broker lists count distinct entries.
"""

from __future__ import annotations

import pytest

from hangwatch.properties import parse_assignments
from hangwatch.time_to_error import sarama
from hangwatch.time_to_error.client_config import (
    address_count,
    go_duration_seconds,
    parse_properties,
)


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("30s", 30), ("100ms", 0.1), ("1m30s", 90), ("1.5h", 5400), (".5s", 0.5), ("0", 0)],
)
def test_go_durations(text: str, seconds: float) -> None:
    assert go_duration_seconds(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["30", "3 s", "10 seconds", "5d", "", "s", "1m30"])
def test_malformed_go_durations(text: str) -> None:
    with pytest.raises(ValueError):
        go_duration_seconds(text)


def test_properties_lines() -> None:
    lines = [
        "# comment",
        "  ! bang comment",
        "",
        "a=1",
        "b: 2",
        "c 3",
        "bootstrap.servers = k1:9092,k2:9092",
        "d=x=y",
    ]
    assert parse_properties(lines, "f") == {
        "a": "1",
        "b": "2",
        "c": "3",
        "bootstrap.servers": "k1:9092,k2:9092",
        "d": "x=y",
    }


def test_x_assignments_keep_text_after_first_equals() -> None:
    assert parse_assignments(["sasl.jaas.config=a=b c", "x= 1 "], strip_values=True) == {
        "sasl.jaas.config": "a=b c",
        "x": "1",
    }


def test_sarama_keys_are_case_insensitive_and_bootstrap_means_addrs() -> None:
    canonical = sarama.canonical({"net.dialtimeout": "5s", "bootstrap.servers": "a:1"})
    assert canonical == {"Net.DialTimeout": "5s", "Addrs": "a:1"}


def test_address_count_is_distinct_entries() -> None:
    assert address_count("a:1, b:2,a:1,,") == 2
    assert address_count(None) == 0
