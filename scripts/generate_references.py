"""Generates the site's two reference pages from their sources, so neither can drift.

- docs/reference/chart-values.md from charts/hangwatch/values.yaml, by helm-docs (the
  upstream tool, installed by scripts/helm-docs/install.sh) with the template
  scripts/helm-docs/chart-values.md.gotmpl: every key with its type, default and its
  `# --` comment.
- docs/reference/crd.md from crds/producerhealthpolicy.yaml: every field of the
  openAPIV3Schema with its type, default, bounds and description, and the messages of
  the CEL validation rules. Rendered here: the upstream generators that read CRD YAML
  (crdoc) leave the CEL rules (x-kubernetes-validations) out.

Both pages are committed; tests/docs/test_generated_references.py fails when either
differs from what this script produces now. After editing values.yaml or the CRD, run

    python3 scripts/generate_references.py          # rewrite both pages
    python3 scripts/generate_references.py --check  # exit 1 naming each stale page
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
CHART_VALUES = ROOT / "docs" / "reference" / "chart-values.md"
CRD_REFERENCE = ROOT / "docs" / "reference" / "crd.md"
CRD = ROOT / "crds" / "producerhealthpolicy.yaml"
HELM_DOCS = ROOT / "scripts" / "helm-docs"
REPOSITORY = "https://github.com/hangwatch/hangwatch/blob/main"
COMMAND = "python3 scripts/generate_references.py"
_HTML_TAG = re.compile(r"<[A-Za-z/][^>]*>")
_CODE_SPAN = re.compile(r"`[^`]*`")


class GenerationError(Exception):
    """A page cannot be generated (a missing tool, a failed run, unsafe text)."""


def chart_values() -> str:
    """docs/reference/chart-values.md as helm-docs renders it now."""
    installed = subprocess.run(
        ["bash", str(HELM_DOCS / "install.sh")], capture_output=True, text=True, check=False
    )
    if installed.returncode != 0:
        raise GenerationError(installed.stderr.strip() or "scripts/helm-docs/install.sh failed")
    binary = installed.stdout.strip().splitlines()[-1]
    rendered = subprocess.run(
        [
            binary,
            "--dry-run",
            "--log-level=error",
            "--chart-search-root=charts",
            "--chart-to-generate=charts/hangwatch",
            "--sort-values-order=file",
            f"--template-files={HELM_DOCS / 'chart-values.md.gotmpl'}",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    if rendered.returncode != 0 or not rendered.stdout.startswith("# Chart values"):
        raise GenerationError(f"helm-docs failed: {rendered.stderr.strip() or rendered.stdout}")
    text = rendered.stdout.rstrip("\n") + "\n"
    _no_raw_html(text, "charts/hangwatch/values.yaml")
    return text


def _no_raw_html(text: str, source: str) -> None:
    """Fail on `<word>` outside code spans: the site would take it for an HTML tag."""
    for line in text.splitlines():
        if line.startswith("<!--"):
            continue
        if tag := _HTML_TAG.search(_CODE_SPAN.sub("", line)):
            raise GenerationError(
                f"{source}: {tag.group(0)!r} would vanish as an HTML tag on the site; "
                f"put it in backticks: {line[:120]}"
            )


def slug(heading: str) -> str:
    """The id the site (pymdownx.slugs.slugify, case=lower: GitHub's) gives a heading."""
    text = re.sub(r"</?[^>]*>", "", heading.replace("`", "")).strip().lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def _cell(text: str) -> str:
    """One table cell: one line, pipes escaped, `<` outside code spans as an entity."""
    parts = re.split(r"(`[^`]*`)", " ".join(text.split()))
    return "".join(p if p.startswith("`") else p.replace("<", "&lt;") for p in parts).replace(
        "|", "\\|"
    )


def _flow(value: Any) -> str:
    """A default as one line of YAML (`[executor]`, `{cpu: 50m}`, `0.5`)."""
    dumped = yaml.safe_dump(value, default_flow_style=True, width=1000).strip()
    return dumped.removesuffix("\n...").removesuffix("...").strip()


def _type(schema: dict[str, Any]) -> str:
    if schema.get("x-kubernetes-int-or-string"):
        return "int or string"
    kind = str(schema.get("type", "any"))
    if kind == "array":
        return "[]" + _type(schema.get("items", {}))
    if kind == "object" and isinstance(schema.get("additionalProperties"), dict):
        return "map[string]" + _type(schema["additionalProperties"])
    return kind


def _bounds(schema: dict[str, Any], patterns: list[str], name: str) -> list[str]:
    """The schema's constraints in words; long or piped patterns go to `patterns`."""
    out: list[str] = []
    low, high = schema.get("minimum"), schema.get("maximum")
    if low is not None:
        out.append(f"{'>' if schema.get('exclusiveMinimum') else '≥'} {low}")
    if high is not None:
        out.append(f"{'<' if schema.get('exclusiveMaximum') else '≤'} {high}")
    for key, words in (
        ("minLength", "length ≥"),
        ("maxLength", "length ≤"),
        ("minItems", "items ≥"),
        ("maxItems", "items ≤"),
        ("maxProperties", "entries ≤"),
    ):
        if key in schema:
            out.append(f"{words} {schema[key]}")
    if "enum" in schema:
        out.append("one of " + ", ".join(f"`{v}`" for v in schema["enum"]))
    if "format" in schema:
        out.append(f"format `{schema['format']}`")
    if "pattern" in schema:
        pattern = str(schema["pattern"])
        if "|" in pattern or len(pattern) > 60:
            patterns.append(f"- `{name}`: `{pattern}`")
            out.append("pattern (below)")
        else:
            out.append(f"pattern `{pattern}`")
    list_type = schema.get("x-kubernetes-list-type")
    if list_type == "set":
        out.append("a set")
    elif list_type == "map":
        keys = ", ".join(schema.get("x-kubernetes-list-map-keys", []))
        out.append(f"a map keyed by {keys}")
    if schema.get("x-kubernetes-map-type") == "atomic":
        out.append("replaced as a whole")
    return out


def _element(schema: dict[str, Any]) -> dict[str, Any]:
    """The object schema a field leads to (through arrays and maps), if any."""
    while True:
        if schema.get("type") == "array":
            schema = schema.get("items", {})
        elif isinstance(schema.get("additionalProperties"), dict):
            schema = schema["additionalProperties"]
        else:
            return schema


def _sections(path: str, schema: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    """(path, object schema) for `schema` and every object below it, depth first."""
    yield path, schema
    for name, field in schema.get("properties", {}).items():
        element = _element(field)
        if element.get("properties"):
            suffix = "[]" if field.get("type") == "array" else ""
            yield from _sections(f"{path}.{name}{suffix}", element)


def _section(path: str, schema: dict[str, Any], children: set[str]) -> list[str]:
    lines = [f"## `{path}`", ""]
    if description := schema.get("description"):
        lines += [_cell(str(description)), ""]
    required = set(schema.get("required", []))
    rows = [
        "| Field | Type | Default | Constraints | Description |",
        "| --- | --- | --- | --- | --- |",
    ]
    patterns: list[str] = []
    for name, field in schema["properties"].items():
        child = f"{path}.{name}" + ("[]" if field.get("type") == "array" else "")
        label = f"[`{name}`](#{slug(child)})" if child in children else f"`{name}`"
        if name in required:
            label += " (required)"
        constraints = _bounds(field, patterns, name)
        if field.get("type") == "array" and not _element(field).get("properties"):
            item = [f"items: {b}" for b in _bounds(field.get("items", {}), patterns, f"{name}[]")]
            constraints += item
        if isinstance(field.get("additionalProperties"), dict):
            value = field["additionalProperties"]
            constraints += [f"values: {b}" for b in _bounds(value, patterns, f"{name}{{}}")]
        default = f"`{_flow(field['default'])}`" if "default" in field else ""
        rows.append(
            f"| {label} | {_type(field)} | {default} | {_cell('; '.join(constraints))} "
            f"| {_cell(str(field.get('description', '')))} |"
        )
    lines += rows
    if patterns:
        lines += ["", "Patterns:", "", *patterns]
    rules = schema.get("x-kubernetes-validations", [])
    if rules:
        lines += ["", "Validation rules (CEL; the API server rejects an object breaking one):", ""]
        for rule in rules:
            lines += [f"- {_cell(str(rule['message']))}", f"  `{rule['rule']}`"]
    return [*lines, ""]


def crd_reference() -> str:
    """docs/reference/crd.md as rendered from the CRD now."""
    crd = yaml.safe_load(CRD.read_text())
    spec = crd["spec"]
    names = spec["names"]
    out = [
        f"# {names['kind']} CRD",
        "",
        "<!-- Generated by scripts/generate_references.py from crds/producerhealthpolicy.yaml: "
        f"do not edit; run `{COMMAND}`. -->",
        "",
    ]
    for version in spec["versions"]:
        schema = version["schema"]["openAPIV3Schema"]
        out += [
            f"`{spec['group']}/{version['name']}`, kind `{names['kind']}`"
            f" ({spec['scope'].lower()}; plural `{names['plural']}`, short names "
            + ", ".join(f"`{n}`" for n in names.get("shortNames", []))
            + f"), from [crds/producerhealthpolicy.yaml]({REPOSITORY}/{CRD.relative_to(ROOT)})"
            " (install and upgrade it as [Upgrading](../upgrade.md) says). "
            + _cell(str(schema.get("description", ""))),
            "",
            "Columns of `kubectl get producerhealthpolicies` (`-o wide` adds those of priority 1):",
            "",
            "| Column | Type | From | Description |",
            "| --- | --- | --- | --- |",
        ]
        for column in version.get("additionalPrinterColumns", []):
            wide = " (wide)" if column.get("priority", 0) else ""
            out.append(
                f"| {column['name']}{wide} | {column['type']} | `{column['jsonPath']}` "
                f"| {_cell(str(column.get('description', '')))} |"
            )
        out.append("")
        sections = [
            s for top in ("spec", "status") for s in _sections(top, schema["properties"][top])
        ]
        children = {path for path, _ in sections}
        for path, section in sections:
            out += _section(path, section, children)
    text = "\n".join(out).rstrip("\n") + "\n"
    _no_raw_html(text, "crds/producerhealthpolicy.yaml")
    return text


PAGES = {CHART_VALUES: chart_values, CRD_REFERENCE: crd_reference}


def stale() -> list[str]:
    """The pages whose committed text differs from what the generators produce now."""
    return [
        str(page.relative_to(ROOT))
        for page, render in PAGES.items()
        if (page.read_text() if page.exists() else "") != render()
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else "")
    parser.add_argument("--check", action="store_true", help="exit 1 if a page is stale")
    args = parser.parse_args(argv)
    try:
        if args.check:
            if pages := stale():
                print(f"out of date: {', '.join(pages)}: run {COMMAND}", file=sys.stderr)
                return 1
            return 0
        for page, render in PAGES.items():
            page.parent.mkdir(parents=True, exist_ok=True)
            page.write_text(render())
            print(f"wrote {page.relative_to(ROOT)}")
    except GenerationError as error:
        print(f"generate_references: {error}", file=sys.stderr)
        return 3
    return 0


if __name__ == "__main__":
    sys.exit(main())
