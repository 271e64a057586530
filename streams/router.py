"""Which cell a node or a task goes to. Pure: the processor passes in what it knows.

The router's choice is recorded in the input log (the routed envelope carries
its ``cell``), so replay never re-runs the router and its inputs may be
eventually consistent: per-cell summaries published by the cells' schedulers
(GPU models present, free whole GPUs per model, queue length).

* Nodes: the cell the agent asked for (``NodeRegistered.cell``) if it is one of
  ours, else the cell with the fewest GPUs so far (ties by name).
* Tasks: among cells with a node that could ever host the task (GPU model
  allowed, enough GPUs on one node, or together for a gang), the one with the
  most free matching GPUs, then the shortest queue, then by name. If no cell
  qualifies (e.g. no summary yet, or a model nobody has), a stable hash of the
  task id spreads tasks over the cells known to have nodes (summaries, or nodes
  this router placed), and over all cells only when none is known: a cell
  without nodes can never run the task.
"""

from __future__ import annotations

import zlib
from collections.abc import Mapping, Sequence
from typing import Any

Summary = Mapping[str, Any]
"""``{"nodes": int, "models": {model: {"gpus", "free", "max_per_node"}}, "queued": int}``."""


def cell_for_node(requested: str | None, cells: Sequence[str],
                  gpus_by_cell: Mapping[str, int]) -> str:
    """The cell a registering node joins (see the module docstring)."""
    if requested in cells:
        return str(requested)
    return min(cells, key=lambda c: (gpus_by_cell.get(c, 0), c))


def cell_for_task(task_id: str, gpu_count: int, gpu_models: Sequence[str],
                  cells: Sequence[str], summaries: Mapping[str, Summary],
                  populated: Sequence[str] = ()) -> str:
    """The cell a submitted task goes to (see the module docstring).

    ``populated``: cells known to hold nodes besides those the summaries show.
    """
    ranked = []
    for cell in cells:
        summary = summaries.get(cell)
        if not summary:
            continue
        models = summary.get("models", {})
        usable = [m for m in models if not gpu_models or m in gpu_models]
        if gpu_count:  # one node holds it, or the model's GPUs together hold a gang
            usable = [m for m in usable if models[m]["max_per_node"] >= gpu_count
                      or models[m]["gpus"] >= gpu_count]
            if not usable:
                continue
        elif not summary.get("nodes"):
            continue
        free = sum(models[m]["free"] for m in usable)
        ranked.append((-free, summary.get("queued", 0), cell))
    if ranked:
        return min(ranked)[2]
    known = {c for c, s in summaries.items() if s and s.get("nodes")} | set(populated)
    candidates = [c for c in cells if c in known] or list(cells)
    return candidates[zlib.crc32(task_id.encode()) % len(candidates)]


def with_pending(summaries: Mapping[str, Summary],
                 pending: Mapping[str, int]) -> dict[str, Summary]:
    """The summaries less the whole GPUs of tasks routed since each was published.

    A summary is published by the cell after it has scheduled what it was sent,
    at most every 0.2 s; a router routing a burst in one transaction would
    otherwise send the whole burst to the cell that looked freest before it.
    ``pending`` GPUs are taken from the models with the most free GPUs first.
    """
    out: dict[str, Summary] = dict(summaries)
    for cell, gpus in pending.items():
        summary = summaries.get(cell)
        if not summary or gpus <= 0:
            continue
        models = {m: dict(v) for m, v in summary.get("models", {}).items()}
        left = gpus
        for m in sorted(models, key=lambda m: (-models[m]["free"], m)):
            take = min(left, models[m]["free"])
            models[m]["free"] -= take
            left -= take
        out[cell] = {**summary, "models": models,
                     "queued": summary.get("queued", 0) + max(0, left)}
    return out


def gpus_by_cell(summaries: Mapping[str, Summary]) -> dict[str, int]:
    """Total GPUs per cell from the summaries."""
    return {c: sum(m["gpus"] for m in s.get("models", {}).values()) for c, s in summaries.items()}
