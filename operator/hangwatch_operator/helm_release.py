"""Helm release records: decoding one from its Secret, the values it was rendered with,
the files it installed.

Helm keeps each release in a Secret (`sh.helm.release.v1.NAME.vREVISION`) whose
`release` value is base64 of base64 of gzipped JSON. `hangwatch check` reads the chart
and values it installed from it, and its own copy of the CRD. Pure: no I/O.
"""

from __future__ import annotations

import base64
import gzip
import json
from collections.abc import Mapping
from typing import Any

import yaml

from hangwatch_operator.install_model import CRD_NAME


def decode_release(data: str) -> dict[str, Any]:
    """A Helm release from its Secret's `release` value (base64 of base64 of gzipped JSON,
    or of plain JSON); `ValueError` names what is wrong."""
    try:
        raw = base64.b64decode(base64.b64decode(data, validate=True), validate=True)
        if raw[:2] == b"\x1f\x8b":
            raw = gzip.decompress(raw)
        release = json.loads(raw)
    except (ValueError, OSError, EOFError) as exc:
        raise ValueError(f"not a Helm release record: {exc}") from None
    if not isinstance(release, dict) or not isinstance(release.get("chart"), dict):
        raise ValueError("not a Helm release record: no chart")
    return release


def release_values(release: Mapping[str, Any]) -> dict[str, Any]:
    """The values the release was rendered with: the chart's defaults under the user's."""
    chart = release.get("chart") or {}
    return merge_values(chart.get("values") or {}, release.get("config") or {})


def merge_values(base: Mapping[str, Any], extra: Mapping[str, Any]) -> dict[str, Any]:
    """Helm's merge of values: `extra`'s keys over `base`'s, maps merged key by key."""
    out = dict(base)
    for key, value in extra.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = merge_values(out[key], value)
        else:
            out[key] = value
    return out


def release_crd(release: Mapping[str, Any]) -> dict[str, Any] | None:
    """The release's own copy of the ProducerHealthPolicy CRD (the chart's `crds/` file)."""
    for item in (release.get("chart") or {}).get("files") or []:
        if not str(item.get("name", "")).startswith("crds/"):
            continue
        try:
            text = base64.b64decode(item.get("data") or "").decode()
            docs = list(yaml.safe_load_all(text))
        except (ValueError, yaml.YAMLError):
            continue
        for doc in docs:
            if isinstance(doc, dict) and (doc.get("metadata") or {}).get("name") == CRD_NAME:
                return doc
    return None


def chart_meta(release: Mapping[str, Any]) -> Mapping[str, Any]:
    """The metadata of the chart the release installed (name, version, appVersion)."""
    return (release.get("chart") or {}).get("metadata") or {}
