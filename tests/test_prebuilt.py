"""`python -m hangwatch_testing.prebuilt`, which setup runs ahead of the tests.

Covers the command's edges only (the builds are the tiers' own fixtures' functions,
covered by those tiers): an unknown or missing name is the usage line, exit 3; a build
that fails the way a fixture's helper fails is one line naming the build, exit 1.
"""

from __future__ import annotations

import pytest

from hangwatch_testing import prebuilt


@pytest.mark.parametrize("argv", [[], ["everything"], ["base", "python39"]])
def test_anything_but_one_known_build_is_the_usage_line(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert prebuilt.main(argv) == 3
    err = capsys.readouterr().err
    names = "base|spark-images|spark-stock|hangwatch-image|python39"
    assert err == f"usage: python -m hangwatch_testing.prebuilt {names}\n"


def test_a_failed_build_is_one_line_naming_it(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def broken() -> None:
        pytest.fail("debootstrap --variant=minbase ... exited 1", pytrace=False)

    monkeypatch.setitem(prebuilt.BUILDS, "base", broken)
    assert prebuilt.main(["base"]) == 1
    assert capsys.readouterr().err == (
        "prebuilt: building base failed: debootstrap --variant=minbase ... exited 1\n"
    )
