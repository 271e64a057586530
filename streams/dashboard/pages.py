"""Routes of the dashboard on the worker's Faust web server, and its background feed."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterable
from importlib import resources
from typing import Any

import faust

from schemas.codec import decode
from streams.audit.records import Record
from streams.core.cell import Cell
from streams.core.request import MILLI_PER_GPU
from streams.dashboard.feed import Feed
from streams.dashboard.task_view import task_response
from streams.processors.context import Context
from streams.processors.scheduling import CellStore
from streams.web import cell_view

TASK_ROUTE = "/task/{task_id:.*}"
"""The task view's JSON (:mod:`streams.dashboard.task_view`). The id is the rest of the
path, slashes included, percent-decoded once by aiohttp (the page sends
``encodeURIComponent(id)``): any task id, which is any string of 1 to 253 characters,
has one URL; ``/task/?id=<id>`` too, for the ids "." and ".." (which a browser
resolves as path segments)."""
STATIC = {"app.js": "text/javascript", "style.css": "text/css", "index.html": "text/html"}
FEED_WAIT_MS = 500
FEED_MIN_BYTES = 1 << 20
"""The feed's fetches wait for a MiB or half a second, whichever comes first.

With aiokafka's defaults (one byte) the broker answers the feed's fetch as soon as
any task, telemetry sample or decision arrives, and the next fetch follows at
once: about one fetch per submission at 200 submissions/s, each ~0.5 ms of the
worker's CPU, which the scheduler shares (bench/service.py). A person looking at
the page does not see half a second; the scheduler's own consumers keep fetching
at once."""


def _static(name: str) -> bytes:
    return resources.files("streams.dashboard").joinpath("static", name).read_bytes()


def snapshot(ctx: Context, store: CellStore, feed: Feed) -> dict[str, Any]:
    """The JSON document of ``/dashboard/data``."""
    nodes: list[dict[str, Any]] = []
    queue: list[dict[str, str]] = []
    speeds: list[dict[str, Any]] = []
    for name in ctx.owned_cells():
        view = cell_view(store.get(name))
        speeds += [{"cell": name, **row} for row in view["speeds"]]
        for n in view["nodes"]:
            n["cell"] = name
            n["gpus"] = [dict(index=i, used_milli=u, **feed.telemetry.get(f"{n['node']}/{i}", {}))
                         for i, u in enumerate(n["gpus_used_milli"])]
        nodes += view["nodes"]
        queue += [{"task": t, "tenant": feed.tenants.get(t, "")} for t in view["queue"]]
    tenants: dict[str, int] = {}
    for q in queue:
        tenants[q["tenant"]] = tenants.get(q["tenant"], 0) + 1
    return {"worker": ctx.settings.app_id, "nodes": nodes, "queue": queue,
            "queued_by_tenant": tenants, "decisions": feed.recent_decisions(decode),
            "placed": feed.placed, "history": list(feed.history), "speeds": speeds}


def allocation(cells: Iterable[Cell]) -> tuple[float, int]:
    """The allocated share of the cells' GPUs and their queue length: what the history
    sampler records every 2 s, read off the cells' arrays instead of building the whole
    page document (:func:`snapshot`, ~2 % of the worker's CPU at 200 submissions/s with
    200 nodes, py-spy). The share is the mean of ``gpus_used_milli`` over every GPU of
    :func:`streams.web.cell_view`, as the page computed it before."""
    used = gpus = queued = 0
    for cell in cells:
        s = cell.state
        for name in cell.nodes:
            i = s.node_index[name]
            count = int(s.gpu_count[i])
            gpus += count
            used += sum(int(MILLI_PER_GPU - f) for f in s.gpu_free[i, :count])
        queued += len(cell.queue)
    return (used / (MILLI_PER_GPU * gpus) if gpus else 0.0), queued


async def follow(ctx: Context, feed: Feed) -> None:
    """Read the deployment's input log (submissions, status reports, telemetry) and
    decisions into ``feed``, forever."""
    from aiokafka import AIOKafkaConsumer

    from schemas.kafka import aiokafka_kwargs
    from schemas.topics import DECISIONS, INPUT_LOG

    topics = [ctx.settings.topic(t) for t in (INPUT_LOG, DECISIONS)]
    while True:
        consumer = AIOKafkaConsumer(*topics, bootstrap_servers=ctx.settings.bootstrap,
                                    group_id=None, auto_offset_reset="latest",
                                    isolation_level="read_committed", enable_auto_commit=False,
                                    metadata_max_age_ms=5000, fetch_max_wait_ms=FEED_WAIT_MS,
                                    fetch_min_bytes=FEED_MIN_BYTES, **aiokafka_kwargs())
        try:
            await consumer.start()
            while True:
                for records in (await consumer.getmany(timeout_ms=500)).values():
                    for record in records:
                        with contextlib.suppress(Exception):
                            feed.note_record(Record(record.topic, record.partition,
                                                    record.offset, record.timestamp,
                                                    record.key, record.value), decode)
        except asyncio.CancelledError:
            raise
        except Exception:  # the broker went away: retry; the dashboard must not kill the worker
            await asyncio.sleep(2)
        finally:
            with contextlib.suppress(Exception):
                await consumer.stop()


def register_dashboard(app: faust.App, ctx: Context, store: CellStore) -> None:
    """Add the dashboard's pages, feed consumer and sampler to the worker."""
    feed = Feed()

    @app.page("/dashboard")
    async def page(view: faust.web.View, request: faust.web.Request) -> faust.web.Response:
        return view.bytes(_static("index.html"), content_type="text/html")

    @app.page("/dashboard/static/{name}")
    # a route parameter after the request: Faust's handler type has no place for it
    async def static(view: faust.web.View, request: faust.web.Request,  # type: ignore[misc]
                     name: str) -> faust.web.Response:
        if name not in STATIC:
            return view.json({"error": "not found"}, status=404)
        return view.bytes(_static(name), content_type=STATIC[name])

    @app.page("/dashboard/data")
    async def data(view: faust.web.View, request: faust.web.Request) -> faust.web.Response:
        return view.json(snapshot(ctx, store, feed))

    @app.page(TASK_ROUTE)
    # a route parameter after the request: Faust's handler type has no place for it
    async def task(view: faust.web.View, request: faust.web.Request,  # type: ignore[misc]
                   task_id: str) -> faust.web.Response:
        # "." and ".." are path segments every client resolves away: /task/?id=.. asks them
        task_id = task_id or request.query.get("id", "")
        owned = ((name, store.cells[name]) for name in ctx.owned_cells() if name in store.cells)
        status, body = task_response(task_id, feed.journal.records(task_id),
                                     ctx.settings.topic_prefix, owned)
        return view.json(body, status=status)

    @app.task
    async def dashboard_feed() -> None:
        await follow(ctx, feed)

    @app.timer(2.0)
    async def dashboard_history() -> None:
        feed.sample(*allocation(store.get(name) for name in ctx.owned_cells()))
