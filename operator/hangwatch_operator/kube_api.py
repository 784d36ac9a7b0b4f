"""The few Kubernetes API calls the operator makes itself, on the official asyncio client.

Used by `actuation` (delete pods, read and patch nodes), `remediation` (post Events,
patch policy status), `replica_leases` (list, create and replace Leases), built
once by `handlers` at start-up, from the in-cluster service account or, outside a
cluster, the kubeconfig (the same sources kopf logs in with); and by `policy_watch`
(list and watch ProducerHealthPolicies for the webhook, with a client of its own that
`webhook` builds at start-up, which `namespace_levels` also uses to read a
namespace's Pod Security labels) and by `pod_watch` (list and watch the pods the
webhook labelled, for remediation, with a client of its own).
Responses are read as plain JSON, not as generated models, and every failure becomes
`KubeApiError` with the HTTP status, so callers handle one exception type. Patches are
JSON merge patches, which every API server and resource accepts. A watch yields the raw lines
of the stream (one event each); `policy_store` reads them.
"""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator
from typing import Any

import aiohttp
from kubernetes.aio import client, config

from hangwatch_operator.policies import GROUP, PLURAL, VERSION

MERGE_PATCH = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"
REQUEST_TIMEOUT_SECONDS = 10.0
"""Per API call. The API server answers in milliseconds; a 10 s wait means it is in
trouble, and the next poll round retries anyway."""
WATCH_GRACE_SECONDS = 30
"""How much longer than its server-side timeout a watch may last before the client
ends it: covers a server that does not end watches and a connection that died quietly."""


