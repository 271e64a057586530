"""Which cell a node or a task goes to. Pure: the processor passes in what it knows.

The router's choice is recorded in the input log (the routed envelope carries
its ``cell``), so replay never re-runs the router and its inputs may be
eventually consistent: per-cell summaries published by the cells' schedulers
(GPU models present, free whole GPUs per model, queue length).

* Nodes: the cell the agent asked for (``NodeRegistered.cell``) if it is one of
  ours, else the cell with the fewest GPUs so far (ties by name).
* Tasks: among cells with a node that could ever host the task (GPU model
  allowed, enough GPUs on one node), the one with the most free matching GPUs,
  then the shortest queue, then by name. If no cell qualifies (e.g. no summary
  yet, or a model nobody has), a stable hash of the task id spreads tasks over
  the cells known to have nodes (summaries, or nodes this router placed), and
  over all cells only when none is known: a cell without nodes can never run
  the task.
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
        if gpu_count:
            usable = [m for m in usable if models[m]["max_per_node"] >= gpu_count]
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


def gpus_by_cell(summaries: Mapping[str, Summary]) -> dict[str, int]:
    """Total GPUs per cell from the summaries."""
    return {c: sum(m["gpus"] for m in s.get("models", {}).values()) for c, s in summaries.items()}
