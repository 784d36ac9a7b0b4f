"""A missing or unbuildable cluster is one line naming the step and what to do.

Covers: with an empty cache, `Binaries.find` (what the tier's session fixture calls;
the node tier's `Components.find` goes through the same function) raises one line
saying to run `make kube` (`make kube-floor` for the floor release); the build script's
`--check` (and `--floor --check`) exits 1 in one line; a build on
a machine without runc or the CNI plugins stops at the `prerequisites` step in one line
naming the packages (exit 3); an unknown option is a usage error (exit 3). No build runs.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from hangwatch_testing.kube.cluster import BUILD_SCRIPT, Binaries, ClusterUnavailableError

pytestmark = pytest.mark.xdist_group("kube")


def _script(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", str(BUILD_SCRIPT), *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )


@pytest.mark.parametrize(("floor", "target"), [(False, "`make kube`"), (True, "`make kube-floor`")])
def test_an_empty_cache_fails_the_tier_in_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, floor: bool, target: str
) -> None:
    monkeypatch.setenv("HANGWATCH_KUBE_HOME", str(tmp_path))
    with pytest.raises(ClusterUnavailableError) as raised:
        Binaries.find(floor=floor)
    message = str(raised.value)
    assert "\n" not in message
    assert target in message and "not built" in message


@pytest.mark.parametrize("release", [(), ("--floor",)])
def test_check_says_not_built_in_one_line(tmp_path: Path, release: tuple[str, ...]) -> None:
    env = {**os.environ, "HANGWATCH_KUBE_HOME": str(tmp_path)}
    done = _script(*release, "--check", env=env)
    assert done.returncode == 1
    assert done.stderr.count("\n") == 1 and "not built" in done.stderr


def test_a_build_without_runc_names_the_step_and_the_packages(tmp_path: Path) -> None:
    tools = tmp_path / "bin"
    tools.mkdir()
    for name in ("bash", "dirname", "awk", "sort", "tail", "head", "cat", "mkdir", "flock", "cut"):
        found = shutil.which(name)
        assert found, name
        (tools / name).symlink_to(found)
    env = {"PATH": str(tools), "HOME": str(tmp_path), "HANGWATCH_KUBE_HOME": str(tmp_path / "c")}
    done = _script(env=env)
    assert done.returncode == 3, done.stderr
    last = done.stderr.strip().splitlines()[-1]
    assert last == (
        "build-kube: step 'prerequisites': runc or the CNI plugins are missing: "
        "apt-get install runc containernetworking-plugins (scripts/setup.sh does)"
    ), done.stderr


def test_an_unknown_option_is_a_usage_error(tmp_path: Path) -> None:
    done = _script("--frobnicate", env={**os.environ, "HANGWATCH_KUBE_HOME": str(tmp_path)})
    assert done.returncode == 3 and done.stderr.startswith("build-kube: usage:")
