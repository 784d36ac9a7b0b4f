"""A library's private module imported by hangwatch is bounded above in pyproject.toml.

A private module (`kopf._cogs...`) may move in any release; an open-ended requirement
would let a user's pip install a release where the operator fails to import. So every
`from <dist>._<private>` import in hangwatch's own packages has a requirement with an
upper bound (`<`) for that distribution, and the installed release satisfies it.
"""

from __future__ import annotations

import ast
import tomllib
from importlib.metadata import version
from pathlib import Path

from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("core", "lab", "sidecar", "pipeline", "operator", "demo", "producer")


def _private_imports() -> dict[str, set[str]]:
    """Top-level distribution name -> the modules of it imported from a private path."""
    found: dict[str, set[str]] = {}
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                    top, _, rest = node.module.partition(".")
                    if rest.startswith("_") and not top.startswith("hangwatch"):
                        found.setdefault(top, set()).add(node.module)
    return found


def _requirements() -> dict[str, Requirement]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    texts = [*project["dependencies"]]
    for extra in project["optional-dependencies"].values():
        texts.extend(extra)
    return {Requirement(t).name.lower(): Requirement(t) for t in texts}


def test_every_private_import_has_a_bounded_requirement() -> None:
    private = _private_imports()
    assert "kopf" in private, "the known one (policy_watch) is found"
    requirements = _requirements()
    for dist, modules in private.items():
        requirement = requirements.get(dist)
        assert requirement is not None, f"{sorted(modules)} imported, {dist} not required"
        assert any(s.operator in {"<", "<="} for s in requirement.specifier), (
            f"{requirement} has no upper bound although {sorted(modules)} are private"
        )
        assert requirement.specifier.contains(version(dist)), (dist, version(dist))
