"""Cordon and uncordon keep a taint another controller adds in between, on the real server.

`actuation.cordon` / `uncordon` run in-process against the real kube-apiserver through the
operator's own `KubeApi`; right after each of hangwatch's node reads, another
controller adds a taint (a real update). What only a real server can show: it applies
the cordon's JSON patch to the node as it is then (our taint appended to the list, so
the other taint survives without a precondition; only the first write to a node with no
taint list carries the read's `resourceVersion` and is answered 409), and it treats the
`metadata.resourceVersion` in the uncordon's merge patch as a precondition and answers
409, so hangwatch reads again and the other taint survives (the code before the
precondition lost it every time here). The probabilistic version, with a
controller racing the running operator, is in test_remediation.py.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from kubernetes import client

from hangwatch_operator.actuation import cordon, uncordon
from hangwatch_operator.kube_api import KubeApi
from hangwatch_operator.watched import NETWORK_FAULT_TAINT
from hangwatch_testing.kube.cluster import LocalCluster
from hangwatch_testing.kube.fleet import ensure_node
from hangwatch_testing.kube.release import admin_api

pytestmark = pytest.mark.xdist_group("kube")

POLICY = "races/writers"


class RacedApi(KubeApi):
    """The operator's API client; after each of the next `races` node reads, another
    controller adds a taint `other.example/r<N>` to the node."""

    cluster: LocalCluster
    races = 0
    added: list[str]

    async def get_node(self, name: str) -> dict[str, Any]:
        body = await super().get_node(name)
        if self.races:
            self.races -= 1
            key = f"other.example/r{len(self.added)}"
            await asyncio.to_thread(_add_taint, self.cluster, name, key)
            self.added.append(key)
        return body


def _add_taint(cluster: LocalCluster, node: str, key: str) -> None:
    with admin_api(cluster) as api:
        core = client.CoreV1Api(api)
        body = core.read_node(node)
        body.spec.taints = [*(body.spec.taints or []), client.V1Taint(key=key, effect="NoSchedule")]
        core.replace_node(node, body)


def _taints(cluster: LocalCluster, node: str) -> list[str]:
    with admin_api(cluster) as api:
        body = client.CoreV1Api(api).read_node(node)
    return [t.key for t in body.spec.taints or []]


async def _cordon_then_uncordon(cluster: LocalCluster, node: str, races: int) -> list[str]:
    api = await RacedApi.connect(str(cluster.admin_kubeconfig))
    assert isinstance(api, RacedApi)
    api.cluster, api.added = cluster, []
    try:
        api.races = races
        assert "cordoned" in await cordon(api, node, POLICY, 0.0)
        # the append needs no precondition; only the whole-list write to a node with no
        # taint list yet (the node controller's not-ready taint may come first) conflicts
        assert 1 <= len(api.added) <= min(races, 2), api.added
        cordon_races = len(api.added)
        after_cordon = _taints(cluster, node)
        assert after_cordon.count(NETWORK_FAULT_TAINT["key"]) == 1
        assert set(api.added) <= set(after_cordon), (api.added, after_cordon)
        api.races = races
        assert "uncordoned" in await uncordon(api, node, POLICY)
    finally:
        await api.close()
    after = _taints(cluster, node)
    assert NETWORK_FAULT_TAINT["key"] not in after
    assert set(api.added) <= set(after), (api.added, after)
    assert len(api.added) == cordon_races + races  # the uncordon re-read after each race
    return api.added


@pytest.mark.parametrize("races", [1, 3])
def test_a_taint_added_between_read_and_write_survives(cluster: LocalCluster, races: int) -> None:
    node = f"raced-{races}"
    ensure_node(cluster, node)
    asyncio.run(_cordon_then_uncordon(cluster, node, races))
