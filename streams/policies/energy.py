"""Energy term: prefer efficient GPUs that are already powered, scaled to 0..100.

Why: an idle but powered GPU still draws a quarter or so of its TDP, and a
node with nothing on it could be powered down. Off peak, when nobody waits,
a scheduler should put work where it costs the fewest joules: on the model
with the most FP32 TFLOPS per watt (GPU catalog), and on nodes already
running something rather than waking an empty one.

score = scale x ((1 - busy_weight) x efficiency + busy_weight x powered), where
efficiency = the node model's TFLOPS/W over the best in the cluster and
powered = 1 if the node already holds a task. CPU-only tasks score 0.

``per_work=1`` (off by default) scores energy per unit of the task's own work
instead: a task that names an ``input_node`` is taken as data intensive and
scored by memory bandwidth per watt, any other by FP32 TFLOPS per watt. Why:
FP32 TFLOPS/W favours a T4 for everything, but a T4 moves data at a sixth of an
A100's bandwidth, so bandwidth-bound work takes six times as long there and
costs more joules per task than on the A100 (catalog figures: A100 2,039 GB/s at
400 W, T4 320 GB/s at 70 W). The same input-node rule as the time simulator's
model speed (``streams.sim.time.telemetry.work_kind``).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from streams.core.policy import GpuTiebreak, NodesView, Options, ScoreOnly
from streams.core.request import TaskRequest
from streams.policies._args import take

NAME = "energy"
DEFAULTS = {"scale": 100.0, "busy_weight": 0.5, "per_work": 0.0}


class Energy(ScoreOnly):
    name = NAME
    gpu_tiebreak: GpuTiebreak = "least_free"
    node_local = True

    def __init__(self, scale: float, busy_weight: float, per_work: float = 0.0) -> None:
        if not 0.0 <= busy_weight <= 1.0:
            raise ValueError(f"policy {NAME!r}: busy_weight must be in [0, 1]")
        if per_work not in (0, 1):
            raise ValueError(f"policy {NAME!r}: per_work must be 0 or 1")
        self.scale = scale
        self.busy_weight = busy_weight
        self.per_work = bool(per_work)

    def score(self, task: TaskRequest, view: NodesView, options: Options) -> np.ndarray:
        state = view.state
        if task.num_gpu == 0 or state.model_tdp_w.size == 0:
            return np.zeros(len(options))
        tdp = state.model_tdp_w
        data = self.per_work and task.input_node is not None
        figure = state.model_bandwidth_gbps if data else state.model_fp32_tflops
        eff = np.divide(figure, tdp, out=np.zeros_like(tdp), where=tdp > 0)
        best = float(eff.max())
        rel = view.per_model(eff / best if best > 0 else eff)[options.node]
        powered = (state.pods[view.idx] > 0)[options.node].astype(np.float64)
        return self.scale * ((1.0 - self.busy_weight) * rel + self.busy_weight * powered)


def factory(args: Mapping[str, object] | None = None) -> Energy:
    return Energy(**take(NAME, args, DEFAULTS))
