"""The operator gets exactly the permissions it needs, and no more, in each scenario.

Covers: cluster-wide (default) the ClusterRole holds CRD and namespace list/watch for
kopf, policies get/list/watch/patch and their status get/patch, pods
get/list/watch/delete, events create, ClusterKopfPeering get/list/watch/patch, and
nodes list/watch only (the index of cordoned nodes), nothing on secrets, webhook
configurations or with wildcards; node cordoning adds nodes get/patch only, and with
named namespaces (where that cluster-wide grant must be confirmed, or the chart
refuses to render) a Role in `default` to create node Events; the operator is told
its cap on cordoned nodes, 0 whenever RBAC grants no node writes; peering off drops the
peering rule; watching named namespaces moves the workload rules into a Role per
namespace (with KopfPeering there) and leaves the ClusterRole with kopf's discovery
only; every binding names the operator's ServiceAccount.
"""

from __future__ import annotations

from typing import Any

import helm_python as helm
import pytest

from tests.chart.rendering import NAMESPACE, Rendered, only, render, rendered, scenario_values

DISCOVERY = {
    ("apiextensions.k8s.io", "customresourcedefinitions"): {"list", "watch"},
    ("", "namespaces"): {"get", "list", "watch"},  # get: the webhook reads PSS labels
    ("", "nodes"): {"list", "watch"},
}
WORKLOAD = {
    ("hangwatch.dev", "producerhealthpolicies"): {"get", "list", "watch", "patch"},
    ("hangwatch.dev", "producerhealthpolicies/status"): {"get", "patch"},
    ("", "pods"): {"get", "list", "watch", "delete"},
    ("", "events"): {"create"},
    ("events.k8s.io", "events"): {"create"},
}


def _permissions(role: dict[str, Any]) -> dict[tuple[str, str], set[str]]:
    granted: dict[tuple[str, str], set[str]] = {}
    for rule in role["rules"]:
        assert "*" not in rule["verbs"] and "*" not in rule["resources"]
        assert "resourceNames" not in rule and "nonResourceURLs" not in rule
        for group in rule["apiGroups"]:
            for resource in rule["resources"]:
                granted.setdefault((group, resource), set()).update(rule["verbs"])
    return granted


def _cluster_role(scenario: str) -> dict[tuple[str, str], set[str]]:
    return _permissions(only(rendered(scenario), "ClusterRole"))


def test_cluster_wide_default() -> None:
    assert _cluster_role("default") == {
        **DISCOVERY,
        **WORKLOAD,
        ("kopf.dev", "clusterkopfpeerings"): {"get", "list", "watch", "patch"},
    }


def test_node_cordoning_adds_node_get_and_patch_only() -> None:
    granted = _cluster_role("node-cordoning")
    assert granted.pop(("", "nodes")) == {"get", "list", "watch", "patch"}
    default = _cluster_role("default")
    assert default.pop(("", "nodes")) == {"list", "watch"}
    assert granted == default


def test_namespaced_cordoning_may_write_node_events_in_default() -> None:
    values = scenario_values("namespaced")
    values.setdefault("operator", {})["nodeCordoning"] = {
        "enabled": True,
        "allowWithNamespacedWatch": True,
    }
    roles = [o for o in render(values) if o.kind == "Role"]
    node_events = [r for r in roles if r.obj["metadata"]["namespace"] == "default"]
    assert len(node_events) == 1
    assert _permissions(node_events[0].obj) == {
        ("", "events"): {"create"},
        ("events.k8s.io", "events"): {"create"},
    }


def test_peering_off_has_no_peering_rights() -> None:
    assert _cluster_role("peering-off") == {**DISCOVERY, **WORKLOAD}


def test_namespaced_scenario_uses_roles() -> None:
    objects = rendered("namespaced")
    assert _cluster_role("namespaced") == DISCOVERY
    roles = [o for o in objects if o.kind == "Role"]
    assert sorted(r.obj["metadata"]["namespace"] for r in roles) == ["analytics", "streaming"]
    for role in roles:
        assert _permissions(role.obj) == {
            **WORKLOAD,
            ("kopf.dev", "kopfpeerings"): {"get", "list", "watch", "patch"},
        }


def test_bindings_name_the_operator_service_account() -> None:
    for scenario in ("default", "namespaced"):
        objects: list[Rendered] = rendered(scenario)
        account = only(objects, "ServiceAccount")["metadata"]["name"]
        deployment = only(objects, "Deployment")
        assert deployment["spec"]["template"]["spec"]["serviceAccountName"] == account
        bindings = [o.obj for o in objects if o.kind in {"ClusterRoleBinding", "RoleBinding"}]
        assert bindings
        for binding in bindings:
            assert binding["subjects"] == [
                {"kind": "ServiceAccount", "name": account, "namespace": NAMESPACE}
            ]
            assert binding["roleRef"]["name"] == "hangwatch-operator"


def test_namespaced_cordoning_needs_its_cluster_wide_grant_confirmed() -> None:
    values = scenario_values("namespaced")
    values.setdefault("operator", {})["nodeCordoning"] = {"enabled": True}
    with pytest.raises(helm.HelmRenderError, match=r"grants nodes: patch cluster-wide"):
        render(values)


def _max_cordoned(objects: list[Rendered]) -> str:
    container = only(objects, "Deployment")["spec"]["template"]["spec"]["containers"][0]
    env = {e["name"]: e.get("value") for e in container["env"]}
    return str(env["HANGWATCH_OPERATOR_MAX_CORDONED_NODES"])


def test_the_operator_never_tries_to_cordon_what_rbac_forbids() -> None:
    assert _max_cordoned(rendered("default")) == "0"
    assert _max_cordoned(rendered("namespaced")) == "0"
    assert _max_cordoned(rendered("node-cordoning")) == "1"
    capped = {"operator": {"nodeCordoning": {"enabled": True, "maxCordonedNodes": 3}}}
    assert _max_cordoned(render(capped)) == "3"
