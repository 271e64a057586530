"""Random baseline: a uniformly random feasible node, then a random fitting GPU.

Randomness is seeded from the policy's ``seed`` and the state's arrival count,
so the same log replays to the same decisions. Not node-local (never cached).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from streams.core.policy import GpuTiebreak, NodesView, Options, ScoreOnly
from streams.core.request import TaskRequest
from streams.policies._args import take

NAME = "random"
DEFAULTS = {"seed": 0}
_GPU_KEY_SPAN = 1 << 8


class RandomFit(ScoreOnly):
    name = NAME
    gpu_tiebreak: GpuTiebreak = "lowest_index"
    node_local = False

    def __init__(self, seed: int) -> None:
        self.seed = int(seed)

    def score(self, task: TaskRequest, view: NodesView, options: Options) -> np.ndarray:
        rng = np.random.default_rng([self.seed, view.state.arrivals])
        node_key = rng.permutation(len(view))[options.node]
        gpu_key = rng.permutation(len(options)) % _GPU_KEY_SPAN
        # A node's key dominates (uniform over nodes); the GPU key orders within a node.
        return (node_key * _GPU_KEY_SPAN + gpu_key).astype(np.float64)


def factory(args: Mapping[str, object] | None = None) -> RandomFit:
    return RandomFit(**take(NAME, args, DEFAULTS))
