"""Validate custom resources the way the API server does, from the CRD's own schema.

Not a test module: helpers for the operator tests. The CRD's structural
`openAPIV3Schema` becomes a JSON Schema (OpenAPI `nullable` and boolean
`exclusiveMinimum`, `x-kubernetes-int-or-string`, list types `set`/`map`, unknown
fields rejected as with kubectl's strict field validation), defaults are applied as the
API server applies them, and `x-kubernetes-validations` CEL rules are evaluated with
cel-python (`celpy`). Errors are phrased like the API server's field errors, e.g.
`spec.kafka.bootstrapServers: Required value`. `policy_document` builds the
ProducerHealthPolicy the tests create.
"""

from __future__ import annotations

import copy
import functools
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import celpy
import celpy.adapter
import jsonschema
import yaml

ROOT = Path(__file__).resolve().parents[2]
CRD_PATH = ROOT / "crds" / "producerhealthpolicy.yaml"
EXAMPLES = ROOT / "examples"
EXECUTOR_POLICY = EXAMPLES / "policy-spark-executors.yaml"
"""The README's example policy for Spark executors (the kube tier and the admission
benchmark apply it)."""


def policy_document(
    namespace: str, name: str, bootstrap_servers: list[str], **spec: Any
) -> dict[str, Any]:
    """A ProducerHealthPolicy `namespace/name` for `bootstrap_servers`, with `spec` added."""
    return {
        "apiVersion": "hangwatch.dev/v1alpha1",
        "kind": "ProducerHealthPolicy",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"kafka": {"bootstrapServers": bootstrap_servers}, **spec},
    }


@functools.cache
def crd() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load(CRD_PATH.read_text())
    return loaded


def version_schema(version: str = "v1alpha1") -> dict[str, Any]:
    for entry in crd()["spec"]["versions"]:
        if entry["name"] == version:
            schema: dict[str, Any] = entry["schema"]["openAPIV3Schema"]
            return schema
    raise KeyError(version)


def walk_schema(node: dict[str, Any], path: str = "") -> Iterator[tuple[str, dict[str, Any]]]:
    """Every schema node with its field path (`spec.kafka`, `spec.roles[]`)."""
    yield path, node
    for name, child in (node.get("properties") or {}).items():
        yield from walk_schema(child, f"{path}.{name}" if path else name)
    if isinstance(node.get("items"), dict):
        yield from walk_schema(node["items"], f"{path}[]")
    if isinstance(node.get("additionalProperties"), dict):
        yield from walk_schema(node["additionalProperties"], f"{path}[*]")


def to_json_schema(node: Any) -> Any:
    """A structural OpenAPI v3 schema as a JSON Schema (draft 2020-12)."""
    if not isinstance(node, dict):
        return node
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key.startswith("x-kubernetes-") or key in {"default", "description", "nullable"}:
            continue
        if key == "properties":
            out[key] = {name: to_json_schema(child) for name, child in value.items()}
        elif key in {"items", "additionalProperties", "not"}:
            out[key] = to_json_schema(value)
        elif key in {"anyOf", "allOf", "oneOf"}:
            out[key] = [to_json_schema(child) for child in value]
        elif key in {"exclusiveMinimum", "exclusiveMaximum"}:
            bound = "minimum" if key == "exclusiveMinimum" else "maximum"
            if value is True:
                out[key] = node[bound]
        else:
            out[key] = value
    for key in ("exclusiveMinimum", "exclusiveMaximum"):
        if key in out:
            out.pop("minimum" if key == "exclusiveMinimum" else "maximum", None)
    if node.get("nullable") and "type" in out:
        out["type"] = [out["type"], "null"]
    if node.get("x-kubernetes-int-or-string") and "anyOf" not in out:
        out["anyOf"] = [{"type": "integer"}, {"type": "string"}]
    if node.get("x-kubernetes-list-type") == "set":
        out["uniqueItems"] = True
    free = node.get("x-kubernetes-preserve-unknown-fields") or "additionalProperties" in node
    if node.get("type") == "object" and "properties" in node and not free:
        out["additionalProperties"] = False
    return out


def apply_defaults(schema: dict[str, Any], value: Any) -> Any:
    """`value` with the schema's defaults filled in, as the API server stores it."""
    value = copy.deepcopy(value)
    _default_into(schema, value)
    return value


def _default_into(schema: dict[str, Any], value: Any) -> None:
    if isinstance(value, dict):
        for name, child in (schema.get("properties") or {}).items():
            if name not in value and "default" in child:
                value[name] = copy.deepcopy(child["default"])
            if name in value:
                _default_into(child, value[name])
        extra = schema.get("additionalProperties")
        if isinstance(extra, dict):
            for key in set(value) - set(schema.get("properties") or {}):
                _default_into(extra, value[key])
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for item in value:
            _default_into(schema["items"], item)


def validation_errors(obj: dict[str, Any]) -> list[str]:
    """API-server style errors of a ProducerHealthPolicy: schema first, then CEL rules."""
    schema = version_schema()
    defaulted = apply_defaults(schema, obj)
    validator = jsonschema.Draft202012Validator(to_json_schema(schema))
    errors = [_phrase(e) for e in validator.iter_errors(defaulted)]
    errors += list(_list_map_errors(schema, defaulted, ""))
    if errors:  # the API server stops before CEL when the schema fails
        return sorted(errors)
    return list(_cel_errors(schema, defaulted, ""))


