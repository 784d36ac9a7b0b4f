"""The webhook's policy watch against answers a real API server gives only by accident.

`policy_watch.PolicyWatch` with the real `KubeApi` (the official asyncio client) talks
HTTP to a scripted server on loopback that answers each list and watch request with
the next answer of its script: an HTTP error, a list page, or a watch stream of
lines (then the end of the stream, or silence). tests/kube runs the same watch against
kube-apiserver (real lists, watches, bookmarks and 410 Gone); here are the failures
that cannot be produced there on demand.

Covers: a failing list (500) is retried after a backoff, a paginated list is read to
its end (`continue`) and the watch starts from its resourceVersion with bookmarks on;
the webhook's `ready` waits for the first complete list; events and bookmarks move
the resourceVersion the next watch resumes from; ERROR 410 in the stream and a 410
status of the watch request both relist at once, and the relist drops a policy
deleted meanwhile while the old content stays in use until then; a broken stream
(a line that is not JSON) and a watch ended at once back off and resume from the last
resourceVersion without relisting; consecutive failures back off longer and longer
(0.25 s doubling with jitter 0); `hangwatch_operator_webhook_policy_watch_up` is 0
while failing and 1 again after; with two namespaces each is listed and watched on
its own path, and the watch is not ready while one of them is forbidden (403).
"""

from __future__ import annotations

import asyncio
import itertools
import json
import time
from collections import deque
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp.web

from hangwatch_operator.kube_api import KubeApi
from hangwatch_operator.operator_metrics import REGISTRY
from hangwatch_operator.policy_watch import PolicyWatch, WatchPlan
from tests.operator.test_policy_store import body

PREFIX = "/apis/hangwatch.dev/v1alpha1"
ALL_NAMESPACES = WatchPlan((None,))
Answer = tuple[str, Any]
"""("status", (code, message)) | ("list", (items, resourceVersion, continue)) |
("stream", (lines, then)) with then "end" or "hang"."""


@dataclass
class Request:
    at: float
    kind: str
    namespace: str | None
    params: dict[str, str]


@dataclass
class ScriptedApi:
    """Answers per (list|watch, namespace) in order; an empty script lists nothing
    (500) and watches forever in silence."""

    scripts: dict[tuple[str, str | None], deque[Answer]] = field(default_factory=dict)
    requests: list[Request] = field(default_factory=list)

    def script(self, kind: str, namespace: str | None, *answers: Answer) -> None:
        self.scripts.setdefault((kind, namespace), deque()).extend(answers)

    def seen(self, kind: str, namespace: str | None = None) -> list[Request]:
        return [r for r in self.requests if (r.kind, r.namespace) == (kind, namespace)]

    async def handle(self, request: aiohttp.web.Request) -> aiohttp.web.StreamResponse:
        path = request.path.removeprefix(PREFIX)
        namespace = path.split("/")[2] if path.startswith("/namespaces/") else None
        kind = "watch" if request.query.get("watch") in ("true", "True", "1") else "list"
        self.requests.append(Request(time.monotonic(), kind, namespace, dict(request.query)))
        script = self.scripts.get((kind, namespace))
        if not script:
            if kind == "list":
                return _status(500, "no answer scripted")
            return await _stream(request, [], "hang")
        what, detail = script.popleft()
        if what == "status":
            return _status(*detail)
        if what == "list":
            items, version, token = detail
            meta = {"resourceVersion": version} | ({"continue": token} if token else {})
            return aiohttp.web.json_response({"items": items, "metadata": meta})
        return await _stream(request, *detail)


def _status(code: int, message: str) -> aiohttp.web.Response:
    status = {"kind": "Status", "status": "Failure", "code": code, "message": message}
    return aiohttp.web.json_response(status, status=code)


async def _stream(
    request: aiohttp.web.Request, lines: list[Any], then: str
) -> aiohttp.web.StreamResponse:
    response = aiohttp.web.StreamResponse()
    response.content_type = "application/json"
    await response.prepare(request)
    for line in lines:
        data = line if isinstance(line, bytes) else json.dumps(line).encode()
        await response.write(data + b"\n")
    if then == "hang":
        await asyncio.sleep(3600)
    return response


def added(obj: dict[str, Any], kind: str = "ADDED") -> dict[str, Any]:
    return {"type": kind, "object": obj}


def bookmark(version: str) -> dict[str, Any]:
    return {"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": version}}}


GONE_EVENT = {
    "type": "ERROR",
    "object": {"kind": "Status", "code": 410, "reason": "Expired", "message": "too old"},
}


@asynccontextmanager
async def watching(
    api: ScriptedApi, tmp_path: Path, plan: WatchPlan = ALL_NAMESPACES
) -> AsyncIterator[PolicyWatch]:
    app = aiohttp.web.Application()
    app.router.add_route("GET", "/{tail:.*}", api.handle)
    runner = aiohttp.web.AppRunner(app, handle_signals=False, shutdown_timeout=0.1)
    await runner.setup()
    site = aiohttp.web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "s", "cluster": {"server": f"http://127.0.0.1:{port}"}}],
        "users": [{"name": "u", "user": {"token": "scripted"}}],
        "contexts": [{"name": "s", "context": {"cluster": "s", "user": "u"}}],
        "current-context": "s",
    }
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(json.dumps(config))
    watch = PolicyWatch(await KubeApi.connect(str(kubeconfig)), plan, jitter=lambda: 0.0)
    watch.start()
    try:
        yield watch
    finally:
        await watch.stop()
        await runner.cleanup()


async def until(what: str, predicate: Callable[[], Any], seconds: float = 10.0) -> None:
    deadline = time.monotonic() + seconds
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"never happened: {what}")
        await asyncio.sleep(0.01)


