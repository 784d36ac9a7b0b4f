"""The table of client releases with a published hang (`hangwatch.known_hangs`).

Covered: every row names a known client, releases that parse, a report link and a line
of what happens, and a fixed release after the affected ones; a release is named by the
rows whose range holds it and by no other (the first and last affected, the fixed one
not, one below the first not; open upstream: every later release); version strings as
producers, classpaths, build information and package.json files spell them (`v1.37.2`,
`2.12.1-RC1`, `3.9.2-ccs`); any text (a property) is a release or None, never an error,
and names hangs only when it is one; docs/sidecar.md's table shows every row as it is.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hangwatch.known_hangs import (
    BY_ID,
    CLIENTS,
    KNOWN_HANGS,
    MAX_VERSION_CHARS,
    release,
    releases_of,
)


def test_every_row_is_complete_and_its_fix_comes_after_it() -> None:
    assert len(BY_ID) == len(KNOWN_HANGS)
    for hang in KNOWN_HANGS:
        assert hang.client in CLIENTS and hang.id.startswith(hang.client + "#"), hang.id
        assert hang.report.startswith("https://"), hang.id
        assert hang.what and "\n" not in hang.what and hang.replayed, hang.id
        first = release(hang.first)
        assert first is not None and hang.affects(first), hang.id
        if hang.last is not None:
            last = release(hang.last)
            assert last is not None and first <= last and hang.affects(last), hang.id
        if hang.fixed is not None:
            fixed = release(hang.fixed)
            assert fixed is not None and fixed > first and not hang.affects(fixed), hang.id


@pytest.mark.parametrize(
    ("client", "version", "named"),
    [
        ("sarama", "v1.37.2", {"sarama#2377"}),
        ("sarama", "v1.38.0", set()),
        ("sarama", "1.31.2", {"sarama#2150", "sarama#2377"}),
        ("sarama", "v1.33.0", {"sarama#2377"}),
        ("sarama", "v1.29.0", set()),
        ("kafka-go", "v0.3.5", set()),  # suspected by the report; its writer is v0.3.7's
        ("kafka-go", "v0.3.6", {"kafka-go#451"}),
        ("kafka-go", "v0.3.7", set()),
        ("kafka-go", "v0.4.8", set()),
        ("kafkajs", "1.14.0", {"kafkajs#918"}),
        ("kafkajs", "1.15.0", set()),
        ("kafka-clients", "2.1.0", {"kafka-clients#KAFKA-7755"}),
        ("kafka-clients", "2.1.1", set()),
        ("librdkafka", "2.12.1", {"librdkafka#5430"}),
        ("librdkafka", "2.12.1-RC1", {"librdkafka#5430"}),
        ("librdkafka", "2.20.0", {"librdkafka#5430"}),  # open upstream, said of master too
        ("librdkafka", "2.8.0", {"librdkafka#5080"}),
        ("librdkafka", "2.9.0", set()),  # open upstream, reported on 2.8.0 alone
        ("librdkafka", "2.6.1", set()),
        ("sarama", "not a version", set()),
        ("unknown-client", "1.0.0", set()),
    ],
)
def test_a_release_is_named_by_the_rows_that_hold_it(
    client: str, version: str, named: set[str]
) -> None:
    assert {h.id for h in releases_of(client, version)} == named


def test_version_strings_as_they_are_spelled() -> None:
    assert release("v1.37.2") == (1, 37, 2)
    assert release("3.9.2-ccs") == (3, 9, 2)
    assert release(" 2.12.1 ") == (2, 12, 1)
    assert release("1.14") == (1, 14, 0)
    assert release("v0.0.0-20230101000000-abcdef123456") == (0, 0, 0)  # a Go pseudo-version
    for not_one in ("", "v", "latest", "1", "(devel)", "1.2.3 extra", "x1.2.3", "1." * 40):
        assert release(not_one) is None, not_one


@given(st.text(max_size=2 * MAX_VERSION_CHARS), st.sampled_from([*CLIENTS, "other"]))
def test_any_text_is_a_release_or_none_and_names_hangs_only_when_a_release(
    text: str, client: str
) -> None:
    found = release(text)
    assert found is None or (len(found) == 3 and all(0 <= n < 10**6 for n in found))
    named = releases_of(client, text)
    assert not named or found is not None
    assert all(h.client == client for h in named)


def test_the_sidecars_reference_shows_every_row_as_it_is() -> None:
    doc = (Path(__file__).resolve().parents[2] / "docs" / "sidecar.md").read_text()
    for h in KNOWN_HANGS:
        row = (
            f"| `{h.id}` | {h.client} | {h.affected} | {h.fixed_in} | [report]({h.report}) "
            f"| {h.what} | {h.replayed} |"
        )
        assert row in doc, row
