"""The ProducerHealthPolicy CRD: a valid, structural, strict schema that says why it refuses.

Covers: `crds/producerhealthpolicy.yaml` is a valid apiextensions.k8s.io/v1 CRD for
Kubernetes 1.25 (oldest supported: CEL rules on by default), 1.29 and the newest schema
kubernetes-validate ships; group, version, scope, status subresource and printer
columns; the schema is structural (every node typed, defaults valid); integer fields
carry their unit in the name; every documented example validates against the schema
*and* its CEL rules (evaluated with cel-python), every `examples/invalid/*.yaml` is
rejected with the message in its `# expect:` line, each CEL rule rejects what its
message names; the operator's defaults equal the CRD's; what the schema cannot check
(requests above limits) the operator rejects. One set of bounds: the operator's
`INTEGER_BOUNDS`, share range and bootstrap pattern are the schema's (walked), and
`parse_policy` accepts exactly what the API server accepts at every bound, for every
CEL rule, for ports outside 1..65535, malformed IPv6 and over-long host names, and for
random policies (hypothesis), refusing wrong types (`"2"`, `1.5`, `null`, `"false"`)
with one line naming the field; every bootstrap entry the CRD accepts, the sidecar's
parser accepts (hypothesis).
"""

from __future__ import annotations

import copy
import re
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hangwatch_operator.policies import (
    BOOTSTRAP_ENTRY,
    INTEGER_BOUNDS,
    ITEM_BOUNDS,
    MAX_UNHEALTHY_SHARE,
    InvalidPolicyError,
    parse_policy,
)
from hangwatch_sidecar.probe.settings import parse_endpoint
from hangwatch_testing.structural import (
    EXAMPLES,
    apply_defaults,
    compiled,
    crd,
    expected_error,
    load_yaml,
    to_json_schema,
    validation_errors,
    version_schema,
    walk_schema,
)

VALID = sorted(EXAMPLES.glob("*.yaml"))
INVALID = sorted((EXAMPLES / "invalid").glob("*.yaml"))
MINIMAL: dict[str, Any] = {
    "apiVersion": "hangwatch.dev/v1alpha1",
    "kind": "ProducerHealthPolicy",
    "metadata": {"name": "minimal", "namespace": "spark-jobs"},
    "spec": {"kafka": {"bootstrapServers": ["kafka:9092"]}},
}


def _with(path: str, value: Any, **more: Any) -> dict[str, Any]:
    """MINIMAL with `value` set at the dotted `path` under spec (and `more`, `__` for dots)."""
    obj = copy.deepcopy(MINIMAL)
    for dotted, new in {path: value, **{k.replace("__", "."): v for k, v in more.items()}}.items():
        node = obj["spec"]
        *parents, last = dotted.split(".")
        for key in parents:
            node = node.setdefault(key, {})
        node[last] = new
    return obj


@pytest.mark.parametrize("k8s_version", ["1.25", "1.29", kubernetes_validate.latest_version()])
def test_crd_is_a_valid_apiextensions_v1_crd(k8s_version: str) -> None:
    kubernetes_validate.validate(crd(), k8s_version, strict=True)


def test_crd_names_scope_status_subresource_and_printer_columns() -> None:
    spec = crd()["spec"]
    assert crd()["metadata"]["name"] == "producerhealthpolicies.hangwatch.dev"
    assert (spec["group"], spec["scope"], spec["names"]["kind"]) == (
        "hangwatch.dev",
        "Namespaced",
        "ProducerHealthPolicy",
    )
    (version,) = spec["versions"]
    assert (version["name"], version["served"], version["storage"]) == ("v1alpha1", True, True)
    assert version["subresources"] == {"status": {}}
    columns = {c["name"]: c["jsonPath"] for c in version["additionalPrinterColumns"]}
    assert columns == {
        "Watched": ".status.watched",
        "Unhealthy": ".status.unhealthy",
        "Last Action": ".status.lastAction.summary",
        "Dry Run": ".spec.safety.dryRun",
        "Age": ".metadata.creationTimestamp",
    }


