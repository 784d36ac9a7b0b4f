"""kopf wiring of injection: serve the webhook on kopf's HTTPS server with current policies.

Thin by design. `configure` (at startup) starts this replica's own list and watch of
the ProducerHealthPolicies (`policy_watch`; each policy parsed once per generation,
invalid ones logged and left out) and waits until they are listed, sets up kopf's
webhook server, `AdmissionServer`, with the chart's certificate files or a
self-signed set for local runs, reads the API server version once for
`injectionMode: auto`, and hands the server an `Injector` holding the live
`PolicyStore.by_namespace`. The policies do not come from a kopf index: kopf peering
pauses every handler and freezes every index of a replica that does not lead, while
every replica serves admission; the watch is a plain task that peering never pauses.

The injection path is `AdmissionServer`'s own: on kopf's server, certificate and port,
requests to the injection webhook's path never enter kopf's admission machinery. An
async function reads the body, `admission.read_review` parses it, `admission.admit`
decides with the policies of the pod's namespace and `admission.response_body` answers
with the JSON Patch operations `injection` computed: no whole-pod diff, no thread hop.
kopf still registers the webhook (`inject_sidecar`: path, rules, object selector,
failure policy of the managed configuration) and serves every other path;
`inject_sidecar` itself runs only when kopf's machinery answers (another server or
tunnel), with the same decision, then kopf's diff.

Pod Security: for a pod whose policy asks for a feature some level forbids (the opt-in
process view), the injector reads the namespace's enforced level first
(`namespace_levels`, cached) and `admit` leaves out what that level forbids, with an
AdmissionReview warning; such admissions are also logged and posted as a Warning Event
on the policy (the pod has no uid yet at admission), at most once per policy and
namespace per `renotify_seconds`, with the number of pods since (a dry run is only
logged: the webhook declares no side effects). Pods of other
policies cost no read.

Logging costs nothing per request at INFO: every admission is counted in
`hangwatch_operator_webhook_requests_total{result=injected|skipped|error|malformed}`,
each one is a DEBUG line, injections are an INFO line at most once a minute (with
the count since the last), and conflicts, malformed requests and errors are always
logged. Whatever happens the pod is admitted (never a 500), see `admission`. What
start-up built is kept out of the cyclic garbage collector (`settle_garbage_collector`),
whose full passes would otherwise pause admissions for tens of milliseconds.
Settings come from the memo key `hangwatch_settings` (tests) or from
`HANGWATCH_OPERATOR_*` variables.
"""

from __future__ import annotations

import asyncio
import functools
import gc
import logging
import os
import shutil
import tempfile
import time
from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp.web
import kopf
import kubernetes
import urllib3

from hangwatch.pod_security import Level
from hangwatch_operator.admission import (
    ADMISSION_V1,
    INTERNAL_ERROR,
    MAX_REVIEW_BYTES,
    Admission,
    Malformed,
    Result,
    Review,
    admit,
    malformed,
    needs_level,
    read_review,
    response_body,
    review_from,
)
from hangwatch_operator.certificates import generate_webhook_certificates
from hangwatch_operator.injection import apply_add_ops, server_minor_version
from hangwatch_operator.kube_api import KubeApi, KubeApiError
from hangwatch_operator.namespace_levels import NamespaceLevels
from hangwatch_operator.operator_metrics import WEBHOOK_REQUESTS
from hangwatch_operator.policies import (
    PRODUCER_LABEL,
    PRODUCER_LABEL_VALUE,
    SPARK_ROLE_LABEL,
    Policy,
)
from hangwatch_operator.policy_watch import PolicyWatch, watch_plan
from hangwatch_operator.reporting import (
    LEFT_OUT_REASON,
    event_body,
    left_out_message,
    policy_reference,
)
from hangwatch_operator.settings import OperatorSettings, SettingsError
from hangwatch_operator.webhook_configuration import PRODUCER_WEBHOOK_ID, WEBHOOK_ID

SETTINGS_KEY = "hangwatch_settings"
"""Memo key of an `OperatorSettings` passed in by whoever starts the operator."""
CONTEXT_KEY = "hangwatch_injection"
"""Memo key of the `Injector` built at startup."""
POLICY_WATCH_KEY = "hangwatch_policy_watch"
"""Memo key of the webhook's `PolicyWatch` (started at startup, stopped at cleanup)."""
INJECTION_LOG_INTERVAL_SECONDS = 60.0
"""At most one INFO line about injected pods per interval (each one is a DEBUG line)."""

SETTLE_SECONDS = 60.0
"""When the operator's start-up is over and what it built is frozen (see below)."""

