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

score = trunc(100 * sigmoid(((F - F') - w * (S' - S)) / scale)). Integer
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

from streams.core.policy import GpuTiebreak, NodesView, OptionRows, Options, ScoreOnly, trunc
from streams.core.request import TaskRequest
from streams.policies._args import take
from streams.policies.fgd import MAX_SCORE, frag_delta, frag_delta_rows
from streams.policies.fragmentation import TypicalTasks

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


def stranded(cpu_free: np.ndarray, idle_milli: np.ndarray, ratio: float) -> np.ndarray:
    """Free milli-GPU the node's free CPU cannot feed at the mix's ratio."""
    return np.maximum(0.0, idle_milli - cpu_free * ratio)


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

    def score(self, task: TaskRequest, view: NodesView, options: Options) -> np.ndarray:
        delta = frag_delta(task, view, options, self.typical)
        cpu, idle = delta.cpu_free, delta.idle_milli
        assert cpu is not None and idle is not None
        taken = task.gpu_milli if task.fractional else task.gpu_total_milli
        strand_growth = (stranded(cpu - task.cpu_milli, idle - taken, self.ratio)
                         - stranded(cpu, idle, self.ratio))
        x = delta.before - delta.after
        # w * s is s when w is 1.0 (the default): the multiplication is skipped, not changed.
        x -= strand_growth if self.strand_weight == 1.0 else self.strand_weight * strand_growth
        if task.num_gpu and not task.gpu_models and self.scarcity_weight:
            # A flexible task should leave models that constrained tasks need. When no
            # model is under pressure the term is 0.0 and x - 0.0 is x: skipped.
            pressure = model_pressure(self.typical, view.state)
            if np.count_nonzero(pressure) or not math.isfinite(self.scarcity_weight):
                x = x - self.scarcity_weight * pressure[options.at(view.model)] * taken
        # trunc(100 / (1 + exp(-x / scale))), the same operations in place.
        np.negative(x, out=x)
        x /= self.scale
        np.exp(x, out=x)
        x += 1.0
        np.divide(MAX_SCORE, x, out=x)
        return np.trunc(x, out=x)


    def score_rows(self, task: TaskRequest, rows: OptionRows) -> list[float]:
        """``score`` of a few options (see ``OptionRows``): the same operations per option."""
        before, after = frag_delta_rows(task, rows, self.typical)
        taken = task.gpu_milli if task.fractional else task.gpu_total_milli
        c, ratio, w = task.cpu_milli, self.ratio, self.strand_weight
        pressure: list[float] | None = None
        if task.num_gpu and not task.gpu_models and self.scarcity_weight:
            per_model = model_pressure(self.typical, rows.state)
            if np.count_nonzero(per_model) or not math.isfinite(self.scarcity_weight):
                pressure = per_model.tolist()
        neg: list[float] = []
        first = rows.first
        for i, (b, a) in enumerate(zip(before, after, strict=True)):
            j = first[i]
            if j != i and a == after[j]:  # same node, share and F(v'): same x
                neg.append(neg[j])
                continue
            cpu, idle = rows.cpu_free[i], rows.idle_milli[i]
            growth = (max(0.0, (idle - taken) - (cpu - c) * ratio)
                      - max(0.0, idle - cpu * ratio))
            x = (b - a) - (growth if w == 1.0 else w * growth)
            if pressure is not None:
                x = x - self.scarcity_weight * pressure[rows.model[i]] * taken
            neg.append(-x / self.scale)
        return [trunc(MAX_SCORE / (e + 1.0)) for e in np.exp(neg).tolist()]


def factory(args: Mapping[str, object] | None = None) -> Hetsched:
    """Args: ``typical`` (the expected mix, required), ``scale_milli``, ``strand_weight``."""
    args = dict(args or {})
    typical = args.pop("typical", None)
    if not isinstance(typical, TypicalTasks):
        raise ValueError(f"policy {NAME!r} needs 'typical': the TypicalTasks of the workload")
    return Hetsched(typical, **take(NAME, args, DEFAULTS))