def test_schema_is_structural_and_every_default_is_valid() -> None:
    for path, node in walk_schema(version_schema()):
        typed = "type" in node or node.get("x-kubernetes-int-or-string")
        assert typed, f"{path or '<root>'} has no type"
        if "default" in node:
            jsonschema.validate(node["default"], to_json_schema(node))
        if path.startswith("spec") and node.get("type") == "array":
            assert "maxItems" in node, f"{path}: CEL cost needs a bounded list"


def test_integer_fields_carry_their_unit_in_the_name() -> None:
    unitless = {
        "maxConcurrent": "a count of pods",
        "observedGeneration": "a generation",
        "ports[]": "TCP port numbers",
        "uids[]": "user ids",
        "partitions[]": "partition ids",
    }
    for path, node in walk_schema(version_schema()):
        name = path.rsplit(".", 1)[-1]
        if node.get("type") != "integer" or path.startswith("status.verdictCounts"):
            continue
        assert (
            name.endswith(("Seconds", "PerHour", "Nodes", "Pods"))
            or name in unitless
            or path
            in {
                "status.watched",
                "status.unhealthy",
            }
        ), f"{path} needs a unit in its name"


@pytest.mark.parametrize("example", VALID, ids=lambda p: p.name)
def test_documented_examples_pass_the_schema_and_its_cel_rules(example: Path) -> None:
    policy = load_yaml(example)
    assert validation_errors(policy) == []
    parse_policy(apply_defaults(version_schema(), policy))


@pytest.mark.parametrize("example", INVALID, ids=lambda p: p.name)
def test_invalid_examples_are_rejected_with_the_message_a_user_sees(example: Path) -> None:
    errors = validation_errors(load_yaml(example))
    expected = expected_error(example)
    assert any(expected in error for error in errors), errors


CEL_CASES = [
    ("detection.heartbeatSeconds", 10, "detection.heartbeatSeconds must be longer"),
    ("detection.metadataMaxAgeSeconds", 30, None),  # 30 > 10: accepted
    (
        "detection",
        {"metadataMaxAgeSeconds": 30, "heartbeatSeconds": 60},
        "detection.metadataMaxAgeSeconds must be longer",
        {"probes__probeIntervalSeconds": 30},
    ),
    (
        "detection.expectedWriteIntervalSeconds",
        10,
        "detection.expectedWriteIntervalSeconds must be longer",
    ),
    ("detection.expectedWriteIntervalSeconds", 11, None),  # 11 > 10: accepted
    ("probes", {"probeIntervalSeconds": 4}, "requestTimeoutSeconds must not exceed"),
    (
        "selector.matchExpressions",
        [{"key": "team", "operator": "In"}],
        "In and NotIn need values",
    ),
    (
        "selector.matchExpressions",
        [{"key": "team", "operator": "Exists", "values": ["x"]}],
        "In and NotIn need values",
    ),
    (
        "kafka.security",
        {"protocol": "SSL", "saslMechanism": "PLAIN"},
        "saslMechanism is only allowed",
    ),
    ("actions.producerHung", ["restart", "decommission"], "restart and decommission exclude"),
    ("actions.unknown", ["decommission"], "not allowed for brokerDegraded"),
    ("actions.nodeNetworkFault", ["cordonNode", "alert"], None),
    ("actions.brokerDegraded", ["cordonNode"], "cordonNode is only allowed for nodeNetworkFault"),
]


@pytest.mark.parametrize("case", CEL_CASES, ids=lambda c: f"{c[0]}={c[1]}")
def test_each_cel_rule_rejects_what_its_message_names(case: tuple[Any, ...]) -> None:
    path, value, message, *more = case
    errors = validation_errors(_with(path, value, **(more[0] if more else {})))
    if message is None:
        assert errors == []
    else:
        assert len(errors) == 1 and message in errors[0], errors