class KubeApiError(Exception):
    """A Kubernetes API call failed; `status` is the HTTP status (0: no answer)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"HTTP {status}: {message}" if status else message)
        self.status = status


class KubeApi:
    """Async calls against one API server; `close()` when done."""

    def __init__(self, api_client: client.ApiClient) -> None:
        self._client = api_client
        self._core = client.CoreV1Api(api_client)
        self._custom = client.CustomObjectsApi(api_client)
        self._coordination = client.CoordinationV1Api(api_client)

    @classmethod
    async def connect(cls, kubeconfig: str | None = None) -> KubeApi:
        """Credentials from `kubeconfig` if given, else the pod's service account, else the
        default kubeconfig (`KUBECONFIG`, ~/.kube/config)."""
        configuration = client.Configuration()
        if kubeconfig is not None:
            await config.load_kube_config(
                config_file=kubeconfig, client_configuration=configuration
            )  # type: ignore[no-untyped-call]
            return cls(client.ApiClient(configuration))
        try:
            config.load_incluster_config(client_configuration=configuration)  # type: ignore[no-untyped-call]
        except config.ConfigException:
            await config.load_kube_config(client_configuration=configuration)  # type: ignore[no-untyped-call]
        return cls(client.ApiClient(configuration))

    async def close(self) -> None:
        await self._client.close()  # type: ignore[no-untyped-call]

    async def delete_pod(
        self, namespace: str, name: str, uid: str, grace_seconds: int | None
    ) -> dict[str, Any]:
        """Delete a pod, only if it is still the one with `uid` (not a namesake)."""
        options = client.V1DeleteOptions(
            grace_period_seconds=grace_seconds,
            preconditions=client.V1Preconditions(uid=uid) if uid else None,
        )
        return await self._json(
            self._core.delete_namespaced_pod_without_preload_content(
                name, namespace, body=options, _request_timeout=REQUEST_TIMEOUT_SECONDS
            )
        )

    async def get_node(self, name: str) -> dict[str, Any]:
        return await self._json(
            self._core.read_node_without_preload_content(
                name, _request_timeout=REQUEST_TIMEOUT_SECONDS
            )
        )

    async def get_namespace(self, name: str, timeout_seconds: float) -> dict[str, Any]:
        return await self._json(
            self._core.read_namespace_without_preload_content(
                name, _request_timeout=timeout_seconds
            )
        )

    async def patch_node(self, name: str, patch: dict[str, Any]) -> dict[str, Any]:
        return await self._json(
            self._core.patch_node_without_preload_content(
                name, patch, _content_type=MERGE_PATCH, _request_timeout=REQUEST_TIMEOUT_SECONDS
            )
        )

    async def json_patch_node(self, name: str, operations: list[dict[str, Any]]) -> dict[str, Any]:
        """RFC 6902 operations, applied by the API server to the node as it is then."""
        return await self._json(
            self._core.patch_node_without_preload_content(
                name,
                operations,
                _content_type=JSON_PATCH,
                _request_timeout=REQUEST_TIMEOUT_SECONDS,
            )
        )

    async def create_event(self, body: dict[str, Any]) -> dict[str, Any]:
        namespace = body["metadata"]["namespace"]
        return await self._json(
            self._core.create_namespaced_event_without_preload_content(
                namespace, _event_model(body), _request_timeout=REQUEST_TIMEOUT_SECONDS
            )
        )

    async def patch_policy_status(
        self, namespace: str, name: str, status: dict[str, Any]
    ) -> dict[str, Any]:
        return await self._json(
            self._custom.patch_namespaced_custom_object_status_without_preload_content(
                GROUP,
                VERSION,
                namespace,
                PLURAL,
                name,
                {"status": status},
                _content_type=MERGE_PATCH,
                _request_timeout=REQUEST_TIMEOUT_SECONDS,
            )
        )

    async def list_leases(self, namespace: str, label_selector: str) -> list[dict[str, Any]]:
        """The Leases of `namespace` carrying `label_selector` (a few dozen: one page)."""
        found = await self._json(
            self._coordination.list_namespaced_lease_without_preload_content(
                namespace, label_selector=label_selector, _request_timeout=REQUEST_TIMEOUT_SECONDS
            )
        )
        items = found.get("items")
        return [i for i in items if isinstance(i, dict)] if isinstance(items, list) else []

    async def write_lease(self, namespace: str, body: dict[str, Any]) -> dict[str, Any]:
        """Create the Lease, or replace it if `body` carries the resourceVersion it was read
        at (HTTP 409 when someone wrote it since, or created it first)."""
        name = body["metadata"]["name"]
        model = client.V1Lease.from_dict(body)
        if model is None:
            raise KubeApiError(0, "an empty Lease body")
        if body["metadata"].get("resourceVersion"):
            call = self._coordination.replace_namespaced_lease_without_preload_content(
                name, namespace, model, _request_timeout=REQUEST_TIMEOUT_SECONDS
            )
        else:
            call = self._coordination.create_namespaced_lease_without_preload_content(
                namespace, model, _request_timeout=REQUEST_TIMEOUT_SECONDS
            )
        return await self._json(call)

    async def list_policies(
        self, namespace: str | None, limit: int, continue_token: str | None = None
    ) -> dict[str, Any]:
        """One page of ProducerHealthPolicies (in `namespace`, or in all namespaces)."""
        options: dict[str, Any] = {"limit": limit, "_request_timeout": REQUEST_TIMEOUT_SECONDS}
        if continue_token:
            options["_continue"] = continue_token
        return await self._json(self._list_call(namespace, options))

    async def watch_policies(
        self, namespace: str | None, resource_version: str, timeout_seconds: int
    ) -> AsyncGenerator[bytes, None]:
        """The lines of a watch of ProducerHealthPolicies from `resource_version`, with
        bookmarks, until the server ends it after `timeout_seconds` (the client gives up
        `WATCH_GRACE_SECONDS` later: a server that ends nothing, or a dead connection)."""
        options = _watch_options(resource_version, timeout_seconds)
        async for line in self._lines(self._list_call(namespace, options)):
            yield line

    async def list_pods(
        self,
        namespace: str | None,
        limit: int,
        continue_token: str | None = None,
        *,
        label_selector: str,
    ) -> dict[str, Any]:
        """One page of the pods carrying `label_selector` (in `namespace`, or in all)."""
        options: dict[str, Any] = {
            "limit": limit,
            "label_selector": label_selector,
            "_request_timeout": REQUEST_TIMEOUT_SECONDS,
        }
        if continue_token:
            options["_continue"] = continue_token
        return await self._json(self._pod_call(namespace, options))

    async def watch_pods(
        self,
        namespace: str | None,
        resource_version: str,
        timeout_seconds: int,
        *,
        label_selector: str,
    ) -> AsyncGenerator[bytes, None]:
        """The lines of a watch of the pods carrying `label_selector`, as `watch_policies`."""
        options = _watch_options(resource_version, timeout_seconds)
        options["label_selector"] = label_selector
        async for line in self._lines(self._pod_call(namespace, options)):
            yield line

    async def _lines(self, call: Any) -> AsyncGenerator[bytes, None]:
        """The non-empty lines of a watch stream until it ends."""
        response = await self._response(call)
        try:
            async for line in response.content:
                if line.strip():
                    yield line
        except TimeoutError:
            return  # the client's deadline: the watch ends as if the server had ended it
        except (aiohttp.ClientError, ValueError) as exc:
            # ValueError: a line longer than the client's buffer (2 MiB)
            raise KubeApiError(0, f"watch interrupted: {exc!r}") from exc
        finally:
            response.release()

    def _pod_call(self, namespace: str | None, options: dict[str, Any]) -> Any:
        if namespace is None:
            return self._core.list_pod_for_all_namespaces_without_preload_content(**options)
        return self._core.list_namespaced_pod_without_preload_content(namespace, **options)

    def _list_call(self, namespace: str | None, options: dict[str, Any]) -> Any:
        """A list (or, with `watch`, a watch) of the policies, cluster-wide or in one namespace."""
        if namespace is None:
            return self._custom.list_cluster_custom_object_without_preload_content(
                GROUP, VERSION, PLURAL, **options
            )
        return self._custom.list_namespaced_custom_object_without_preload_content(
            GROUP, VERSION, namespace, PLURAL, **options
        )

    @staticmethod
    async def _response(call: Any) -> aiohttp.ClientResponse:
        """The response of `call` with a success status (else `KubeApiError`)."""
        try:
            response: aiohttp.ClientResponse = await call
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise KubeApiError(0, f"no answer from the API server: {exc!r}") from exc
        except client.ApiException as exc:
            raise KubeApiError(exc.status or 0, str(exc.reason or exc)) from exc
        if response.status >= 400:
            try:
                raw = await response.read()
            except (aiohttp.ClientError, TimeoutError):
                raw = b""
            finally:
                response.release()
            raise KubeApiError(response.status, _message(raw))
        return response

    @staticmethod
    async def _json(call: Any) -> dict[str, Any]:
        response = await KubeApi._response(call)
        try:
            raw = await response.read()
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise KubeApiError(0, f"no answer from the API server: {exc!r}") from exc
        finally:
            response.release()
        try:
            parsed = json.loads(raw) if raw else {}
        except ValueError as exc:
            raise KubeApiError(response.status, "an answer that is not JSON") from exc
        return parsed if isinstance(parsed, dict) else {}


def _watch_options(resource_version: str, timeout_seconds: int) -> dict[str, Any]:
    """A watch from `resource_version` with bookmarks, ended by the server after
    `timeout_seconds` and by the client `WATCH_GRACE_SECONDS` later."""
    return {
        "watch": True,
        "allow_watch_bookmarks": True,
        "resource_version": resource_version,
        "timeout_seconds": timeout_seconds,
        "_request_timeout": float(timeout_seconds + WATCH_GRACE_SECONDS),
    }


def _event_model(body: dict[str, Any]) -> client.CoreV1Event:
    try:
        event = client.CoreV1Event.from_dict(body)
    except ValueError as exc:  # pydantic's ValidationError: a field the model refuses
        raise KubeApiError(0, f"an Event body the client refuses: {exc}") from exc
    if event is None:
        raise KubeApiError(0, "an empty Event body")
    return event


def _message(raw: bytes) -> str:
    try:
        parsed = json.loads(raw)
    except ValueError:
        return raw.decode(errors="replace")[:200]
    if isinstance(parsed, dict) and parsed.get("message"):
        return str(parsed["message"])
    return raw.decode(errors="replace")[:200]
