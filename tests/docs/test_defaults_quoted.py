"""The detection defaults the docs quote are the ones `core/hangwatch/defaults.py` holds.

Two defaults exist on purpose: a sidecar run alone (`STANDALONE`, docs/sidecar.md's
settings table, e.g. a 60 s time-to-error budget) and a policy's field left out
(`POLICY`, docs/operator-injection.md's detection table, 120 s). Covers: every field of
`DetectionDefaults` is quoted in both tables, each with its own default, so neither page
can drift from the code or be mistaken for the other's.
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest

from hangwatch.defaults import POLICY, STANDALONE, DetectionDefaults

DOCS = Path(__file__).resolve().parents[2] / "docs"
FIELDS = [f.name for f in dataclasses.fields(DetectionDefaults)]


def _row(page: str, key: str) -> list[str]:
    text = (DOCS / page).read_text()
    found = re.search(rf"^\| `{re.escape(key)}` \|(.*)$", text, re.M)
    assert found, f"docs/{page} has no row for `{key}`"
    return [cell.strip() for cell in found.group(1).split("|")]


@pytest.mark.parametrize("name", FIELDS)
def test_the_sidecars_table_quotes_the_standalone_default(name: str) -> None:
    cells = _row("sidecar.md", f"--{name.replace('_', '-')}")
    assert cells[1] == f"`{float(getattr(STANDALONE, name))}`"


@pytest.mark.parametrize("name", FIELDS)
def test_the_policys_table_quotes_the_policy_default(name: str) -> None:
    first, *rest = name.split("_")
    cells = _row("operator-injection.md", first + "".join(w.title() for w in rest))
    assert cells[0] == str(getattr(POLICY, name))
