"""The sidecar's code stays in pieces a reader can hold: no long functions.

Covers: no function or method in sidecar/hangwatch_sidecar is over 80 lines, and none in
the verdict engine's modules (the rule table and its walk, the round, the pod-level and
merged rules, the telemetry's rules and refusal naming, the hysteresis, the assessments)
is over 50 (issue 42: a rule is one short function, so a reader sees it whole).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SIDECAR = Path(__file__).resolve().parents[2] / "sidecar" / "hangwatch_sidecar"
ENGINE = (
    "rules.py",
    "round.py",
    "pod_rules.py",
    "merge.py",
    "hysteresis.py",
    "assessment.py",
    "telemetry/judge.py",
    "telemetry/refusals.py",
)
LONGEST = 80
LONGEST_IN_THE_ENGINE = 50


def _lengths(path: Path) -> dict[str, int]:
    """Each function of `path` (by line and name) -> its length in lines."""
    tree = ast.parse(path.read_text(), str(path))
    return {
        f"{path.relative_to(SIDECAR)}:{node.lineno} {node.name}": (node.end_lineno or 0)
        - node.lineno
        + 1
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
    }


def test_no_function_of_the_sidecar_is_over_80_lines() -> None:
    long = {
        name: n
        for path in sorted(SIDECAR.rglob("*.py"))
        for name, n in _lengths(path).items()
        if n > LONGEST
    }
    assert long == {}


@pytest.mark.parametrize("module", ENGINE)
def test_no_function_of_the_engine_is_over_50_lines(module: str) -> None:
    assert (SIDECAR / module).exists(), module
    long = {name: n for name, n in _lengths(SIDECAR / module).items() if n > LONGEST_IN_THE_ENGINE}
    assert long == {}
