"""A CEL rule first compiled inside a property test does not fail that test.

`hangwatch_testing.structural.compiled` caches one compiled rule per process, and
`celpy.Environment()` sets the interpreter's recursion limit each time one is made; a
Hypothesis test that compiled a rule first in its worker (which test did depended on
the order xdist gave the worker) saw the limit changed during the test and failed on
Hypothesis's warning (`make test-fast` on a fresh machine). Rules that no other test
compiles, so the cache is cold here whatever ran before.
"""

from __future__ import annotations

import sys

from hypothesis import given
from hypothesis import strategies as st

from hangwatch_testing import structural


@given(st.integers(0, 6))
def test_a_rule_compiled_inside_a_property_test_keeps_the_recursion_limit(n: int) -> None:
    before = sys.getrecursionlimit()
    runner = structural.compiled(f"self.probe_cold_cache_{n} > {n}")
    assert runner is not None
    assert sys.getrecursionlimit() == before
