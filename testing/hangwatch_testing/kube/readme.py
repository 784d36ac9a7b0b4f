"""The commands of docs/development.md's "Run a checkout on a cluster" section (a chart
and image built from this checkout), and of any Markdown block, as the tiers run them.

`cluster_commands` returns each command of that section's bash block (`block_commands`
does the same for any page and heading: the README's install and uninstall blocks)
(backslash continuations joined, `&` and pipes kept as words) split like a shell does;
`helm_install` reads the `helm install` command into release, chart, namespace and the
values its `--set` flags give, which the session's `release` fixture installs.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hangwatch_testing.kube.cluster import ROOT

PAGE = ROOT / "docs" / "development.md"
SECTION = "## Run a checkout on a cluster"


def cluster_commands() -> list[list[str]]:
    return block_commands(PAGE, SECTION)


def block_commands(page: Path, heading: str) -> list[list[str]]:
    """Each command of the first bash block under `heading` in `page` (a Markdown file),
    split as a shell does: continuation lines joined, `# comments` dropped."""
    text = page.read_text()
    start = text.index(heading)
    block = re.search(r"```bash\n(.*?)```", text[start:], re.S)
    assert block is not None, f"no bash block under {heading!r} in {page.name}"
    joined = block.group(1).replace("\\\n", " ")
    split = (shlex.split(line, comments=True) for line in joined.splitlines())
    return [words for words in split if words]


@dataclass(frozen=True)
class HelmInstall:
    release: str
    chart: str
    namespace: str
    create_namespace: bool
    values: dict[str, Any]
    version: str = ""
    """`--version` (a published chart's)."""


def _set(values: dict[str, Any], dotted: str, value: str) -> None:
    *parents, leaf = dotted.split(".")
    node = values
    for key in parents:
        node = node.setdefault(key, {})
    node[leaf] = value


def helm_install() -> HelmInstall:
    (command,) = [c for c in cluster_commands() if c[:2] == ["helm", "install"]]
    return parse_helm(command)


def parse_helm(command: list[str]) -> HelmInstall:
    """`helm install|upgrade RELEASE CHART [flags]`; `create_namespace` is also set by
    `--reuse-values` on an upgrade (the flags the README uses, nothing else: `--namespace`,
    `--create-namespace`, `--set`, `--version`)."""
    release, chart, *rest = command[2:]
    namespace, flag, version = "default", False, ""
    values: dict[str, Any] = {}
    words = iter(rest)
    for word in words:
        if word in {"--namespace", "-n"}:
            namespace = next(words)
        elif word in {"--create-namespace", "--reuse-values"}:
            flag = True
        elif word == "--version":
            version = next(words)
        elif word == "--set":
            key, _, value = next(words).partition("=")
            _set(values, key, _typed(value))
        else:
            raise AssertionError(f"the tier does not know helm's {word!r}")
    return HelmInstall(release, chart, namespace, flag, values, version)


def _typed(value: str) -> Any:
    """--set's own typing of the values the README uses: true/false are booleans."""
    return {"true": True, "false": False}.get(value, value)
