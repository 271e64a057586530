"""The oracle of the scheduler's node classes (native/src/classes.rs, ``node_classes``).

Written from the rule: two nodes of ``idx`` are of one class when their model, free CPU
and memory, health, GPU count, free share of every GPU and tag counts are all equal;
classes are numbered in the order their first node appears in ``idx``, and each class
is represented by that first node.
"""

from __future__ import annotations

import numpy as np

from streams.core.state import ClusterState


def node_classes(state: ClusterState, idx: np.ndarray) -> tuple[list[int], list[int]]:
    class_of: dict[tuple[int, ...], int] = {}
    reps: list[int] = []
    inverse: list[int] = []
    for v in idx.tolist():
        key = (int(state.model[v]), int(state.cpu_free[v]), int(state.mem_free[v]),
               int(state.healthy[v]), int(state.gpu_count[v]),
               *state.gpu_free[v].tolist(), *state.tag_count[v].tolist())
        if key not in class_of:
            class_of[key] = len(reps)
            reps.append(v)
        inverse.append(class_of[key])
    return reps, inverse
