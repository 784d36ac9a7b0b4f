"""The sidecar's `/status` document, read into typed values the operator relies on.

Fed by `status_polling` with the JSON body of `GET /status` (schema 1, README:
Sidecar). Only the parts correlation and decisions use are kept: the debounced
verdict with its reasons and start, each broker's reachability and the sidecar's own
freshness. Anything the operator cannot trust raises `StatusFormatError`, which the
poller reports as an unreachable sidecar: a garbled answer is never read as a hang.
Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from hangwatch.contracts import Reachability, Verdict
from hangwatch_operator.watched import WatchedPod

SUPPORTED_SCHEMA = 1


class StatusFormatError(ValueError):
    """A /status answer the operator cannot use (wrong schema, missing or bad fields)."""


@dataclass(frozen=True)
class BrokerReach:
    """One broker address and how it answered the sidecar's last probe."""

    address: str
    reachability: str
    """A `Reachability` value; kept as text so a newer sidecar's class is not fatal."""

    @property
    def ok(self) -> bool:
        return self.reachability == Reachability.OK


@dataclass(frozen=True)
class SidecarReport:
    """What one sidecar says about its pod."""

    verdict: Verdict
    since: float | None
    reasons: tuple[str, ...]
    brokers: tuple[BrokerReach, ...]
    evaluated_ts: float | None
    version: str = ""

    @property
    def cut_off(self) -> bool:
        """No broker answers from this pod (the sidecar's verdict or its probe results)."""
        if self.verdict is Verdict.CLUSTER_UNREACHABLE:
            return True
        return bool(self.brokers) and not any(b.ok for b in self.brokers)

    @property
    def reaches_cluster(self) -> bool:
        """At least one broker answers from this pod."""
        return not self.cut_off and any(b.ok for b in self.brokers)

    @property
    def failing_brokers(self) -> tuple[str, ...]:
        return tuple(b.address for b in self.brokers if not b.ok)


@dataclass(frozen=True)
class PodReport:
    """One watched pod and what its sidecar said (or, in `error`, why it said nothing)."""

    pod: WatchedPod
    status: SidecarReport | None = None
    error: str | None = None


def parse_status(doc: object, *, now: float, stale_after_seconds: float) -> SidecarReport:
    """A `SidecarReport` from a decoded /status body.

    `stale_after_seconds`: a sidecar whose last evaluation round is older than this is
    wedged (its /healthz will soon fail too); its verdict is not used.
    """
    if not isinstance(doc, Mapping):
        raise StatusFormatError("/status is not a JSON object")
    if doc.get("schema") != SUPPORTED_SCHEMA:
        raise StatusFormatError(f"unsupported /status schema {doc.get('schema')!r}")
    try:
        verdict = Verdict(str(doc.get("verdict")))
    except ValueError as exc:
        raise StatusFormatError(f"unknown verdict {doc.get('verdict')!r}") from exc
    sidecar = doc.get("sidecar")
    if not isinstance(sidecar, Mapping):
        sidecar = {}
    evaluated = _number(sidecar.get("evaluated_ts"), "sidecar.evaluated_ts")
    if evaluated is not None and now - evaluated > stale_after_seconds:
        raise StatusFormatError(f"sidecar's last evaluation is {now - evaluated:.0f} s old")
    return SidecarReport(
        verdict=verdict,
        since=_number(doc.get("since"), "since"),
        reasons=tuple(str(r) for r in _list(doc.get("reasons"), "reasons")),
        brokers=tuple(_broker(b) for b in _list(doc.get("brokers"), "brokers")),
        evaluated_ts=evaluated,
        version=str(doc.get("version") or ""),
    )


def _broker(raw: Any) -> BrokerReach:
    if not isinstance(raw, Mapping) or not raw.get("address"):
        raise StatusFormatError("brokers[] entries need an address")
    return BrokerReach(str(raw["address"]), str(raw.get("reachability") or "unknown"))


def _number(value: Any, name: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise StatusFormatError(f"{name} must be a number")
    return float(value)


def _list(value: Any, name: str) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise StatusFormatError(f"{name} must be a list")
    return value
