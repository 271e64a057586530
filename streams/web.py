"""The worker's web view: cluster state as JSON and Prometheus metrics.

* ``/state``: the cells this worker owns (nodes with per-GPU allocation,
  running tasks, queue, the speeds learned per class and GPU model) and, for
  every cell of the cluster, the summary the cells publish to the summaries
  topic -- so any one worker answers "how full is the cluster", and
  ``hetsched status --url A --url B`` merges the details.
* ``/metrics``: Prometheus text format (see :mod:`streams.metrics`).
* ``/health``: 200 while Kafka answers, 503 while it does not, with the
  :class:`~schemas.kafka.KafkaHealth` details (state, since, last error). Before
  Faust starts, ``hetsched worker`` serves the same page alone while it waits
  for the cluster (:func:`serve_health`), so "waiting for Kafka" is visible too.
"""

from __future__ import annotations

from typing import Any

import faust

from schemas.kafka import KafkaHealth
from streams.core.cell import Cell
from streams.core.request import MILLI_PER_GPU
from streams.metrics import exposition
from streams.processors.context import Context
from streams.processors.scheduling import CellStore


def cell_view(cell: Cell) -> dict[str, Any]:
    """A JSON-able picture of one cell."""
    s = cell.state
    nodes = []
    for name, rec in cell.nodes.items():
        i = s.node_index[name]
        count = int(s.gpu_count[i])
        nodes.append({
            "node": name,
            "model": rec.added.gpu_model,
            "healthy": bool(s.healthy[i]),
            "gpus_used_milli": [int(MILLI_PER_GPU - f) for f in s.gpu_free[i, :count]],
            "cpu_used_milli": int(s.cpu_cap[i] - s.cpu_free[i]),
            "cpu_milli": int(s.cpu_cap[i]),
            "tasks": int(s.pods[i]),
        })
    running = [{"task": t.task, "node": t.node, "gpus": list(t.gpus),
                "share_milli": t.request.gpu_milli}
               for t in sorted(cell.tasks.values(), key=lambda r: r.place_seq)
               if t.status == "running"]
    return {"nodes": nodes, "running": running, "queue": list(cell.queue),
            "speeds": speed_view(cell)}


def speed_view(cell: Cell) -> list[dict[str, Any]]:
    """What the cell has learned of each class's speed on its GPU models (issue 35): per
    (class, GPU count), each model's speed against the fastest (1.0), its rate in the
    class's own units per second, the runs it rests on (0: filled) and its basis."""
    models = sorted({rec.added.gpu_model for rec in cell.nodes.values()
                     if rec.added.gpu_count and rec.added.gpu_model})
    return [{"class": row_class, "gpus": num_gpu,
             "models": {m: {"speed": round(rel, 4), "rate": e.rate, "runs": e.observations,
                            "basis": e.basis}
                        for m, (rel, e) in cell.speeds.relative(row_class, num_gpu,
                                                                models).items()}}
            for row_class, num_gpu in cell.speeds.rows()]


def register_pages(app: faust.App, ctx: Context, store: CellStore) -> None:
    @app.page("/state")
    async def state(view: faust.web.View, request: faust.web.Request) -> faust.web.Response:
        owned = ctx.owned_cells()
        return view.json({
            "worker": ctx.settings.app_id,
            "cells": {name: cell_view(store.cells[name]) for name in owned
                      if name in store.cells},
            "cluster": dict(ctx.summaries.items()),
        })

    @app.page("/metrics")
    async def metrics(view: faust.web.View, request: faust.web.Request) -> faust.web.Response:
        body, content_type = exposition()
        return view.bytes(body, content_type=content_type.split(";")[0])


def health_body(health: KafkaHealth, app_id: str) -> tuple[int, dict[str, Any]]:
    """(HTTP status, JSON body) of ``/health``: ``status`` is "ok" or "unavailable"."""
    status = health.http_status()
    return status, {"status": "ok" if status == 200 else "unavailable", "app": app_id,
                    "kafka": health.as_dict()}


async def serve_health(host: str, port: int, health: KafkaHealth, app_id: str) -> Any:
    """Serve ``/health`` alone (aiohttp) until the returned runner is cleaned up.

    Used while the worker waits for Kafka before Faust (which cannot start
    without a broker) binds the same port with the full set of pages.
    """
    from aiohttp import web

    async def page(request: web.Request) -> web.Response:
        status, body = health_body(health, app_id)
        body["status"] = "starting" if status != 200 else body["status"]
        return web.json_response(body, status=status)

    application = web.Application()
    application.router.add_get("/health", page)
    runner = web.AppRunner(application, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, host, port).start()
    return runner
