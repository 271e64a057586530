"""The worker's web view: cluster state as JSON and Prometheus metrics.

* ``/state``: the cells this worker owns (nodes with per-GPU allocation,
  running tasks, queue) and, for every cell of the cluster, the summary the
  cells publish to the summaries topic -- so any one worker answers "how full is
  the cluster", and ``hetsched status --url A --url B`` merges the details.
* ``/metrics``: Prometheus text format (see :mod:`streams.metrics`).
"""

from __future__ import annotations

from typing import Any

import faust

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
    return {"nodes": nodes, "running": running, "queue": list(cell.queue)}


def register_pages(app: faust.App, ctx: Context, store: CellStore) -> None:
    @app.page("/state")
    async def state(web: faust.web.Web, request: faust.web.Request) -> faust.web.Response:
        owned = ctx.owned_cells()
        return web.json({
            "worker": ctx.settings.app_id,
            "cells": {name: cell_view(store.cells[name]) for name in owned
                      if name in store.cells},
            "cluster": dict(ctx.summaries.items()),
        })

    @app.page("/metrics")
    async def metrics(web: faust.web.Web, request: faust.web.Request) -> faust.web.Response:
        body, content_type = exposition()
        return web.bytes(body, content_type=content_type.split(";")[0])