def _field(parts: Any) -> str:
    text = ""
    for part in parts:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else part)
    return text


def _phrase(error: jsonschema.ValidationError) -> str:
    # The stubs allow `Unset` for errors not yet tied to a schema; validate() sets them all.
    path = _field(error.absolute_path)
    kind: Any = error.validator
    rule: Any = error.validator_value
    value: Any = error.instance
    schema: Any = error.schema
    shown = json.dumps(value)
    if kind == "required":
        missing = next(name for name in rule if name not in value)
        return f"{_field([*error.absolute_path, missing])}: Required value"
    if kind == "additionalProperties":
        extra = sorted(set(value) - set(schema.get("properties") or {}))
        return "; ".join(f'unknown field "{_field([*error.absolute_path, e])}"' for e in extra)
    if kind == "enum":
        allowed = ", ".join(json.dumps(v) for v in rule)
        return f"{path}: Unsupported value: {shown}: supported values: {allowed}"
    bounds = {
        "maximum": "less than or equal to",
        "minimum": "greater than or equal to",
        "exclusiveMinimum": "greater than",
        "exclusiveMaximum": "less than",
    }
    if kind in bounds:
        return f"{path}: Invalid value: {shown}: {path} in body should be {bounds[kind]} {rule}"
    if kind == "pattern":
        return f"{path}: Invalid value: {shown}: {path} in body should match '{rule}'"
    if kind == "uniqueItems":
        return f"{path}: Duplicate value: {shown}"
    if kind == "maxItems":
        return f"{path}: Too many: {len(value)}: must have at most {rule} items"
    if kind == "type":
        kind_name = type(value).__name__
        return (
            f'{path}: Invalid value: {shown}: {path} in body must be of type {rule}: "{kind_name}"'
        )
    return f"{path}: Invalid value: {shown}: {error.message}"


def _list_map_errors(schema: dict[str, Any], value: Any, path: str) -> Iterator[str]:
    if isinstance(value, list) and schema.get("x-kubernetes-list-type") == "map":
        keys = schema.get("x-kubernetes-list-map-keys") or []
        seen: set[str] = set()
        for index, item in enumerate(value):
            ident = json.dumps({k: item.get(k) for k in keys}, sort_keys=True)
            if ident in seen:
                yield f"{path}[{index}]: Duplicate value: {ident}"
            seen.add(ident)
    yield from _children(schema, value, path, _list_map_errors)


def _cel_errors(schema: dict[str, Any], value: Any, path: str) -> Iterator[str]:
    for rule in schema.get("x-kubernetes-validations") or []:
        outcome = _evaluate(rule["rule"], value)
        if outcome is not True:
            kind = schema.get("type", "object")
            detail = rule.get("message") or f"failed rule: {rule['rule']}"
            if outcome is not False:
                detail = f"{detail} (evaluation error: {outcome})"
            yield f'{path}: Invalid value: "{kind}": {detail}'
    yield from _children(schema, value, path, _cel_errors)


def _children(schema: dict[str, Any], value: Any, path: str, fn: Any) -> Iterator[str]:
    if isinstance(value, dict):
        for name, child in (schema.get("properties") or {}).items():
            if name in value:
                yield from fn(child, value[name], f"{path}.{name}" if path else name)
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for index, item in enumerate(value):
            yield from fn(schema["items"], item, f"{path}[{index}]")


CEL_RECURSION_LIMIT = 2500
"""What `celpy.Environment()` sets the interpreter's recursion limit to (CEL's minimums)."""
sys.setrecursionlimit(max(sys.getrecursionlimit(), CEL_RECURSION_LIMIT))  # at import, once


@functools.cache
def compiled(rule: str) -> celpy.Runner:
    limit = sys.getrecursionlimit()
    env = celpy.Environment()
    # celpy sets the limit whenever an environment is made: a Hypothesis test that
    # compiled a rule first in its process (the cache is per process, so it depended on
    # the order of the worker's tests) found the limit changed during the test and failed
    # on Hypothesis's warning. The limit is raised once, at import; here it is kept.
    sys.setrecursionlimit(limit)
    return env.program(env.compile(rule))


def _evaluate(rule: str, value: Any) -> bool | str:
    result = compiled(rule).evaluate({"self": celpy.adapter.json_to_cel(value)})
    if isinstance(result, celpy.celtypes.BoolType):
        return bool(result)
    return str(result)


def load_yaml(path: Path) -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load(path.read_text())
    return loaded


CEL_ONLY_INVALID = frozenset(
    {
        "cordon-for-hung-producer.yaml",
        "driver-deletion-without-driver-role.yaml",
        "restart-during-election.yaml",
        "sasl-without-mechanism.yaml",
        "stall-not-longer-than-probe-interval.yaml",
    }
)
"""The examples/invalid documents only a CEL rule of the CRD rejects (a server without
CEL, like v1.20, accepts them)."""


def expected_error(path: Path) -> str:
    """The `# expect: ...` comment an invalid example opens with."""
    first = path.read_text().splitlines()[0]
    assert first.startswith("# expect: "), f"{path.name} must open with '# expect: <error>'"
    return first.removeprefix("# expect: ").strip()
