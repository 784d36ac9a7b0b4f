"""One version number, pyproject.toml's, feeds every artifact; a copy that disagrees fails.

Covers scripts/release.py's `VERSION_PLACES`: every place of the repository that spells
the version (the producer's `__version__`, hangwatch's pin of it, the chart's version and
appVersion, the CRD's label in both copies, the operator's default sidecar image) says
pyproject.toml's; a copy changed in a scratch tree is named by the error `make release`
stops with (exit 3); `make`'s VERSION is read from the same line; the chart packaged by
Helm carries the version; the release workflow's tag pattern admits `v<version>` only;
the release notes are that version's CHANGELOG.md section.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from hangwatch_testing import scripts

release = scripts.load("release")
ROOT = Path(__file__).resolve().parents[2]


def test_every_place_says_the_projects_version() -> None:
    version = release.project_version()
    assert release.versions() == {place: version for place in release.VERSION_PLACES}
    assert release.agreed_version() == version


@pytest.mark.parametrize(
    ("path", "old", "new", "named"),
    [
        (
            "charts/hangwatch/Chart.yaml",
            "appVersion: ",
            "appVersion: 9.9 #",
            "Chart.yaml appVersion",
        ),
        (
            "producer/hangwatch_producer/version.py",
            '__version__ = "',
            '__version__ = "9.',
            "version",
        ),
        ("pyproject.toml", '"hangwatch-producer==', '"hangwatch-producer==9.', "producer pin"),
        ("crds/producerhealthpolicy.yaml", 'version: "', 'version: "9.', "crds/producerhealth"),
        ("operator/hangwatch_operator/settings.py", "hangwatch:", "hangwatch:9.", "sidecar image"),
        ("examples/spark-on-kubernetes/Dockerfile", "producer==", "producer==9.", "Dockerfile"),
    ],
)
def test_a_copy_that_disagrees_stops_the_release(
    tmp_path: Path, path: str, old: str, new: str, named: str
) -> None:
    for place in (
        "pyproject.toml",
        "core/hangwatch/__init__.py",
        "producer/hangwatch_producer/version.py",
        "charts/hangwatch/Chart.yaml",
        "crds/producerhealthpolicy.yaml",
        "charts/hangwatch/crds/producerhealthpolicy.yaml",
        "operator/hangwatch_operator/settings.py",
        "examples/spark-on-kubernetes/Dockerfile",
    ):
        (tmp_path / place).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(ROOT / place, tmp_path / place)
    assert release.agreed_version(tmp_path) == release.project_version()
    target = tmp_path / path
    text = target.read_text()
    assert old in text
    target.write_text(text.replace(old, new, 1))
    with pytest.raises(release.ReleaseError) as raised:
        release.agreed_version(tmp_path)
    assert raised.value.code == 3
    assert named in str(raised.value)
    assert "\n" not in str(raised.value)


def test_make_reads_the_same_line() -> None:
    out = subprocess.run(
        ["make", "-s", "-C", str(ROOT), "--eval", "v: ; @echo $(VERSION)", "v"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert out == release.project_version()


def test_the_packaged_chart_carries_the_version(tmp_path: Path) -> None:
    import helm_python

    version = release.project_version()
    archive = Path(
        helm_python.package(
            release.CHART, destination=tmp_path, version=version, app_version=version
        )
    )
    assert archive.name == release.Artifacts(version).chart
    chart = helm_python.Chart.load(archive)
    assert (chart.metadata["version"], chart.metadata["appVersion"]) == (version, version)


def test_the_workflow_releases_tags_of_the_version_only() -> None:
    workflow = yaml.safe_load((ROOT / ".github/workflows/release.yml").read_text())
    (pattern,) = workflow[True]["push"]["tags"]  # YAML 1.1 reads `on` as true
    glob = re.compile("^" + pattern.replace(".", r"\.").replace("[0-9]+", "[0-9]+") + "$")
    assert glob.match(f"v{release.project_version()}")
    assert not glob.match(release.project_version())
    steps = workflow["jobs"]["release"]["steps"]
    runs = "\n".join(step.get("run", "") for step in steps)
    for command in ("make release", "make publish", "scripts/release.py notes"):
        assert command in runs


def test_the_release_notes_are_the_versions_changelog_section() -> None:
    changelog = (ROOT / "CHANGELOG.md").read_text()
    notes = release.release_notes(release.project_version(), changelog)
    assert notes.strip()
    assert not re.search(r"^## ", notes, re.M)
    assert notes.strip() in changelog
    with pytest.raises(release.ReleaseError):
        release.release_notes("0.0.0-never", changelog)
