"""hetsched: fragmentation-aware packing that also counts GPUs stranded by CPU.

Why: on the openb traces CPU is nearly as scarce as GPU (the default trace
asks for 80 % of the cluster's CPU at 98 % of its GPU), so a node often runs
out of CPU while GPUs are still free; those GPUs are lost to every later task.
FGD only sees this when free CPU falls below a typical task's CPU. hetsched
scores a placement by the growth of two measures of capacity later tasks
cannot use, both over the expected task mix (never the future sequence):

- F(v): FGD's fragmentation (milli-GPU unusable by each typical task,
  weighted by its probability), and
- S(v) = max(0, T - C * k): free milli-GPU beyond what the node's free CPU C
  can feed, with k = the mix's GPU milli per CPU milli (GPU tasks only).

score = trunc(100 / (1 + exp(-((F - F') - w * (S' - S)) / scale))), evaluated in the
compiled core by the points where it steps (native/src/score.rs). Integer
scores keep FGD's coarse ranking: placements whose costs are close tie and
the random node rank spreads them, which measured better than an exact
greedy minimum (see BENCHMARKS.md). A sharper ``scale`` (500 vs FGD's 1000)
separates small differences better.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import TYPE_CHECKING

import numpy as np

from streams.core.policy import GpuTiebreak, NodesView, OptionRows, Options, ScoreOnly
from streams.core.request import TaskRequest
from streams.policies._args import take
from streams.policies.fgd import frag_scores, frag_scores_rows
from streams.policies.fragmentation import TypicalTasks, frag_cache

if TYPE_CHECKING:
    from streams.core.state import ClusterState

NAME = "hetsched"
DEFAULTS = {"scale_milli": 500.0, "strand_weight": 1.0, "scarcity_weight": 1.0}


def gpu_milli_per_cpu_milli(typical: TypicalTasks) -> float:
    """GPU demand per unit of CPU demand in the mix (GPU tasks only)."""
    gpu = ~typical.cpu_only
    cpu = float((typical.prob[gpu] * typical.cpu_milli[gpu]).sum())
    need = float((typical.prob[gpu] * typical.num_gpu[gpu] * typical.gpu_milli[gpu]).sum())
    return need / cpu if cpu > 0 else 0.0


def model_pressure(typical: TypicalTasks, state: ClusterState) -> np.ndarray:
    """Per model id (+1 for GPU-less): constrained demand on the model / its capacity.

    A typical task that accepts only some models spreads its expected GPU demand
    evenly over them; the pressure is that demand's share of the mix divided by
    the model's share of the cluster's GPUs (1 = the model is needed as much as
    it exists). Cached per state: it changes only when nodes or models change.
    """
    key = ("hetsched.pressure", id(typical), state.n, len(state.model_names))
    cached = state.cache.get(key)
    if cached is not None:
        return cached  # type: ignore[return-value]
    names = state.model_names
    n = state.n
    supply = np.bincount(state.model[:n][state.model[:n] >= 0],
                         weights=state.gpu_count[:n][state.model[:n] >= 0],
                         minlength=len(names)).astype(np.float64)
    demand = typical.prob * typical.num_gpu * typical.gpu_milli
    total = float(demand.sum())
    constrained = np.zeros(len(names))
    for k, spec in enumerate(typical.spec):
        allowed = [names.index(m) for m in spec if m in names]
        if spec and allowed and demand[k] > 0:
            constrained[allowed] += demand[k] / len(allowed)
    out = np.zeros(len(names) + 1)
    if total > 0 and supply.sum() > 0:
        share = supply / supply.sum()
        out[:-1] = np.where(share > 0, (constrained / total) / np.maximum(share, 1e-12), 0.0)
    state.cache[key] = out
    return out


class Hetsched(ScoreOnly):
    name = NAME
    gpu_tiebreak: GpuTiebreak = "lowest_index"
    node_local = True

    def __init__(self, typical: TypicalTasks, scale_milli: float, strand_weight: float,
                 scarcity_weight: float) -> None:
        if scale_milli <= 0:
            raise ValueError(f"policy {NAME!r}: scale_milli must be > 0")
        self.typical = typical
        self.scale = scale_milli
        self.strand_weight = strand_weight
        self.scarcity_weight = scarcity_weight
        self.ratio = gpu_milli_per_cpu_milli(typical)

    def _pressure(self, task: TaskRequest, state: ClusterState) -> np.ndarray | None:
        """Per model id, the scarcity pressure a flexible GPU task is scored against; None
        when the term does not apply (a task bound to models, a CPU task, weight 0) or
        is 0.0 for every model (x - 0.0 is x: skipped)."""
        if not (task.num_gpu and not task.gpu_models and self.scarcity_weight):
            return None
        pressure = model_pressure(self.typical, state)
        if np.count_nonzero(pressure) or not math.isfinite(self.scarcity_weight):
            return pressure
        return None

    def score(self, task: TaskRequest, view: NodesView, options: Options) -> np.ndarray:
        pressure = self._pressure(task, view.state)
        return frag_scores(
            task, view, options, self.typical, NAME, self.scale, (self.ratio, self.strand_weight),
            None if pressure is None else (self.scarcity_weight,
                                           pressure[options.at(view.model)]))

    def native_term(self, task: TaskRequest, state: ClusterState) -> tuple[str, tuple]:
        """This score as the core's scheduler pass takes it (``hetsched_core.score_feasible``)."""
        pressure = self._pressure(task, state)
        return NAME, (frag_cache(state, self.typical).table, self.scale,
                      (self.ratio, self.strand_weight),
                      None if pressure is None else (self.scarcity_weight, pressure.tolist()))

    def score_rows(self, task: TaskRequest, rows: OptionRows) -> list[float]:
        """``score`` of a few options (see ``OptionRows``): the same floats."""
        pressure = self._pressure(task, rows.state)
        per_option = None
        if pressure is not None:
            per_model = pressure.tolist()
            per_option = (self.scarcity_weight, [per_model[m] for m in rows.model])
        return frag_scores_rows(task, rows, self.typical, NAME, self.scale,
                                (self.ratio, self.strand_weight), per_option)


def factory(args: Mapping[str, object] | None = None) -> Hetsched:
    """Args: ``typical`` (the expected mix, required), ``scale_milli``, ``strand_weight``."""
    args = dict(args or {})
    typical = args.pop("typical", None)
    if not isinstance(typical, TypicalTasks):
        raise ValueError(f"policy {NAME!r} needs 'typical': the TypicalTasks of the workload")
    return Hetsched(typical, **take(NAME, args, DEFAULTS))
