"""A library's private module imported by hangwatch is bounded above in pyproject.toml.

A private module (`kopf._cogs...`) may move in any release; an open-ended requirement
would let a user's pip install a release where hangwatch fails to import. So every import
from a library module with a private part at any depth, in hangwatch's own packages, is
one of two kinds:

- names the library's public module above the private part also serves (confluent-kafka's
  `confluent_kafka.admin` serves `ClusterMetadata`, `AclBinding`...; hangwatch imports
  them from their defining `confluent_kafka.admin._metadata`... only because mypy --strict
  refuses names a module does not explicitly re-export): checked to be there;
- anything else: the library's requirement has an upper bound (`<`) and the installed
  release meets it.
"""

from __future__ import annotations

import ast
import importlib
import tomllib
from dataclasses import dataclass
from importlib.metadata import packages_distributions, version
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("core", "lab", "sidecar", "pipeline", "operator", "demo", "producer")


@dataclass(frozen=True)
class PrivateImport:
    """`from <module> import <names>`, where a part of `module` starts with `_`."""

    module: str
    names: tuple[str, ...]
    where: str

    @property
    def public_parent(self) -> str:
        """The module path above its first private part."""
        parts = self.module.split(".")
        first = next(i for i, part in enumerate(parts) if part.startswith("_"))
        return ".".join(parts[:first])

    def served_publicly(self) -> bool:
        parent = importlib.import_module(self.public_parent)
        return all(hasattr(parent, name) for name in self.names)


def _private_imports() -> list[PrivateImport]:
    found = []
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                if not (isinstance(node, ast.ImportFrom) and node.module and node.level == 0):
                    continue
                parts = node.module.split(".")
                if parts[0].startswith("hangwatch") or not any(
                    p.startswith("_") for p in parts[1:]
                ):
                    continue
                names = tuple(alias.name for alias in node.names)
                found.append(PrivateImport(node.module, names, str(path.relative_to(ROOT))))
    return found


def _requirements() -> dict[str, Requirement]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    texts = [*project["dependencies"]]
    for extra in project["optional-dependencies"].values():
        texts.extend(extra)
    return {canonicalize_name(Requirement(t).name): Requirement(t) for t in texts}


def test_every_private_import_is_served_publicly_or_bounded() -> None:
    imports = _private_imports()
    bounded = [i for i in imports if not i.served_publicly()]
    assert {i.module for i in imports} >= {"confluent_kafka.admin._metadata"}, imports
    assert "kopf" in {i.module.split(".")[0] for i in bounded}, bounded
    requirements = _requirements()
    distributions = packages_distributions()
    for imported in bounded:
        top = imported.module.split(".")[0]
        (dist,) = distributions[top]
        requirement = requirements.get(canonicalize_name(dist))
        assert requirement is not None, f"{imported}: {dist} is not required"
        assert any(s.operator in {"<", "<="} for s in requirement.specifier), (
            f"{requirement} has no upper bound although {imported} is private"
        )
        assert requirement.specifier.contains(version(dist)), (dist, version(dist))
