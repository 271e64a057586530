"""FGD, fragmentation gradient descent (Weng et al., USENIX ATC'23; docs/packing-benchmark.md §4).

Score of a placement = floor(100 * sigmoid((F(v) - F(v')) / 1000)): the less
the node's fragmentation against the typical task mix grows, the better. The
compiled core evaluates it by the points where the formula steps (native/src/score.rs),
so no platform's ``exp`` reaches a score.
F(v) and F(v') come from the compiled core (``fragmentation.FragCache``): F's integer
aggregates updated for the placement and summed in the specified order, one call per
decision. On equal scores the lowest-index GPU wins.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from streams.core.policy import GpuTiebreak, NodesView, OptionRows, Options, ScoreOnly
from streams.core.request import TaskRequest
from streams.policies.fragmentation import TypicalTasks, frag_cache

if TYPE_CHECKING:
    from streams.core.state import ClusterState

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
    """F(v) and F(v') for every option (node, GPU) of the task, from the compiled core."""
    cache = frag_cache(view.state, typical)
    cache.refresh(view.state, view.idx)
    idle = options.at(view.gpu_idle_milli)
    cpu = options.at(view.cpu_free)
    before, after = cache.table.delta(
        options.at(view.idx), cpu, idle, options.free if task.fractional else None,
        task.cpu_milli, task.num_gpu, task.gpu_milli, task.fractional)
    return FragDelta(before, after, cpu, idle)


def frag_delta_rows(task: TaskRequest, rows: OptionRows,
                    typical: TypicalTasks) -> tuple[list[float], list[float]]:
    """``frag_delta`` of ``OptionRows`` as lists (before, after), the same floats."""
    state = rows.state
    cache = frag_cache(state, typical)
    cache.refresh(state, rows.nodes)
    return cache.table.delta_rows(rows.nodes, rows.at, rows.cpu_free, rows.idle_milli,
                                  rows.free, task.cpu_milli, task.num_gpu, task.gpu_milli,
                                  task.fractional)


def frag_scores(task: TaskRequest, view: NodesView, options: Options, typical: TypicalTasks,
                sigmoid: str, scale: float, strand: tuple[float, float] | None = None,
                pressure: tuple[float, np.ndarray] | None = None) -> np.ndarray:
    """trunc(100 * sigmoid(x / scale)) per option, x = F(v) - F(v') less hetsched's terms
    when given (``strand``: the mix's GPU per CPU milli and its weight; ``pressure``: a
    weight and each option's model pressure); from the compiled core, which evaluates
    the ``sigmoid`` formula ("fgd" or "hetsched") by its fixed step points instead of
    ``exp`` (native/src/score.rs)."""
    cache = frag_cache(view.state, typical)
    cache.refresh(view.state, view.idx)
    return cache.table.scores(
        options.at(view.idx), options.at(view.cpu_free), options.at(view.gpu_idle_milli),
        options.free if task.fractional else None, task.cpu_milli, task.num_gpu,
        task.gpu_milli, task.fractional, sigmoid, scale, strand, pressure)


def frag_scores_rows(task: TaskRequest, rows: OptionRows, typical: TypicalTasks, sigmoid: str,
                     scale: float, strand: tuple[float, float] | None = None,
                     pressure: tuple[float, list[float]] | None = None) -> list[float]:
    """``frag_scores`` of ``OptionRows``: the same floats, as a list."""
    cache = frag_cache(rows.state, typical)
    cache.refresh(rows.state, rows.nodes)
    return cache.table.scores_rows(rows.nodes, rows.at, rows.cpu_free, rows.idle_milli,
                                   rows.free, task.cpu_milli, task.num_gpu, task.gpu_milli,
                                   task.fractional, sigmoid, scale, strand, pressure)


class Fgd(ScoreOnly):
    name = NAME
    gpu_tiebreak: GpuTiebreak = "lowest_index"
    node_local = True

    def __init__(self, typical: TypicalTasks) -> None:
        self.typical = typical

    def score(self, task: TaskRequest, view: NodesView, options: Options) -> np.ndarray:
        return frag_scores(task, view, options, self.typical, NAME, SIGMOID_SCALE_MILLI)

    def native_term(self, task: TaskRequest, state: ClusterState) -> tuple[str, tuple]:
        """This score as the core's scheduler pass takes it (``hetsched_core.score_feasible``)."""
        return NAME, (frag_cache(state, self.typical).table, SIGMOID_SCALE_MILLI, None, None)

    def score_rows(self, task: TaskRequest, rows: OptionRows) -> list[float]:
        """``score`` of a few options (see ``OptionRows``)."""
        return frag_scores_rows(task, rows, self.typical, NAME, SIGMOID_SCALE_MILLI)


def factory(args: Mapping[str, object] | None = None) -> Fgd:
    """Args: ``typical`` (a ``TypicalTasks``: the expected task mix, required)."""
    args = dict(args or {})
    typical = args.pop("typical", None)
    if not isinstance(typical, TypicalTasks):
        raise ValueError(f"policy {NAME!r} needs 'typical': the TypicalTasks of the workload")
    if args:
        raise ValueError(f"policy {NAME!r}: unknown arguments {sorted(args)}")
    return Fgd(typical)
