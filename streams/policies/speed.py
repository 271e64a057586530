"""Speed term: how fast the task runs on the node's GPU model, as the scheduler was told.

Why a term of its own: measured speeds of training jobs rank GPU models differently
for every job (issue 35: a V100 runs a job 0.66x to 11.6x as fast as a K80), so no
catalog figure (``compute``, ``data``) can say where a job runs best. The task
carries what the scheduler knows of its speeds (``TaskRequest.speeds``: relative to
its fastest model, 1.0 there); the term is ``scale`` x that speed, so the fastest
model scores ``scale`` and a model half as fast half of it. A task that carries no
speeds scores 0 everywhere: the term changes nothing for it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

import numpy as np

from streams.core.policy import GpuTiebreak, NodesView, Options, ScoreOnly
from streams.core.request import TaskRequest
from streams.policies._args import take

if TYPE_CHECKING:
    from streams.core.state import ClusterState

NAME = "speed"
DEFAULTS = {"scale": 100.0}


class Speed(ScoreOnly):
    name = NAME
    gpu_tiebreak: GpuTiebreak = "least_free"
    node_local = True

    def __init__(self, scale: float) -> None:
        self.scale = scale

    def score(self, task: TaskRequest, view: NodesView, options: Options) -> np.ndarray:
        if not task.speeds or not task.num_gpu:
            return np.zeros(len(options))
        told = dict(task.speeds)
        per_model = np.array([told.get(name, 0.0) for name in view.state.model_names])
        return self.scale * view.per_model(per_model)[options.node]

    def native_term(self, task: TaskRequest, state: ClusterState) -> tuple[str, tuple]:
        """This score as the core's scheduler pass takes it (``hetsched_core.score_feasible``)."""
        if not task.speeds or not task.num_gpu:
            return NAME, (self.scale, None)
        told = dict(task.speeds)
        return NAME, (self.scale, [told.get(name, 0.0) for name in state.model_names])


def factory(args: Mapping[str, object] | None = None) -> Speed:
    return Speed(**take(NAME, args, DEFAULTS))
