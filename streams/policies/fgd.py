"""FGD, fragmentation gradient descent (Weng et al., USENIX ATC'23; packing-benchmark.md §4).

Score of a placement = floor(100 * sigmoid((F(v) - F(v')) / 1000)): the less
the node's fragmentation against the typical task mix grows, the better.
F(v') is computed from F's integer aggregates updated for the placement (see
``fragmentation.py``), so one decision is a handful of array operations over
(options x typical tasks). On equal scores the lowest-index GPU wins.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from streams.core.request import MILLI_PER_GPU, TaskRequest
from streams.policies.base import GpuTiebreak, NodesView, Options, ScoreOnly
from streams.policies.fragmentation import TypicalTasks, frag_cache, fragmentation_near

NAME = "fgd"
SIGMOID_SCALE_MILLI = 1000.0
MAX_SCORE = 100


@dataclass(frozen=True, slots=True)
class FragDelta:
    """F before and after each option (milli-GPU), for policies built on FGD; with the
    option's node free CPU and idle milli-GPU (before the placement), which such
    policies also read."""

    before: np.ndarray
    after: np.ndarray
    cpu_free: np.ndarray | None = None
    idle_milli: np.ndarray | None = None


def frag_delta(task: TaskRequest, view: NodesView, options: Options,
               typical: TypicalTasks) -> FragDelta:
    """F(v) and F(v') for every option (node, GPU) of the task."""
    cache = frag_cache(view.state, typical)
    cache.refresh(view.state, view.idx)
    rows = options.at(view.idx)
    cnt_after = cache.cnt_ge[rows]
    frag_after = cache.frag_lt[rows]
    idle = options.at(view.gpu_idle_milli)
    idle_after = idle
    if task.fractional:
        # The option's GPU goes from a to a - share free: its contribution to both
        # aggregates changes by table row (a - share) minus row a (integers, exact).
        a = options.free
        table = typical.share_table
        change = table[a - task.gpu_milli] - table[a]
        k = len(typical)
        cnt_after += change[:, :k]
        frag_after += change[:, k:]
        idle_after = idle - task.gpu_milli
    elif task.num_gpu:
        # n idle GPUs drop from 1000 to 0 free: they leave every "free >= m_k" count
        # (m_k <= 1000) and add nothing to any fragment sum.
        cnt_after -= task.num_gpu
        idle_after = idle - task.num_gpu * MILLI_PER_GPU
    before = cache.frag[rows]
    cpu = options.at(view.cpu_free)
    after = fragmentation_near(before, cpu - task.cpu_milli, idle_after,
                               cache.code0[rows], cnt_after, frag_after, typical)
    return FragDelta(before, after, cpu, idle)


def sigmoid_score(delta: FragDelta) -> np.ndarray:
    """floor(100 * sigmoid((F - F') / 1000)), as integers in 0..99 (float dtype)."""
    x = (delta.before - delta.after) / SIGMOID_SCALE_MILLI
    return np.trunc(1.0 / (1.0 + np.exp(-x)) * MAX_SCORE)


class Fgd(ScoreOnly):
    name = NAME
    gpu_tiebreak: GpuTiebreak = "lowest_index"
    node_local = True

    def __init__(self, typical: TypicalTasks) -> None:
        self.typical = typical

    def score(self, task: TaskRequest, view: NodesView, options: Options) -> np.ndarray:
        return sigmoid_score(frag_delta(task, view, options, self.typical))


def factory(args: Mapping[str, object] | None = None) -> Fgd:
    """Args: ``typical`` (a ``TypicalTasks``: the expected task mix, required)."""
    args = dict(args or {})
    typical = args.pop("typical", None)
    if not isinstance(typical, TypicalTasks):
        raise ValueError(f"policy {NAME!r} needs 'typical': the TypicalTasks of the workload")
    if args:
        raise ValueError(f"policy {NAME!r}: unknown arguments {sorted(args)}")
    return Fgd(typical)
