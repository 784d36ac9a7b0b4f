"""Every command of docs/development.md's "Run a checkout on a cluster" section, run by the tier.

The commands are read from that page itself (`hangwatch_testing.kube.readme`), so it
cannot drift from what is tested (the README's install from registries is the node
tier's tests/node/test_install_from_registries.py). Against the real kube-apiserver with
the operator running as the chart's ServiceAccount: `make image` is what
hangwatch_testing.containers builds the tiers' image with; the push is left aside (no
registry here); the session's release was installed with the values of the page's `helm
install`; each `kubectl` command runs with the release's kubectl and succeeds, the
policy of examples/policy-dry-run.yaml watching three executor pods, one of them hung:
`kubectl get producerhealthpolicies -A` shows it watching 3 with 1 unhealthy, `kubectl
get events` shows the HangwatchDryRun Event; `port-forward` needs a kubelet, so the
`curl` of the operator's /metrics goes to the operator process directly and finds
`hangwatch_operator_` samples; `helm upgrade --reuse-values` allows node patches and
`helm rollback ... 1` forbids them again.
"""

from __future__ import annotations

import json
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

from hangwatch.contracts import Verdict
from hangwatch_operator.helm_release import merge_values
from hangwatch_testing import containers
from hangwatch_testing.emulated_cluster import OperatorRun
from hangwatch_testing.kube.cluster import LocalCluster
from hangwatch_testing.kube.fleet import Fleet, ensure_node, launch, set_verdicts
from hangwatch_testing.kube.readme import cluster_commands, helm_install, parse_helm
from hangwatch_testing.kube.release import (
    NAMESPACE,
    OPERATOR_USER,
    RELEASE,
    HelmRelease,
    running_operator,
)
from hangwatch_testing.structural import EXAMPLES

pytestmark = pytest.mark.xdist_group("kube")

IMAGE_BUILDER = Path(containers.__file__)
"""Where the tiers' one `make image` runs (`hangwatch_image_archive`: tests/image and the
node tier load its archive)."""


def _can_patch_nodes(cluster: LocalCluster) -> str:
    args = ("auth", "can-i", "patch", "nodes", f"--as={OPERATOR_USER}")
    return cluster.kubectl(*args, check=False).stdout.strip()


@dataclass
class ReadmeRun:
    """Runs the README's commands one by one with the tier's means."""

    cluster: LocalCluster
    release: HelmRelease
    operator: OperatorRun
    metrics_port: int
    policy_namespace: str
    fleets: list[Fleet] = field(default_factory=list)

    def run(self, words: list[str]) -> bool:
        """Run one command; False for the ones left aside (push, port-forward)."""
        if words[:2] == ["make", "image"]:
            source = IMAGE_BUILDER.read_text()
            assert '["make", "-C", str(ROOT), "image"' in source  # the tiers' image is its
        elif words[1:2] == ["push"] or (words[0] == "kubectl" and "port-forward" in words):
            return False  # no registry here; port-forward needs a kubelet
        elif words[:2] == ["helm", "install"]:
            readme = helm_install()
            assert (readme.release, readme.namespace) == (RELEASE, NAMESPACE)
            values = self.release.values
            assert merge_values(values, readme.values) == values  # the session installed these
        elif words[:2] == ["helm", "upgrade"]:
            upgrade = parse_helm(words)
            assert upgrade.create_namespace, "the README's upgrade keeps the values"
            assert _can_patch_nodes(self.cluster) == "no"
            self.release.upgrade(merge_values(self.release.values, upgrade.values))
            assert _can_patch_nodes(self.cluster) == "yes"
        elif words[:2] == ["helm", "rollback"]:
            self.release.rollback(int(words[3]))
            assert _can_patch_nodes(self.cluster) == "no"
        elif words[0] == "kubectl":
            self.kubectl(words)
        elif words[0] == "curl":
            assert "hangwatch_operator_" in " ".join(words)
            url = f"http://127.0.0.1:{self.metrics_port}/metrics"
            with urllib.request.urlopen(url, timeout=5) as answer:
                text = answer.read().decode()
            assert [s for s in text.splitlines() if s.startswith("hangwatch_operator_")]
        else:
            raise AssertionError(f"the tier does not know how to run: {' '.join(words)}")
        return True

    def events(self, reason: str) -> list[dict[str, Any]]:
        done = self.cluster.kubectl(
            *("get", "events", "-n", self.policy_namespace, f"--field-selector=reason={reason}"),
            *("-o", "json"),
        )
        items: list[dict[str, Any]] = json.loads(done.stdout)["items"]
        return items

    def kubectl(self, words: list[str]) -> None:
        done = self.cluster.kubectl(*words[1:], check=False)
        if words[1:3] == ["create", "namespace"] and "AlreadyExists" in done.stderr:
            return
        assert done.returncode == 0, (words, done.stderr)
        if words[1] == "apply":
            # The policy covers executors started from now on: three, one of them hung.
            fleet = launch(
                self.cluster,
                self.policy_namespace,
                ["node-a"] * 3,
                self.release.sidecar_port,
                policy="try-it-out",
                apply_policy=False,
            )
            self.fleets.append(fleet)
            set_verdicts([fleet.pods[0]], Verdict.PRODUCER_HUNG)
            self.operator.wait_for("the dry-run Event", lambda: self.events("HangwatchDryRun"))
        elif words[1:3] == ["get", "producerhealthpolicies"]:
            rows = [r.split() for r in done.stdout.splitlines()]
            assert rows[0][:5] == ["NAMESPACE", "NAME", "WATCHED", "UNHEALTHY", "LAST"], rows
            ours = next(r for r in rows if r[:2] == [self.policy_namespace, "try-it-out"])
            assert ours[2:4] == ["3", "1"], rows
        elif words[1:3] == ["get", "events"]:
            assert "HangwatchDryRun" in done.stdout and "producer_hung" in done.stdout


def test_every_readme_command_runs_against_the_real_api_server(
    cluster: LocalCluster, release: HelmRelease, tmp_path: Path
) -> None:
    commands = cluster_commands()
    policy = yaml.safe_load((EXAMPLES / "policy-dry-run.yaml").read_text())
    ensure_node(cluster, "node-a")
    with running_operator(cluster, tmp_path, "hangwatch-operator-readme") as (operator, cmd):
        operator.wait_for_log("Activity 'start_remediation' succeeded")
        readme = ReadmeRun(
            cluster, release, operator, cmd.metrics_port, policy["metadata"]["namespace"]
        )
        try:
            ran = [words for words in commands if readme.run(words)]
        finally:
            for fleet in readme.fleets:
                fleet.close()
    assert len(ran) == len(commands) - 2  # all but the push and the port-forward