log = logging.getLogger(__name__)
_COUNTERS = {result: WEBHOOK_REQUESTS.labels(result.value) for result in Result}


@dataclass
class Injector:
    """What every admission request needs (startup works it out once), and its logging."""

    settings: OperatorSettings
    server_minor: int | None
    policies: Mapping[str, Iterable[Policy]] = field(default_factory=dict)
    """namespace -> its valid policies: the live `PolicyStore.by_namespace` of this
    replica's own policy watch (`policy_watch`), current whether or not it leads."""
    generated_tls_dir: Path | None = None
    levels: NamespaceLevels | None = None
    """The namespaces' enforced Pod Security levels; None: every one counts as restricted."""
    api: KubeApi | None = None
    """Where Events about features left out go; None: logged only."""
    _injected_since_log: int = 0
    _next_injection_log: float = 0.0
    _left_out: dict[tuple[str, str], tuple[float, int]] = field(default_factory=dict)
    """(namespace, policy) -> (when the next Event is due, pods left out since the last)."""
    _posting: set[asyncio.Task[None]] = field(default_factory=set)

    def answer(self, data: bytes | None, level: Level = Level.RESTRICTED) -> bytes:
        """The AdmissionReview answering the request body `data` (None: too large), for a
        namespace enforcing `level` (`answer_review` after `level_for` looks it up)."""
        return self.answer_review(read_review(data), level)

    def answer_review(self, review: Review | Malformed, level: Level) -> bytes:
        admission = self.admission(review, f"uid {review.uid or '-'}", level)
        return response_body(review.api_version, review.uid, admission)

    async def level_for(self, review: Review | Malformed) -> Level:
        """The Pod Security level `review`'s namespace enforces, read only when its policy
        asks for a feature some level forbids (else restricted: nothing to leave out)."""
        if not isinstance(review, Review) or self.levels is None:
            return Level.RESTRICTED
        if not needs_level(review, self.policies.get(review.namespace, ())):
            return Level.RESTRICTED
        return await self.levels.level(review.namespace)

    def admission(
        self, review: Review | Malformed, unnamed: str, level: Level = Level.RESTRICTED
    ) -> Admission:
        """The answer to `review`, recorded (`unnamed`: how a malformed one is named)."""
        if isinstance(review, Malformed):
            admission = malformed(review)
            self.record(admission, unnamed, review.problem)
            return admission
        admission = self.decide(review, level)
        self.record(admission, review.pod_name)
        return admission

    def decide(self, review: Review, level: Level = Level.RESTRICTED) -> Admission:
        return admit(
            review,
            self.policies.get(review.namespace, ()),
            self.settings,
            self.server_minor,
            level,
        )

    def record(self, admission: Admission, pod: str, problem: str = "") -> None:
        """Count the admission; log what must be seen, the rest at DEBUG."""
        _COUNTERS[admission.result].inc()
        result = admission.result
        if result is Result.INJECTED:
            self._injected(admission, pod)
        elif result is Result.ERROR:
            log.error(
                "Sidecar injection failed for pod %s; the pod is admitted unchanged.",
                pod,
                exc_info=admission.error,
            )
        elif result is Result.MALFORMED:
            log.warning("Malformed admission request (%s): %s; admitted unchanged.", pod, problem)
        elif admission.warnings:  # a conflict
            log.warning("Sidecar not injected into pod %s: %s", pod, admission.warnings[0])
        elif log.isEnabledFor(logging.DEBUG):
            log.debug("Pod %s admitted unchanged (no policy covers it, or already injected).", pod)

    def _injected(self, admission: Admission, pod: str) -> None:
        if admission.left_out:
            self._features_left_out(admission, pod)
        self._injected_since_log += 1
        now = time.monotonic()
        if now >= self._next_injection_log:
            log.info(
                "Injected the hangwatch sidecar into pod %s (policy %s, %s mode); "
                "%d pods injected since the last such line.",
                pod,
                admission.policy,
                admission.mode,
                self._injected_since_log,
            )
            self._injected_since_log = 0
            self._next_injection_log = now + INJECTION_LOG_INTERVAL_SECONDS
        elif log.isEnabledFor(logging.DEBUG):
            log.debug(
                "Injecting the hangwatch sidecar into pod %s (policy %s).", pod, admission.policy
            )

    def _features_left_out(self, admission: Admission, pod: str) -> None:
        """Log and post an Event on the policy, at most once per `renotify_seconds` per
        policy and namespace (with the count of pods since); a dry run is logged only."""
        namespace = pod.split("/", 1)[0]
        if admission.dry_run:
            log.info("Dry run: %s", left_out_message(admission.warnings, pod, 1))
            return
        key = (namespace, admission.policy)
        now = time.monotonic()
        due, count = self._left_out.get(key, (0.0, 0))
        count += 1
        if now < due:
            self._left_out[key] = (due, count)
            return
        self._left_out[key] = (now + self.settings.renotify_seconds, 0)
        message = left_out_message(admission.warnings, pod, count)
        log.warning("%s", message)
        policy = next(
            (p for p in self.policies.get(namespace, ()) if p.name == admission.policy), None
        )
        if self.api is None or policy is None:
            return
        body = event_body(
            policy_reference(policy),
            kind="Warning",
            reason=LEFT_OUT_REASON,
            message=message,
            now=time.time(),
            suffix=f"{time.time_ns():x}",
        )
        task = asyncio.get_running_loop().create_task(self._post(body))
        self._posting.add(task)
        task.add_done_callback(self._posting.discard)

    async def _post(self, body: dict[str, Any]) -> None:
        assert self.api is not None
        try:
            await self.api.create_event(body)
        except KubeApiError as exc:
            log.warning("Event %s not posted: %s", body["reason"], exc)


