"""GpuPacking baseline (docs/packing-benchmark.md §4): fill shared GPUs, then partly used nodes.

Tiers, best first: a fractional task on an already shared GPU (the fuller the
better), then idle GPUs on a partly used node, then an entirely idle node
(small nodes first). CPU-only tasks score 0.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from streams.core.policy import GpuTiebreak, NodesView, Options, ScoreOnly
from streams.core.request import MILLI_PER_GPU, TaskRequest

NAME = "gpupacking"


def least_free_fitting(task: TaskRequest, view: NodesView) -> np.ndarray:
    """Free share of the GPU a fractional task would take (least free that fits)."""
    free = np.where(view.gpu_free >= task.gpu_milli, view.gpu_free, MILLI_PER_GPU + 1)
    return free.min(axis=1)


class GpuPacking(ScoreOnly):
    name = NAME
    gpu_tiebreak: GpuTiebreak = "least_free"
    node_local = True

    def score(self, task: TaskRequest, view: NodesView, options: Options) -> np.ndarray:
        if task.num_gpu == 0:
            return np.zeros(len(options))
        count = view.gpu_count
        idle = (view.gpu_free == MILLI_PER_GPU).sum(axis=1)
        all_idle = np.maximum(33 - count, count)
        if task.fractional:
            used = least_free_fitting(task, view)
            uses_idle = used == MILLI_PER_GPU
            idle_used = np.ones_like(count)
            shared = np.maximum(100 - (used // 10) // 10, 50)
        else:
            uses_idle = np.ones(len(view), bool)
            idle_used = np.full_like(count, task.num_gpu)
            shared = np.zeros_like(count)
        partial = np.where(uses_idle, np.maximum(50 - idle_used, 33), shared)
        return np.where(idle == count, all_idle, partial)[options.node].astype(np.float64)


def factory(args: Mapping[str, object] | None = None) -> GpuPacking:
    if args:
        raise ValueError(f"policy {NAME!r} takes no arguments, got {sorted(args)}")
    return GpuPacking()
