"""docs/upgrade.md's CRD step, run against the real API server after a Helm install.

Covers: the commands of docs/upgrade.md's "1. Apply the new CRD" block, read from the
page, run with the release's kubectl against the CRD Helm installed: re-applying the same
CRD succeeds; a changed CRD (a field's description edited, as a new release's would be)
conflicts with the fields Helm manages when applied with `--server-side` alone, so the
page's `--force-conflicts` is needed, and with it the change is served; the page's check
prints the CRD's generation and `True` (Established). The CRD is restored afterwards.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
import yaml

from hangwatch_testing.kube.cluster import ROOT, LocalCluster
from hangwatch_testing.kube.release import HelmRelease

pytestmark = pytest.mark.xdist_group("kube")

PAGE = ROOT / "docs" / "upgrade.md"
SECTION = "## 1. Apply the new CRD"
CRD = "producerhealthpolicies.hangwatch.dev"


def _commands() -> list[list[str]]:
    text = PAGE.read_text()
    block = re.search(r"```bash\n(.*?)```", text[text.index(SECTION) :], re.S)
    assert block is not None, f"no bash block under {SECTION!r} in docs/upgrade.md"
    joined = block.group(1).replace("\\\n", " ")
    return [shlex.split(line) for line in joined.splitlines() if line.strip()]


def _kubectl(cluster: LocalCluster, command: list[str], crd_file: Path | None = None) -> str:
    assert command[0] == "kubectl", command
    args = command[1:]
    if crd_file is not None:
        args = [str(crd_file) if a.endswith("producerhealthpolicy.yaml") else a for a in args]
    return cluster.kubectl(*args).stdout


def _description(cluster: LocalCluster) -> str:
    out = cluster.kubectl(
        "get", "crd", CRD, "-o", "jsonpath={.spec.versions[0].schema.openAPIV3Schema.description}"
    )
    return out.stdout


def test_the_documented_crd_step_upgrades_a_helm_installed_crd(
    cluster: LocalCluster, release: HelmRelease, tmp_path: Path
) -> None:
    apply, check = _commands()
    assert apply[:3] == ["kubectl", "apply", "--server-side"], apply
    assert "--force-conflicts" in apply
    source = ROOT / next(a for a in apply if a.endswith("producerhealthpolicy.yaml"))
    original = _description(cluster)
    try:
        _kubectl(cluster, apply)  # the same CRD: nothing to take over
        generation, established = _kubectl(cluster, check).split()
        assert established == "True"

        crd = yaml.safe_load(source.read_text())
        schema = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
        schema["description"] = "A newer release's description."
        changed = tmp_path / "producerhealthpolicy.yaml"
        changed.write_text(yaml.safe_dump(crd))

        alone = [a for a in apply[1:] if a != "--force-conflicts"]
        alone = [str(changed) if a.endswith("producerhealthpolicy.yaml") else a for a in alone]
        refused = cluster.kubectl(*alone, check=False)
        assert refused.returncode != 0 and "conflict" in refused.stderr.lower(), refused.stderr

        _kubectl(cluster, apply, changed)
        assert _description(cluster) == "A newer release's description."
        new_generation, established = _kubectl(cluster, check).split()
        assert int(new_generation) > int(generation) and established == "True"
    finally:
        _kubectl(cluster, apply)
    assert _description(cluster) == original
