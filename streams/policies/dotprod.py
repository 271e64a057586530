"""DotProd baseline (Tetris-style alignment, docs/packing-benchmark.md §4).

s = trunc(100 * (1 - ((C/128000)*(c/128000) + (T/8000)*(G/8000)) / 2)): the node
whose free resources align least with the request's scores highest, so large
free nodes stay large (CPU and a merged GPU dimension).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from streams.core.policy import GpuTiebreak, NodesView, Options, ScoreOnly
from streams.core.request import TaskRequest
from streams.policies._args import take

NAME = "dotprod"
DEFAULTS = {"cpu_norm_milli": 128000.0, "gpu_norm_milli": 8000.0}


class DotProd(ScoreOnly):
    name = NAME
    gpu_tiebreak: GpuTiebreak = "least_free"
    node_local = True

    def __init__(self, cpu_norm_milli: float, gpu_norm_milli: float) -> None:
        self.cpu_norm = cpu_norm_milli
        self.gpu_norm = gpu_norm_milli

    def score(self, task: TaskRequest, view: NodesView, options: Options) -> np.ndarray:
        cpu = (view.cpu_free / self.cpu_norm) * (task.cpu_milli / self.cpu_norm)
        gpu = (view.gpu_idle_milli / self.gpu_norm) * (task.gpu_total_milli / self.gpu_norm)
        return np.trunc(100 * (1 - (cpu + gpu) / 2))[options.node]


def factory(args: Mapping[str, object] | None = None) -> DotProd:
    return DotProd(**take(NAME, args, DEFAULTS))
