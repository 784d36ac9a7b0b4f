"""kopf handlers for injection: index the policies, mutate Spark pods, serve HTTPS.

Thin by design: `policies_by_namespace` parses each ProducerHealthPolicy once into the
kopf index (invalid specs raise `kopf.PermanentError` and drop out of it);
`inject_sidecar` looks the pod's namespace up in that index and hands the pod to the
pure `policies.matching_policy` and `injection.build_sidecar_patch`; `configure` (at
startup) sets up kopf's webhook server with the chart's certificate files, or a
self-signed set for local runs, and reads the API server version once for
`injectionMode: auto`. Settings come from the memo key `hangwatch_settings` (tests) or
from `HANGWATCH_OPERATOR_*` variables. Every admission is counted in
`hangwatch_operator_webhook_requests_total{result=injected|skipped|error}`.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import os
import shutil
import tempfile
from collections.abc import AsyncIterator, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import kopf
import kubernetes
import urllib3

from hangwatch_operator.certificates import generate_webhook_certificates
from hangwatch_operator.injection import (
    InjectionConflictError,
    apply_add_ops,
    build_sidecar_patch,
    resolve_injection_mode,
    server_minor_version,
)
from hangwatch_operator.operator_metrics import WEBHOOK_REQUESTS
from hangwatch_operator.policies import (
    GROUP,
    PLURAL,
    SPARK_ROLE_LABEL,
    VERSION,
    InvalidPolicyError,
    Policy,
    matching_policy,
    parse_policy,
)
from hangwatch_operator.settings import InjectionMode, OperatorSettings, SettingsError
from hangwatch_operator.webhook_configuration import WEBHOOK_ID

SETTINGS_KEY = "hangwatch_settings"
"""Memo key of an `OperatorSettings` passed in by whoever starts the operator."""
CONTEXT_KEY = "hangwatch_injection"
"""Memo key of the `InjectionContext` built at startup."""

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class InjectionContext:
    """What every admission request needs and startup works out once."""

    settings: OperatorSettings
    server_minor: int | None
    generated_tls_dir: Path | None = None


class AdmissionServer(kopf.WebhookServer):
    """kopf's HTTPS webhook server that also copies `request.namespace` onto the object.

    On CREATE the API server may send a pod without `metadata.namespace` (the namespace
    is in the URL), and kopf passes handlers only the object, so policies could not be
    looked up by namespace.
    """

    async def __call__(self, fn: kopf.WebhookFn) -> AsyncIterator[kopf.WebhookClientConfig]:
        async def with_namespace(
            request: Any,
            *,
            webhook: str | None = None,
            headers: dict[str, str] | None = None,
            sslpeer: dict[str, Any] | None = None,
        ) -> Any:
            _fill_namespace(request)
            return await fn(request, webhook=webhook, headers=headers, sslpeer=sslpeer)

        async for config in super().__call__(with_namespace):
            yield config


@kopf.on.startup()
async def configure(settings: kopf.OperatorSettings, memo: kopf.Memo, **_: Any) -> None:
    """Configure the webhook server and resolve what `injectionMode: auto` means here."""
    try:
        ours = memo.get(SETTINGS_KEY) or OperatorSettings.from_environ(os.environ)
    except SettingsError as exc:  # stop at once: a retry cannot fix the environment
        raise kopf.PermanentError(f"invalid operator settings: {exc}") from exc
    if not isinstance(ours, OperatorSettings):
        raise kopf.PermanentError(f"memo[{SETTINGS_KEY!r}] must be OperatorSettings")
    server, tls_dir = _webhook_server(ours)
    settings.admission.server = server
    settings.admission.managed = ours.webhook_managed_configuration
    minor = None
    if ours.injection_mode is InjectionMode.AUTO:
        minor = await asyncio.to_thread(_fetch_server_minor)
    server_version = "unknown" if minor is None else f"1.{minor}"
    log.info("Injection mode %s (API server %s).", ours.injection_mode, server_version)
    memo[CONTEXT_KEY] = InjectionContext(ours, minor, tls_dir)


@kopf.on.cleanup()
def remove_generated_certificates(memo: kopf.Memo, **_: Any) -> None:
    context = memo.get(CONTEXT_KEY)
    if isinstance(context, InjectionContext) and context.generated_tls_dir is not None:
        shutil.rmtree(context.generated_tls_dir, ignore_errors=True)


@kopf.index(GROUP, VERSION, PLURAL)
def policies_by_namespace(body: kopf.Body, **_: Any) -> dict[str, Policy]:
    """namespace -> the valid policies in it; an invalid policy is logged and left out."""
    try:
        policy = parse_policy(body)
    except InvalidPolicyError as exc:
        raise kopf.PermanentError(f"invalid ProducerHealthPolicy: {exc}") from exc
    return {policy.namespace: policy}


@kopf.on.mutate(
    "",
    "v1",
    "pods",
    id=WEBHOOK_ID,
    operations=["CREATE"],
    ignore_failures=True,
    side_effects=False,
    labels={SPARK_ROLE_LABEL: kopf.PRESENT},
)
def inject_sidecar(
    body: kopf.Body,
    patch: kopf.Patch,
    memo: kopf.Memo,
    warnings: list[str],
    logger: logging.Logger | logging.LoggerAdapter[Any],
    policies_by_namespace: kopf.Index[str, Policy] | None = None,
    **_: Any,
) -> None:
    """Add the hangwatch sidecar to a Spark pod a policy covers (never twice).

    Fails open: whatever goes wrong, the pod is admitted unchanged with a warning, so
    that hangwatch can never be the reason a Spark executor does not start.
    """
    context: InjectionContext = memo[CONTEXT_KEY]
    pod = dict(body)
    namespace = (pod.get("metadata") or {}).get("namespace") or ""
    in_namespace: Iterable[Policy] = (
        policies_by_namespace.get(namespace, []) if policies_by_namespace else []
    )
    try:
        policy = matching_policy(pod, in_namespace)
        if policy is None:
            WEBHOOK_REQUESTS.labels("skipped").inc()
            return
        mode = resolve_injection_mode(
            policy.sidecar.injection_mode, context.settings, context.server_minor
        )
        ops = build_sidecar_patch(pod, policy, context.settings, mode)
    except InjectionConflictError as exc:
        WEBHOOK_REQUESTS.labels("skipped").inc()
        warnings.append(f"hangwatch: sidecar not injected: {exc}")
        logger.warning("Sidecar not injected: %s", exc)
        return
    except Exception as exc:  # fail open, loudly: never block a pod on a hangwatch bug
        WEBHOOK_REQUESTS.labels("error").inc()
        warnings.append(f"hangwatch: sidecar not injected: internal error ({exc!r})")
        logger.exception("Sidecar injection failed; the pod is admitted unchanged.")
        return
    WEBHOOK_REQUESTS.labels("injected" if ops else "skipped").inc()
    if ops:
        patch.fns.append(functools.partial(apply_add_ops, ops=ops))
        logger.info("Injecting the hangwatch sidecar (policy %s, %s mode).", policy.name, mode)


def _webhook_server(settings: OperatorSettings) -> tuple[AdmissionServer, Path | None]:
    """kopf's server with the chart's certificate files, or freshly generated ones."""
    common: dict[str, Any] = {
        "addr": settings.webhook_listen_address,
        "port": settings.webhook_port,
        "host": settings.webhook_host,
    }
    if settings.webhook_cert_file is not None and settings.webhook_key_file is not None:
        server = AdmissionServer(
            certfile=settings.webhook_cert_file,
            pkeyfile=settings.webhook_key_file,
            cafile=settings.webhook_ca_file,
            **common,
        )
        return server, None
    log.warning("No webhook certificate configured: generating a self-signed one.")
    hosts = [settings.webhook_host or "localhost", "localhost", "127.0.0.1"]
    tls_dir = Path(tempfile.mkdtemp(prefix="hangwatch-webhook-"))
    ca, cert, key = generate_webhook_certificates(hosts).write(tls_dir)
    return AdmissionServer(certfile=cert, pkeyfile=key, cafile=ca, **common), tls_dir


def _fetch_server_minor() -> int | None:
    """The API server's 1.x minor version, or None (then `auto` falls back to legacy)."""
    try:
        try:
            kubernetes.config.load_incluster_config()  # type: ignore[no-untyped-call]
        except kubernetes.config.ConfigException:
            kubernetes.config.load_kube_config()  # type: ignore[no-untyped-call]
        with kubernetes.client.ApiClient() as api:
            info = kubernetes.client.VersionApi(api).get_code()
    except (
        kubernetes.config.ConfigException,
        kubernetes.client.ApiException,
        urllib3.exceptions.HTTPError,
        OSError,
        ValueError,  # a /version answer the client cannot parse (pydantic ValidationError)
    ) as exc:
        log.warning("Cannot read the API server version (%s); using legacy injection.", exc)
        return None
    return server_minor_version(str(info.major), str(info.minor))


def _fill_namespace(request: Any) -> None:
    payload = request.get("request") if isinstance(request, dict) else None
    obj = payload.get("object") if isinstance(payload, dict) else None
    if isinstance(obj, dict) and payload and payload.get("namespace"):
        meta = obj.setdefault("metadata", {})
        if isinstance(meta, dict) and not meta.get("namespace"):
            meta["namespace"] = payload["namespace"]
