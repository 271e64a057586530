"""Data-intensive term: memory bandwidth x (1 - memory used share) - transfer cost.

Bandwidth comes from the GPU catalog (normalised by the fastest model present,
times ``scale``); the used share is the GPU's allocated share (memory follows
the share in this accounting); the transfer cost is ``transfer_cost`` when the
task names an ``input_node`` other than the candidate, else 0.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from streams.core.policy import GpuTiebreak, NodesView, Options, ScoreOnly
from streams.core.request import TaskRequest
from streams.policies._args import take
from streams.policies.compute import free_fraction

NAME = "data"
DEFAULTS = {"scale": 100.0, "transfer_cost": 20.0}


class DataIntensive(ScoreOnly):
    name = NAME
    gpu_tiebreak: GpuTiebreak = "least_free"
    node_local = True

    def __init__(self, scale: float, transfer_cost: float) -> None:
        self.scale = scale
        self.transfer_cost = transfer_cost

    def score(self, task: TaskRequest, view: NodesView, options: Options) -> np.ndarray:
        out = np.zeros(len(options))
        figures = view.state.model_bandwidth_gbps
        if figures.size and task.num_gpu:
            bw = view.per_model(figures)[options.node] / figures.max()
            out += self.scale * bw * free_fraction(task, options)
        if task.input_node is not None:
            home = view.state.node_index.get(task.input_node, -1)
            out -= np.where(view.idx[options.node] == home, 0.0, self.transfer_cost)
        return out


def factory(args: Mapping[str, object] | None = None) -> DataIntensive:
    return DataIntensive(**take(NAME, args, DEFAULTS))
