"""The documentation site builds strictly, and its strictness catches what it claims to.

Covers: `mkdocs build --strict` of mkdocs.yml (MkDocs, Material theme) succeeds into a
temporary directory, so a link to a missing page or anchor, a link leaving docs/, or a
docs page left out of `nav` fails `make test`; the same build on a copy with one of each
planted fails and names every one (the `validation` settings really make them errors);
every link to a repository file (the one base, mkdocs.yml's `repo_url` + `/blob/main/`)
from docs/, mkdocs.yml, README.md or values.yaml names a file that exists, and no other
form of link into the repository is used.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
CONFIG = ROOT / "mkdocs.yml"


def _repo_url() -> str:
    found = re.search(r"^repo_url: (\S+)$", CONFIG.read_text(), re.M)
    assert found is not None, "mkdocs.yml has no repo_url"
    return found.group(1)


REPO = _repo_url()
BLOB = REPO + "/blob/main/"
"""The one base of links to repository files that are not pages of the site."""


def _build(config: Path, site: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}  # mkdocs-material's banner, not a warning
    return subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(config), "-d", str(site)],
        capture_output=True,
        text=True,
        env=env,
        timeout=240,
        check=False,
    )


def test_the_site_builds_strictly(tmp_path: Path) -> None:
    built = _build(CONFIG, tmp_path / "site")
    assert built.returncode == 0, f"mkdocs build --strict failed:\n{built.stderr}"
    pages = {p.relative_to(DOCS).with_suffix("") for p in DOCS.rglob("*.md")}
    for page in pages:
        html = tmp_path / "site" / ("" if page.name == "index" else page) / "index.html"
        assert html.is_file(), f"docs/{page}.md was not built"


def test_a_broken_link_a_missing_anchor_and_a_page_outside_nav_fail_the_build(
    tmp_path: Path,
) -> None:
    copy = tmp_path / "repo"
    shutil.copytree(DOCS, copy / "docs")
    shutil.copy(CONFIG, copy / "mkdocs.yml")
    architecture = copy / "docs" / "architecture.md"
    architecture.write_text(
        architecture.read_text()
        + "\nSee [a gone page](gone.md), [a gone heading](chart.md#no-such-heading)"
        + " and [the README](../README.md).\n"
    )
    (copy / "docs" / "orphan.md").write_text("# Orphan\n\nIn no nav.\n")
    built = _build(copy / "mkdocs.yml", tmp_path / "site")
    assert built.returncode != 0
    for planted in ("gone.md", "no-such-heading", "../README.md", "orphan.md"):
        assert planted in built.stderr, f"the strict build did not report {planted}"


def _repository_links(text: str) -> list[str]:
    return re.findall(re.escape(REPO) + r"[^\s)>\]`\"']*", text)


def test_links_into_the_repository_use_one_base_and_name_existing_files() -> None:
    sources = [
        *sorted(DOCS.rglob("*.md")),
        CONFIG,
        ROOT / "README.md",
        ROOT / "charts" / "hangwatch" / "values.yaml",
    ]
    for source in sources:
        for link in _repository_links(source.read_text()):
            if link.rstrip("/") == REPO:
                continue  # the repository itself
            where = source.relative_to(ROOT)
            assert link.startswith(BLOB), f"{where}: {link} does not start with {BLOB}"
            target = link.removeprefix(BLOB).split("#")[0]
            assert (ROOT / target).exists(), f"{where}: {link} names {target}, which is not here"
