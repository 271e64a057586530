"""Compute-intensive term: GPU compute x (1 - GPU utilisation), scaled to 0..100.

Prefers the option whose GPU(s) offer the most unused FP32 throughput: peak
TFLOPS of the node's model (GPU catalog) times the free share of the GPU the
task lands on (an idle GPU for whole-GPU tasks). Utilisation here is the
allocated share; telemetry-driven utilisation can replace it later without
changing the interface. CPU-only tasks score 0.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from streams.core.policy import GpuTiebreak, NodesView, Options, ScoreOnly
from streams.core.request import MILLI_PER_GPU, TaskRequest
from streams.policies._args import take

NAME = "compute"
DEFAULTS = {"scale": 100.0}


def free_fraction(task: TaskRequest, options: Options) -> np.ndarray:
    """1 - utilisation of the GPU(s) each option uses."""
    if task.fractional:
        return options.free / MILLI_PER_GPU
    return np.full(len(options), 1.0 if task.num_gpu else 0.0)


class ComputeIntensive(ScoreOnly):
    name = NAME
    gpu_tiebreak: GpuTiebreak = "least_free"
    node_local = True

    def __init__(self, scale: float) -> None:
        self.scale = scale

    def score(self, task: TaskRequest, view: NodesView, options: Options) -> np.ndarray:
        figures = view.state.model_fp32_tflops
        if figures.size == 0 or task.num_gpu == 0:
            return np.zeros(len(options))
        tflops = view.per_model(figures)[options.node] / figures.max()
        return self.scale * tflops * free_fraction(task, options)


def factory(args: Mapping[str, object] | None = None) -> ComputeIntensive:
    return ComputeIntensive(**take(NAME, args, DEFAULTS))