class AdmissionServer(kopf.WebhookServer):
    """kopf's HTTPS webhook server, answering the injection webhook's path itself.

    Requests to `/inject-sidecar` go to the `Injector`; any other path (and every
    request before an injector is set) goes to kopf's admission machinery, with
    `request.namespace` copied onto the object: on CREATE the API server may send a
    pod without `metadata.namespace`, and kopf passes handlers only the object.
    """

    def __init__(self, *, injector: Injector | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.injector = injector

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

    # kopf's server calls `self._serve(fn, request)` for every request (a staticmethod
    # there); the HTTPS tests fail if a kopf release stops doing so.
    async def _serve(  # type: ignore[override]
        self, fn: kopf.WebhookFn, request: aiohttp.web.Request
    ) -> aiohttp.web.Response:
        injector = self.injector
        if injector is None or request.match_info.get("id") != WEBHOOK_ID:
            response: aiohttp.web.Response = await super()._serve(fn, request)
            return response
        try:
            review = read_review(await _read_capped(request, MAX_REVIEW_BYTES))
            body = injector.answer_review(review, await injector.level_for(review))
        except Exception as exc:  # noqa: BLE001 - never a 500: fail open, logged by record
            admission = Admission(Result.ERROR, warnings=(INTERNAL_ERROR,), error=exc)
            injector.record(admission, "unknown")
            body = response_body(ADMISSION_V1, "", admission)
        return aiohttp.web.Response(body=body, content_type="application/json")


async def _read_capped(request: aiohttp.web.Request, cap: int) -> bytes | None:
    """The request body, or None when it is longer than `cap` bytes.

    A longer body is still read (and dropped) up to 4 x `cap`, so that the client gets
    its answer rather than a reset connection; past that, reading stops.
    """
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.content.iter_any():
        size += len(chunk)
        if size <= cap:
            chunks.append(chunk)
        elif size > 4 * cap:
            break
    return b"".join(chunks) if size <= cap else None


@kopf.on.startup()
async def configure(settings: kopf.OperatorSettings, memo: kopf.Memo, **_: Any) -> None:
    """Load the policies (own list and watch), configure the webhook server and resolve
    what `injectionMode: auto` means here. The webhook listens only once the policies
    are listed: until then this replica is not ready (the chart's readiness probe
    connects to the webhook port), and kopf's start-up waits."""
    try:
        ours = memo.get(SETTINGS_KEY) or OperatorSettings.from_environ(os.environ)
    except SettingsError as exc:  # stop at once: a retry cannot fix the environment
        raise kopf.PermanentError(f"invalid operator settings: {exc}") from exc
    if not isinstance(ours, OperatorSettings):
        raise kopf.PermanentError(f"memo[{SETTINGS_KEY!r}] must be OperatorSettings")
    watch = memo.get(POLICY_WATCH_KEY)
    if not isinstance(watch, PolicyWatch):  # a retried start-up keeps its watch
        watch = PolicyWatch(await KubeApi.connect(), watch_plan(ours.watch_namespaces))
        memo[POLICY_WATCH_KEY] = watch
        watch.start()
    # read whatever the operator's mode: a policy may force native, which a server older
    # than 1.28 would refuse for every pod (`injection.resolve_injection_mode`)
    minor = await asyncio.to_thread(_fetch_server_minor)
    server_version = "unknown" if minor is None else f"1.{minor}"
    log.info("Injection mode %s (API server %s).", ours.injection_mode, server_version)
    if not watch.ready.is_set():
        log.info("The webhook listens once the ProducerHealthPolicies are listed.")
        await watch.ready.wait()
    injector = Injector(ours, minor, watch.store.by_namespace, api=watch.api)
    injector.levels = NamespaceLevels(watch.api.get_namespace, ours.pod_security_default)
    server, injector.generated_tls_dir = _webhook_server(ours, injector)
    settings.admission.server = server
    settings.admission.managed = ours.webhook_managed_configuration
    _quiet_access_log()
    memo[CONTEXT_KEY] = injector
    gc.freeze()  # see `settle_garbage_collector`
    asyncio.get_running_loop().call_later(SETTLE_SECONDS, settle_garbage_collector)


def settle_garbage_collector() -> None:
    """Keep what start-up built out of the cyclic garbage collector from now on.

    Its full passes otherwise walk every object of the process (kopf, the Kubernetes
    client and the models it builds on first use, aiohttp) and stop every admission
    for 50-250 ms, several times during the first minute. Called at start-up (freezing
    what the imports loaded) and once `SETTLE_SECONDS` later, after one last full
    collection. Objects frozen then and later dropped in a reference cycle are not
    reclaimed: at most what existed at that moment, once; later objects are collected
    as usual.
    """
    started = time.perf_counter()
    gc.collect()
    gc.freeze()
    log.info(
        "Start-up settled: %d long-lived objects kept out of the garbage collector "
        "(last full collection %.0f ms).",
        gc.get_freeze_count(),
        (time.perf_counter() - started) * 1000,
    )


@kopf.on.cleanup()
async def stop_webhook(memo: kopf.Memo, **_: Any) -> None:
    """Stop the policy watch; remove a generated certificate."""
    watch = memo.get(POLICY_WATCH_KEY)
    if isinstance(watch, PolicyWatch):
        await watch.stop()
    injector = memo.get(CONTEXT_KEY)
    if isinstance(injector, Injector) and injector.generated_tls_dir is not None:
        shutil.rmtree(injector.generated_tls_dir, ignore_errors=True)


async def inject_sidecar(
    body: kopf.Body,
    patch: kopf.Patch,
    memo: kopf.Memo,
    warnings: list[str],
    **_: Any,
) -> None:
    """The injection webhook as kopf's handler (registered below for the managed
    configuration: path, rules, object selector, failure policy).

    `AdmissionServer` answers this webhook's path itself, so this runs only when kopf
    does (another server or tunnel): the same decision, then kopf diffs the pod.
    """
    injector: Injector = memo[CONTEXT_KEY]
    request = {"uid": "kopf", "operation": "CREATE", "object": dict(body)}
    review = review_from(
        {"apiVersion": ADMISSION_V1, "kind": "AdmissionReview", "request": request}
    )
    level = await injector.level_for(review)
    admission = injector.admission(review, f"uid {body.metadata.uid or '-'}", level)
    warnings.extend(admission.warnings)
    if admission.ops:
        patch.fns.append(functools.partial(apply_add_ops, ops=list(admission.ops)))


def register_injection_webhook(
    webhook_id: str, handler: Callable[..., Any], *, producer: bool = False
) -> None:
    """Register `handler` with kopf as the injection webhook `webhook_id`: pod CREATE
    only, failure policy Ignore, no side effects; pods with a spark-role label, or with
    `producer` the opted-in pods without one (`webhook_configuration.OBJECT_SELECTORS`)."""
    labels: dict[str, Any] = (
        {PRODUCER_LABEL: PRODUCER_LABEL_VALUE, SPARK_ROLE_LABEL: kopf.ABSENT}
        if producer
        else {SPARK_ROLE_LABEL: kopf.PRESENT}
    )
    kopf.on.mutate(
        "",
        "v1",
        "pods",
        id=webhook_id,
        operations=["CREATE"],
        ignore_failures=True,
        side_effects=False,
        labels=labels,
    )(handler)


register_injection_webhook(WEBHOOK_ID, inject_sidecar)
register_injection_webhook(PRODUCER_WEBHOOK_ID, inject_sidecar, producer=True)


def _webhook_server(
    settings: OperatorSettings, injector: Injector
) -> tuple[AdmissionServer, Path | None]:
    """kopf's server with the chart's certificate files, or freshly generated ones."""
    common: dict[str, Any] = {
        "addr": settings.webhook_listen_address,
        "port": settings.webhook_port,
        "host": settings.webhook_host,
        "injector": injector,
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


def _quiet_access_log() -> None:
    """aiohttp logs every request at INFO; keep those lines for debug runs only."""
    access = logging.getLogger("aiohttp.access")
    if not access.isEnabledFor(logging.DEBUG):
        access.setLevel(logging.WARNING)


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