def test_every_cel_rule_compiles_and_is_exercised_by_a_test_or_example() -> None:
    rejections = [c[2] for c in CEL_CASES if c[2]] + [expected_error(p) for p in INVALID]
    for path, node in walk_schema(version_schema()):
        for rule in node.get("x-kubernetes-validations") or []:
            compiled(rule["rule"])
            message = " ".join(rule["message"].split())
            assert any(m in message or message[:40] in m for m in rejections), (
                f"no case rejects {path}: {rule['rule']}"
            )


def test_operator_defaults_equal_the_crd_defaults() -> None:
    stored = apply_defaults(version_schema(), MINIMAL)
    assert stored["spec"]["sidecar"]["resources"]["limits"] == {"memory": "128Mi"}
    assert parse_policy(stored) == parse_policy(MINIMAL)


def test_operator_rejects_requests_above_limits_which_the_schema_cannot_check() -> None:
    policy = _with("sidecar", {"resources": {"requests": {"memory": "1Gi"}}})
    assert validation_errors(policy) == []  # no quantity comparison in CEL before 1.29
    with pytest.raises(InvalidPolicyError, match=r"requests.memory \(1Gi\) exceeds the limit"):
        parse_policy(apply_defaults(version_schema(), policy))


def test_operator_refuses_uncordon_as_a_policy_action_as_the_schema_does() -> None:
    policy = _with("actions", {"nodeNetworkFault": ["uncordonNode"]})
    assert validation_errors(policy)  # the CRD's enum has no uncordonNode
    with pytest.raises(
        InvalidPolicyError, match=r"nodeNetworkFault: uncordonNode is not an action"
    ):
        parse_policy(policy)


def _spec_bounds() -> dict[str, tuple[Any, Any]]:
    """Every number under spec with its CRD minimum and maximum, by dotted spec path."""
    return {
        path.removeprefix("spec."): (node.get("minimum"), node.get("maximum"))
        for path, node in walk_schema(version_schema())
        if path.startswith("spec.") and node.get("type") in {"integer", "number"}
    }


def _accepted_by_both(obj: dict[str, Any]) -> tuple[bool, bool]:
    crd_ok = validation_errors(obj) == []
    try:
        parse_policy(apply_defaults(version_schema(), obj))
    except InvalidPolicyError:
        return crd_ok, False
    return crd_ok, True


def test_the_operator_knows_every_bound_of_the_crd_and_no_other() -> None:
    bounds = _spec_bounds()
    share = bounds.pop("safety.maxUnhealthyShare")
    assert share == MAX_UNHEALTHY_SHARE
    assert bounds == INTEGER_BOUNDS | ITEM_BOUNDS
    pattern = version_schema()["properties"]["spec"]["properties"]["kafka"]["properties"]
    assert pattern["bootstrapServers"]["items"]["pattern"] == BOOTSTRAP_ENTRY


