"""Resource fit: the feasibility every placement must pass (docs/packing-benchmark.md §3).

CPU and memory fit; the node is healthy; for GPU tasks the node's model is
allowed, and either one GPU has the fractional share free or ``num_gpu`` GPUs
are entirely idle. It scores nothing (0 everywhere); it is always enabled.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from streams.core.policy import GpuTiebreak, NodesView, Options, ScoreOnly, Verdict
from streams.core.request import MILLI_PER_GPU, TaskRequest

NAME = "fit"


def allowed_models(task: TaskRequest, view: NodesView) -> np.ndarray:
    """Whether each node's GPU model is among the task's allowed models."""
    if not task.gpu_models:
        return np.ones(len(view), bool)
    ids = [view.state.model_ids[m] for m in task.gpu_models if m in view.state.model_ids]
    # What ``np.isin`` answers, by one comparison per allowed model (a task allows a
    # few): ``isin``'s own overhead was most of a placement's filter on small clusters.
    model = view.model
    ok = np.zeros(len(view), bool)
    for i in ids:
        ok |= model == i
    return ok


def gpu_fit(task: TaskRequest, view: NodesView) -> np.ndarray:
    """Whether the GPUs of each node can take the task's GPU request."""
    if task.num_gpu == 0:
        return np.ones(len(view), bool)
    if task.fractional:
        return np.logical_or.reduce(view.gpu_free >= task.gpu_milli, axis=1)  # .any(axis=1)
    return np.add.reduce(view.gpu_free == MILLI_PER_GPU, axis=1) >= task.num_gpu  # .sum(axis=1)


class Fit(ScoreOnly):
    name = NAME
    gpu_tiebreak: GpuTiebreak = "least_free"
    node_local = True

    def filter(self, task: TaskRequest, view: NodesView) -> np.ndarray:
        ok = (view.cpu_free >= task.cpu_milli) & (view.mem_free >= task.memory_mib) & view.healthy
        if task.num_gpu:
            if task.gpu_models:
                ok &= allowed_models(task, view)
            ok &= gpu_fit(task, view)
        return ok

    def score(self, task: TaskRequest, view: NodesView, options: Options) -> np.ndarray:
        return np.zeros(len(options))

    def explain(self, task: TaskRequest, view: NodesView) -> Verdict:
        """Count, per constraint, the nodes it rules out (for ``Unschedulable``)."""
        checks = [
            ("unhealthy", ~view.healthy),
            ("insufficient cpu", view.cpu_free < task.cpu_milli),
            ("insufficient memory", view.mem_free < task.memory_mib),
        ]
        if task.num_gpu:
            checks.append(("gpu model not allowed", ~allowed_models(task, view)))
            what = "gpu share" if task.fractional else "idle gpus"
            checks.append((f"insufficient {what}", ~gpu_fit(task, view)))
        reasons = tuple(f"{label}: {int(m.sum())} of {len(view)} nodes" for label, m in checks)
        return Verdict("unschedulable", reasons, NAME)


def factory(args: Mapping[str, object] | None = None) -> Fit:
    if args:
        raise ValueError(f"policy {NAME!r} takes no arguments, got {sorted(args)}")
    return Fit()
