"""FGD, fragmentation gradient descent (Weng et al., USENIX ATC'23; docs/packing-benchmark.md §4).

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

from streams.core.policy import GpuTiebreak, NodesView, OptionRows, Options, ScoreOnly, trunc
from streams.core.request import MILLI_PER_GPU, TaskRequest
from streams.policies.fragmentation import (
    _NEAR_MILLI,
    TypicalTasks,
    _ordered_sum,
    frag_cache,
    fragmentation_near,
)

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


def frag_delta_rows(task: TaskRequest, rows: OptionRows,
                    typical: TypicalTasks) -> tuple[list[float], list[float]]:
    """``frag_delta`` of ``OptionRows`` as lists (before, after), to the last bit.

    Integer aggregates are updated as in ``frag_delta``; the fast F(v') is the same
    matrix product over the same rows (one numpy call on the options' amounts), and
    rows within rounding of F(v) are summed by ``_ordered_sum`` as
    ``fragmentation_near`` does.
    """
    state = rows.state
    cache = frag_cache(state, typical)
    cache.refresh(state, rows.nodes)
    idx = rows.nodes
    cnt_rows, frag_rows = cache.cnt_ge[idx].tolist(), cache.frag_lt[idx].tolist()
    code_rows, before_rows = cache.code0[idx].tolist(), cache.frag[idx].tolist()
    cpu_k, _, num_k, _, _ = typical.columns
    k_range = range(len(typical))
    share = task.gpu_milli
    table = typical.share_rows if task.fractional else None
    whole = task.num_gpu if task.num_gpu and not task.fractional else 0
    before: list[float] = []
    amounts: list[list[int]] = []
    parts: list[tuple[int, int, list[int], list[int], list[int]]] = []
    for i, a in enumerate(rows.at):
        same = rows.first[i]
        if same != i:  # same node and free share as an earlier option: same aftermath
            amounts.append(amounts[same])
            before.append(before[same])
            parts.append(parts[same])
            continue
        f = rows.free[i] if rows.free is not None else 0
        cnt, frag, code0 = cnt_rows[a], frag_rows[a], code_rows[a]
        idle = rows.idle_milli[i]
        if table is not None:
            hi, lo = table[f - share], table[f]
            n = len(cnt)
            cnt = [cnt[k] + (hi[k] - lo[k]) for k in k_range]
            frag = [frag[k] + (hi[n + k] - lo[n + k]) for k in k_range]
            idle -= share
        elif whole:
            cnt = [c - whole for c in cnt]
            idle -= whole * MILLI_PER_GPU
        cpu = rows.cpu_free[i] - task.cpu_milli
        amounts.append([frag[k] if code0[k] == 4 and cpu >= cpu_k[k] and cnt[k] >= num_k[k]
                        else idle for k in k_range])
        before.append(before_rows[a])
        parts.append((cpu, idle, code0, cnt, frag))
    after = (np.array(amounts, np.int64) @ typical.prob).tolist()
    exact: dict[int, float] = {}  # first option of a (node, share) -> its ordered sum
    for i, (b, f) in enumerate(zip(before, after, strict=True)):
        if abs(f - b) <= _NEAR_MILLI:
            same = rows.first[i]
            if same not in exact:
                exact[same] = _ordered_sum(*parts[i], typical)
            after[i] = exact[same]
    return before, after


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

    def score_rows(self, task: TaskRequest, rows: OptionRows) -> list[float]:
        """``score`` of a few options (see ``OptionRows``)."""
        before, after = frag_delta_rows(task, rows, self.typical)
        neg = [-((b - a) / SIGMOID_SCALE_MILLI) for b, a in zip(before, after, strict=True)]
        return [trunc(1.0 / (1.0 + e) * MAX_SCORE) for e in np.exp(neg).tolist()]


def factory(args: Mapping[str, object] | None = None) -> Fgd:
    """Args: ``typical`` (a ``TypicalTasks``: the expected task mix, required)."""
    args = dict(args or {})
    typical = args.pop("typical", None)
    if not isinstance(typical, TypicalTasks):
        raise ValueError(f"policy {NAME!r} needs 'typical': the TypicalTasks of the workload")
    if args:
        raise ValueError(f"policy {NAME!r}: unknown arguments {sorted(args)}")
    return Fgd(typical)
