"""Every test has one tier, and the tiers are the markers pytest knows.

Covers: `tests/conftest.py`'s `TIERS` names only tiers of `TIER_NAMES`, which are exactly
the tier markers pyproject.toml registers (so `pytest -m TIER` under `--strict-markers`
selects them); the most specific entry wins, a module not listed is `unit` unless it uses
a lab fixture; a folder's or module's xdist group (`GROUPS`) takes only its tests above
the unit tier.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

from tests.conftest import TIER_NAMES, TIERS, group_of, tier_of

ROOT = Path(__file__).parent.parent


def test_the_tiers_are_the_registered_markers() -> None:
    markers = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"][
        "markers"
    ]
    registered = {m.split(":", 1)[0] for m in markers} - {"xdist_group(name)"}
    assert registered == set(TIER_NAMES)
    assert set(TIERS.values()) <= set(TIER_NAMES)
    for path in TIERS:
        assert (ROOT / "tests" / path).exists(), f"TIERS names {path}, which is gone"


def test_the_most_specific_entry_wins_and_lab_fixtures_make_a_lab_test() -> None:
    assert tier_of("probe/test_bad_input.py", []) == "unit"
    assert tier_of("probe/test_json_document.py", []) == "lab"
    assert (
        tier_of("node/test_spark_submit/test_a_wedged_executor_is_replaced.py", ["lab"]) == "node"
    )
    assert tier_of("operator/test_decisions.py", []) == "unit"
    assert tier_of("operator/test_decisions.py", ["kernel_faults"]) == "lab"


def test_a_folders_group_takes_its_heavy_tests_and_leaves_its_unit_tests_apart() -> None:
    assert group_of("demo/test_demo_silence_controls.py", "test_x", "spark") == "demo"
    assert group_of("pipeline_spark/test_connector_sink.py", "test_x", "spark") == "spark"
    assert group_of("demo/test_demo_parts.py", "test_x", "unit") == "demo/test_demo_parts.py"
    assert tier_of("pipeline_spark/test_transforms_and_reports.py", []) == "unit"
    assert tier_of("pipeline_spark/test_connector_sink.py", ["lab"]) == "spark"
    soak = "test_healthy_producer_under_load_through_the_soak_is_only_healthy"
    assert group_of("sidecar/test_seed_scenarios_on_the_lab.py", soak, "lab") == "soak"
    assert group_of("sidecar/test_seed_scenarios_on_the_lab.py", "test_y", "lab") == (
        "sidecar/test_seed_scenarios_on_the_lab.py"
    )