def names(watch: PolicyWatch) -> dict[str, list[str]]:
    return {ns: sorted(p.name for p in ps) for ns, ps in watch.store.by_namespace.items()}


def watch_up() -> float | None:
    return REGISTRY.get_sample_value("hangwatch_operator_webhook_policy_watch_up")


def test_list_retry_pagination_bookmarks_and_relist_on_410(tmp_path: Path) -> None:
    api = ScriptedApi()
    api.script(
        "list",
        None,
        ("status", (500, "etcd leader changed")),
        ("list", ([body("a", "one")], "10", "page-2")),
        ("list", ([body("b", "two")], "10", None)),
        ("list", ([body("b", "two"), body("c", "three")], "30", None)),  # after the 410
    )
    api.script(
        "watch",
        None,
        ("stream", ([added(body("a", "four", version="11")), bookmark("20")], "end")),
        ("stream", ([GONE_EVENT], "end")),
    )

    async def scenario() -> None:
        async with watching(api, tmp_path) as watch:
            await asyncio.wait_for(watch.ready.wait(), 10)
            await until("the relist", lambda: len(api.seen("list")) == 4)
            await until("the watch after the relist", lambda: len(api.seen("watch")) == 3)
            assert names(watch) == {"b": ["two"], "c": ["three"]}
            assert watch_up() == 1.0

    asyncio.run(scenario())
    failed, first, second, relist = api.seen("list")
    assert first.at - failed.at >= 0.25  # backed off after the 500
    assert "continue" not in first.params and second.params.get("continue") == "page-2"
    assert relist.params.get("continue") is None
    watches = api.seen("watch")
    assert [w.params.get("resourceVersion") for w in watches] == ["10", "20", "30"]
    assert all(w.params.get("allowWatchBookmarks") in ("true", "True") for w in watches)
    assert all(240 <= int(w.params["timeoutSeconds"]) <= 360 for w in watches)
    assert relist.at - watches[1].at < 0.25  # a 410 relists at once


def test_a_410_status_relists_and_old_content_serves_until_then(tmp_path: Path) -> None:
    api = ScriptedApi()
    api.script(
        "list",
        None,
        ("list", ([body("a", "one")], "5", None)),
        ("status", (503, "apiserver is shutting down")),
        ("list", ([], "9", None)),
    )
    api.script("watch", None, ("status", (410, "too old resource version: 5 (8)")))

    async def scenario() -> None:
        async with watching(api, tmp_path) as watch:
            await asyncio.wait_for(watch.ready.wait(), 10)
            await until("the failed relist", lambda: len(api.seen("list")) == 2)
            # the request is seen before its failure is handled: wait for the gauge
            await until("the failed relist reported", lambda: watch_up() == 0.0)
            assert names(watch) == {"a": ["one"]}  # kept while the relist fails
            await until("the relist", lambda: len(api.seen("list")) == 3)
            await until("the emptied store", lambda: names(watch) == {})
            await until("watching again", lambda: len(api.seen("watch")) == 2)
            await until("the watch reported up", lambda: watch_up() == 1.0)

    asyncio.run(scenario())
    assert api.seen("watch")[1].params["resourceVersion"] == "9"


def test_broken_and_quick_watches_back_off_and_resume_without_relisting(tmp_path: Path) -> None:
    api = ScriptedApi()
    api.script("list", None, ("list", ([], "1", None)))
    api.script(
        "watch",
        None,
        ("stream", ([added(body("a", "one", version="2")), b"{not json"], "end")),
        ("stream", ([], "end")),
        ("stream", ([], "end")),
        ("stream", ([added(body("a", "two", version="3"))], "hang")),
    )

    async def scenario() -> None:
        async with watching(api, tmp_path) as watch:
            await until("the fourth watch", lambda: len(api.seen("watch")) == 4)
            await until("the last event", lambda: "two" in names(watch).get("a", []))
            assert names(watch) == {"a": ["one", "two"]}

    asyncio.run(scenario())
    assert len(api.seen("list")) == 1
    watches = api.seen("watch")
    assert [w.params["resourceVersion"] for w in watches] == ["1", "2", "2", "2"]
    gaps = [later.at - earlier.at for earlier, later in itertools.pairwise(watches)]
    assert gaps[0] >= 0.25 and gaps[1] >= 0.5 and gaps[2] >= 1.0  # growing backoff


def test_each_namespace_is_watched_on_its_own_and_all_must_be_listed(tmp_path: Path) -> None:
    api = ScriptedApi()
    api.script("list", "team-a", ("list", ([body("team-a", "one")], "4", None)))
    api.script(
        "list",
        "team-b",
        ("status", (403, "forbidden")),
        ("status", (403, "forbidden")),
        ("list", ([body("team-b", "two")], "6", None)),
    )

    async def scenario() -> None:
        async with watching(api, tmp_path, WatchPlan(("team-a", "team-b"))) as watch:
            await until("two refusals", lambda: len(api.seen("list", "team-b")) == 2)
            assert not watch.ready.is_set() and watch.store.listed_once("team-a")
            await asyncio.wait_for(watch.ready.wait(), 10)
            await until(
                "both watched",
                lambda: api.seen("watch", "team-a") and api.seen("watch", "team-b"),
            )
            assert names(watch) == {"team-a": ["one"], "team-b": ["two"]}

    asyncio.run(scenario())
    assert api.seen("list") == [] and api.seen("watch") == []  # nothing cluster-wide
    assert api.seen("watch", "team-a")[0].params["resourceVersion"] == "4"
    assert api.seen("watch", "team-b")[0].params["resourceVersion"] == "6"
