"""The site's two generated references and the generated blocks of other pages are current
and complete.

Covers: docs/reference/chart-values.md (helm-docs from charts/hangwatch/values.yaml) and
docs/reference/crd.md (scripts/generate_references.py from crds/producerhealthpolicy.yaml)
are exactly what `python3 scripts/generate_references.py` produces now, so an edit of
values.yaml or the CRD without regenerating fails with the command to run; so are the
generated blocks (the sidecar's rule table in docs/sidecar.md and in the docstring of
`hangwatch_sidecar.rules`, the verdict table of docs/contracts.md), and a page that lost
a block's BEGIN or END line is refused naming the block; every key of
values.yaml has a row, or an ancestor with one (a key without a `# --` comment has
neither); every field of the CRD's schema is in its object's table with its default and
bounds, and every CEL rule's message is on the page; text that the site would take for
an HTML tag stops the generator.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import yaml

from hangwatch_testing import scripts

ROOT = Path(__file__).resolve().parents[2]
CHART_VALUES = ROOT / "docs" / "reference" / "chart-values.md"
CRD_REFERENCE = ROOT / "docs" / "reference" / "crd.md"


def _generator() -> ModuleType:
    return scripts.load("generate_references")


def test_the_committed_references_are_the_generated_ones() -> None:
    generator = _generator()
    stale = generator.stale()
    assert stale == [], (
        f"{', '.join(stale)} differ from their sources: run {generator.COMMAND} "
        "(helm-docs comes from scripts/helm-docs/install.sh, which scripts/setup.sh runs)"
    )


def test_the_generated_blocks_are_current() -> None:
    generator = _generator()
    stale = generator.stale_blocks()
    assert stale == [], f"{', '.join(stale)}: run {generator.COMMAND}"


def test_a_page_without_a_blocks_lines_is_refused() -> None:
    generator = _generator()
    text = "<!-- BEGIN rules: generated -->\nold\n<!-- END rules -->\n"
    assert generator.spliced(text, "rules", "new\n") == text.replace("old", "new")
    for broken in (text.replace("<!-- END rules -->", ""), text.replace("BEGIN", "BEGUN")):
        with pytest.raises(generator.GenerationError, match="no block 'rules'"):
            generator.spliced(broken, "rules", "new\n")


def _leaves(node: Any, path: str = "") -> Iterator[str]:
    if isinstance(node, dict) and node:
        for key, value in node.items():
            yield from _leaves(value, f"{path}.{key}" if path else str(key))
    else:
        yield path


def test_every_value_has_a_row_or_a_documented_ancestor() -> None:
    rows = set(re.findall(r"^\| `([^`]+)` \|", CHART_VALUES.read_text(), re.M))
    values = yaml.safe_load((ROOT / "charts" / "hangwatch" / "values.yaml").read_text())
    for leaf in _leaves(values):
        parts = leaf.split(".")
        ancestors = {".".join(parts[:n]) for n in range(1, len(parts) + 1)}
        assert rows & ancestors, (
            f"values.yaml's {leaf} is in no row of {CHART_VALUES.relative_to(ROOT)}: "
            "give it (or its parent) a `# --` comment, then regenerate: "
            "python3 scripts/generate_references.py"
        )


def _fields(path: str, schema: dict[str, Any]) -> Iterator[tuple[str, str, dict[str, Any]]]:
    """(section heading, field name, field schema) of every field below `path`."""
    for name, field in schema.get("properties", {}).items():
        yield path, name, field
        element = field
        while element.get("type") == "array" or isinstance(
            element.get("additionalProperties"), dict
        ):
            element = element.get("items") or element["additionalProperties"]
        suffix = "[]" if field.get("type") == "array" else ""
        yield from _fields(f"{path}.{name}{suffix}", element)


def _tables() -> dict[str, dict[str, str]]:
    """Section heading -> field name -> its table row, from the generated page."""
    tables: dict[str, dict[str, str]] = {}
    section = ""
    for line in CRD_REFERENCE.read_text().splitlines():
        if heading := re.match(r"^## `([^`]+)`$", line):
            section = heading.group(1)
            tables[section] = {}
        elif (field := re.match(r"^\| \[?`([^`]+)`", line)) and section:
            tables[section][field.group(1)] = line
    return tables


def test_every_crd_field_is_in_its_table_with_its_default_and_bounds() -> None:
    crd = yaml.safe_load((ROOT / "crds" / "producerhealthpolicy.yaml").read_text())
    tables = _tables()
    for version in crd["spec"]["versions"]:
        schema = version["schema"]["openAPIV3Schema"]["properties"]
        for top in ("spec", "status"):
            for section, name, field in _fields(top, schema[top]):
                row = tables.get(section, {}).get(name)
                assert row is not None, f"{section}.{name} is not in docs/reference/crd.md"
                if "default" in field:
                    assert f"`{_generator()._flow(field['default'])}`" in row, row
                for bound in ("minimum", "maximum", "maxLength", "maxItems"):
                    if bound in field:
                        assert f" {field[bound]}" in row, f"{section}.{name}: no {bound} in {row}"


def test_every_validation_rule_message_is_on_the_page() -> None:
    text = CRD_REFERENCE.read_text()
    crd_text = (ROOT / "crds" / "producerhealthpolicy.yaml").read_text()
    messages = [
        " ".join(rule["message"].split())
        for rule in _rules(yaml.safe_load(crd_text))
        if "message" in rule
    ]
    assert len(messages) >= 8  # the rules the CRD has today, at least
    for message in messages:
        assert message in text, f"CEL rule message missing from docs/reference/crd.md: {message}"


def _rules(node: Any) -> Iterator[dict[str, Any]]:
    if isinstance(node, dict):
        yield from node.get("x-kubernetes-validations", [])
        for value in node.values():
            yield from _rules(value)
    elif isinstance(node, list):
        for value in node:
            yield from _rules(value)


@pytest.mark.parametrize(
    ("line", "unsafe"),
    [
        ('Replaces the whole "<release>-<chart>" prefix', True),
        ("Replaces the whole `<release>-<chart>` prefix", False),
        ("cpu < 2 cores", False),
        ("<!-- Generated by helm-docs -->", False),
    ],
)
def test_text_the_site_would_take_for_html_stops_the_generator(line: str, unsafe: bool) -> None:
    generator = _generator()
    if unsafe:
        with pytest.raises(generator.GenerationError, match="put it in backticks"):
            generator._no_raw_html(line, "values.yaml")
    else:
        generator._no_raw_html(line, "values.yaml")
