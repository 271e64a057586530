"""GpuClustering baseline (docs/packing-benchmark.md §4): keep tasks of one kind together.

A GPU task's tag is "shared" (fractional) or "k-gpu". A node whose only tag is
the task's scores base+75, one holding it among others base+50, a node with
no GPU task base+25, else base; base = 25 * (8000 - T) // 8000 prefers fuller
nodes. CPU-only tasks score 0.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from streams.core.policy import GpuTiebreak, NodesView, Options, ScoreOnly
from streams.core.request import TaskRequest
from streams.core.state import TAG_SHARED

NAME = "gpuclustering"
GPU_NORM_MILLI = 8000


class GpuClustering(ScoreOnly):
    name = NAME
    gpu_tiebreak: GpuTiebreak = "least_free"
    node_local = True

    def score(self, task: TaskRequest, view: NodesView, options: Options) -> np.ndarray:
        if task.num_gpu == 0:
            return np.zeros(len(options))
        base = 25 * (GPU_NORM_MILLI - view.gpu_idle_milli) // GPU_NORM_MILLI
        tags = view.tag_count > 0
        tag = TAG_SHARED if task.fractional else task.num_gpu
        has = tags[:, tag]
        kinds = tags.sum(axis=1)
        bonus = np.where(has & (kinds == 1), 75, np.where(has, 50, np.where(kinds == 0, 25, 0)))
        return (base + bonus)[options.node].astype(np.float64)


def factory(args: Mapping[str, object] | None = None) -> GpuClustering:
    if args:
        raise ValueError(f"policy {NAME!r} takes no arguments, got {sorted(args)}")
    return GpuClustering()
