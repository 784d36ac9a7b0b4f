"""The commands of the README's "Run it on a cluster" section, as the tier runs them.

`cluster_commands` returns each command of that section's bash block
(backslash continuations joined, `&` and pipes kept as words) split like a shell does;
`helm_install` reads the `helm install` command into release, chart, namespace and the
values its `--set` flags give, which the session's `release` fixture installs.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from typing import Any

from hangwatch_testing.kube.cluster import ROOT

SECTION = "## Run it on a cluster"


def cluster_commands() -> list[list[str]]:
    text = (ROOT / "README.md").read_text()
    start = text.index(SECTION)
    block = re.search(r"```bash\n(.*?)```", text[start:], re.S)
    assert block is not None, f"no bash block under {SECTION!r}"
    joined = block.group(1).replace("\\\n", " ")
    return [shlex.split(line) for line in joined.splitlines() if line.strip()]


@dataclass(frozen=True)
class HelmInstall:
    release: str
    chart: str
    namespace: str
    create_namespace: bool
    values: dict[str, Any]


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
    `--reuse-values` on an upgrade (the flags the README uses, nothing else)."""
    release, chart, *rest = command[2:]
    namespace, flag = "default", False
    values: dict[str, Any] = {}
    words = iter(rest)
    for word in words:
        if word in {"--namespace", "-n"}:
            namespace = next(words)
        elif word in {"--create-namespace", "--reuse-values"}:
            flag = True
        elif word == "--set":
            key, _, value = next(words).partition("=")
            _set(values, key, _typed(value))
        else:
            raise AssertionError(f"the tier does not know helm's {word!r}")
    return HelmInstall(release, chart, namespace, flag, values)


def _typed(value: str) -> Any:
    """--set's own typing of the values the README uses: true/false are booleans."""
    return {"true": True, "false": False}.get(value, value)