@pytest.mark.parametrize("path", sorted(INTEGER_BOUNDS))
def test_parse_policy_accepts_exactly_what_the_api_server_accepts_at_each_bound(
    path: str,
) -> None:
    low, high = INTEGER_BOUNDS[path]
    # Wide probe interval and thresholds, so that the cross-field rules rarely decide.
    loose = {"probes__probeIntervalSeconds": 300, "probes__connectTimeoutSeconds": 1}
    loose |= {"probes__requestTimeoutSeconds": 1, "detection__stallSeconds": 3600}
    loose |= {"detection__heartbeatSeconds": 3600, "detection__metadataMaxAgeSeconds": 86400}
    seen = []
    for value in (low - 1, low, high, high + 1):
        obj = _with(path, value, **{k: v for k, v in loose.items() if k != path.replace(".", "__")})
        crd_ok, parsed = _accepted_by_both(obj)
        assert crd_ok == parsed, (path, value, validation_errors(obj))
        seen.append(parsed)
    assert seen[0] is False and seen[3] is False, "out of range must be refused by both"
    with pytest.raises(InvalidPolicyError, match=rf"spec\.{path} must be an integer in"):
        parse_policy(_with(path, high + 1))


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (0, "must be in (0, 1]"),
        (-0.5, "must be in (0, 1]"),
        (1.0000001, "must be in (0, 1]"),
        (float("nan"), "must be in (0, 1]"),
        (True, "must be in (0, 1]"),
        ("0.5", "must be in (0, 1]"),
    ],
)
def test_parse_policy_refuses_an_unhealthy_share_outside_the_crd_range(
    value: Any, message: str
) -> None:
    with pytest.raises(InvalidPolicyError, match=re.escape(message)):
        parse_policy(_with("safety.maxUnhealthyShare", value))


@pytest.mark.parametrize(
    ("path", "value"),
    [
        ("safety.maxConcurrent", 0),
        ("safety.maxConcurrent", -3),
        ("safety.podCooldownSeconds", -1),
        ("safety.maxConcurrent", "2"),
        ("safety.maxConcurrent", 1.5),
        ("safety.maxConcurrent", None),
        ("safety.dryRun", "false"),
        ("actions.autoUncordon.enabled", 1),
        ("probes.probeIntervalSeconds", True),
    ],
)
def test_parse_policy_refuses_what_the_schema_refuses_with_one_line_naming_the_field(
    path: str, value: Any
) -> None:
    assert validation_errors(_with(path, value))
    with pytest.raises(InvalidPolicyError, match=rf"^spec\.{re.escape(path)} must be"):
        parse_policy(_with(path, value))


@pytest.mark.parametrize("case", [c for c in CEL_CASES if c[2]], ids=lambda c: f"{c[0]}={c[1]}")
def test_parse_policy_refuses_what_each_cel_rule_refuses(case: tuple[Any, ...]) -> None:
    path, value, _message, *more = case
    obj = _with(path, value, **(more[0] if more else {}))
    with pytest.raises(InvalidPolicyError):
        parse_policy(apply_defaults(version_schema(), obj))


@pytest.mark.parametrize(
    "server",
    [
        *("kafka:0", "kafka:99999", "kafka:65536", "kafka:09092"),
        *("[:]:9092", "[1::2::3]:9092", "a" * 254 + ":9092"),
    ],
    ids=lambda s: s[:24],
)
def test_entries_the_sidecar_would_refuse_are_refused_by_both(server: str) -> None:
    obj = _with("kafka.bootstrapServers", [server])
    assert _accepted_by_both(obj) == (False, False)


@given(
    st.fixed_dictionaries(
        {},
        optional={
            path: st.integers(min_value=low - 3, max_value=high + 3)
            for path, (low, high) in INTEGER_BOUNDS.items()
        },
    ),
    st.lists(st.integers(min_value=-5, max_value=70000), min_size=1, max_size=3),
)
@settings(max_examples=150)
def test_parse_policy_and_the_api_server_agree_on_random_policies(
    numbers: dict[str, int], ports: list[int]
) -> None:
    servers = list(dict.fromkeys(f"kafka-{p}:{p}" for p in ports))
    obj = _with(
        "kafka.bootstrapServers", servers, **{k.replace(".", "__"): v for k, v in numbers.items()}
    )
    crd_ok, parsed = _accepted_by_both(obj)
    assert crd_ok == parsed, validation_errors(obj)


@given(st.from_regex(BOOTSTRAP_ENTRY, fullmatch=True))
@settings(max_examples=200)
def test_every_bootstrap_entry_the_crd_accepts_the_sidecar_accepts(entry: str) -> None:
    endpoint = parse_endpoint(entry)
    assert 1 <= endpoint.port <= 65535
