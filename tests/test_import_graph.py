"""No import circles across hangwatch's packages (grimp, the graph import-linter reads).

The graph is every import of every module of the packages pyproject.toml's
`[tool.importlinter]` names (function-level and TYPE_CHECKING imports included); a
circle fails naming its modules. The control adds one import to a copy of the graph and
finds the circle it closes.
"""

from __future__ import annotations

import graphlib
import tomllib
from pathlib import Path

import grimp

ROOT = Path(__file__).resolve().parents[1]


def _packages() -> list[str]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    packages: list[str] = config["tool"]["importlinter"]["root_packages"]
    return packages


def _cycle(graph: grimp.ImportGraph) -> list[str]:
    """One circle of the graph's modules (importer first), or [] when there is none. A
    module importing itself is no circle (job.py, run as a script, imports its installed
    self so that Spark's tasks unpickle its functions by reference)."""
    order = graphlib.TopologicalSorter(
        {m: graph.find_modules_directly_imported_by(m) - {m} for m in graph.modules}
    )
    try:
        order.prepare()
    except graphlib.CycleError as exc:
        return list(exc.args[1])
    return []


def test_the_packages_have_no_import_circle() -> None:
    graph = grimp.build_graph(*_packages())
    assert len(graph.modules) > 100, sorted(graph.modules)
    cycle = _cycle(graph)
    assert not cycle, "import circle: " + " -> ".join(reversed(cycle))


def test_an_import_closing_a_circle_is_found() -> None:
    graph = grimp.build_graph("hangwatch_lab")
    graph.add_import(importer="hangwatch_lab.lab", imported="hangwatch_lab.mocklab")
    assert {"hangwatch_lab.lab", "hangwatch_lab.mocklab"} <= set(_cycle(graph))
