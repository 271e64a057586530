"""BestFit baseline (docs/packing-benchmark.md §4): the node left with the least CPU and GPU.

s = trunc(100 * (1 - (0.5 * (C - c) / 128000 + 0.5 * (T - G) / 8000))), where C
is free CPU, T free milli-GPU, c and G the task's CPU and total GPU request.
The normalisers are the paper simulator's constants (128 cores, 8 GPUs).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from streams.core.policy import GpuTiebreak, NodesView, OptionRows, Options, ScoreOnly, trunc
from streams.core.request import TaskRequest
from streams.policies._args import take

NAME = "bestfit"
DEFAULTS = {"cpu_norm_milli": 128000.0, "gpu_norm_milli": 8000.0}


class BestFit(ScoreOnly):
    name = NAME
    gpu_tiebreak: GpuTiebreak = "least_free"
    node_local = True

    def __init__(self, cpu_norm_milli: float, gpu_norm_milli: float) -> None:
        self.cpu_norm = cpu_norm_milli
        self.gpu_norm = gpu_norm_milli

    def score(self, task: TaskRequest, view: NodesView, options: Options) -> np.ndarray:
        cpu_left = options.at(view.cpu_free - task.cpu_milli)
        gpu_left = options.at(view.gpu_idle_milli - task.gpu_total_milli)
        waste = 0.5 * cpu_left / self.cpu_norm + 0.5 * gpu_left / self.gpu_norm
        return np.trunc(100 * (1 - waste))

    def native_term(self, task: TaskRequest, state: object) -> tuple[str, tuple]:
        """This score as the core's scheduler pass takes it (``hetsched_core.score_feasible``)."""
        return NAME, (self.cpu_norm, self.gpu_norm)

    def score_rows(self, task: TaskRequest, rows: OptionRows) -> list[float]:
        """``score`` of a few options (see ``OptionRows``): the same operations per option."""
        c, g = task.cpu_milli, task.gpu_total_milli
        return [trunc(100 * (1 - (0.5 * (cpu - c) / self.cpu_norm
                                  + 0.5 * (idle - g) / self.gpu_norm)))
                for cpu, idle in zip(rows.cpu_free, rows.idle_milli, strict=True)]


def factory(args: Mapping[str, object] | None = None) -> BestFit:
    return BestFit(**take(NAME, args, DEFAULTS))
