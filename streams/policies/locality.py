"""Locality: run a task near its input, priced by the time to move the input there.

Why: a workflow's second stage reads what its first stage wrote, and
rendering reads scenes from one node's disk. Moving that data costs seconds
per GB over a rack's switch and several times more across the spine. The
term is ``-weight_per_s x transfer seconds`` from the node holding the input
(``TaskRequest.input_node``: the submission's input location, or for a
dependent task the node its predecessor ran on) to each candidate:

* the input's own node costs 0, so it wins when it fits;
* a node of the same rack costs one top-of-rack hop;
* any other node costs what its link measures (``LinkMetrics`` via
  ``streams.core.topology``), else the default cross-rack link.

``input_mib`` is the data size priced (the core's request carries where the
input is, not its size; 10 GiB by default, a feature-extraction output), so
the ranking of nodes is by link speed and latency. ``cap_s`` caps the penalty
so an unmeasured, very slow link does not swamp every other term. A task
without an input location scores 0 everywhere.

Node identity matters (the price depends on which node holds the input), but
the score is still node-local in the core's sense: the task's shape key
includes ``input_node`` and a link measurement marks every node changed.
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

NAME = "locality"
DEFAULTS = {"input_mib": 10_240.0, "weight_per_s": 1.0, "cap_s": 600.0}


class Locality(ScoreOnly):
    name = NAME
    gpu_tiebreak: GpuTiebreak = "least_free"
    node_local = True

    def __init__(self, input_mib: float, weight_per_s: float, cap_s: float) -> None:
        if input_mib < 0 or weight_per_s < 0 or cap_s <= 0:
            raise ValueError(f"policy {NAME!r}: input_mib, weight_per_s >= 0 and cap_s > 0")
        self.input_mib = input_mib
        self.weight_per_s = weight_per_s
        self.cap_s = cap_s

    def transfer_s(self, task: TaskRequest, view: NodesView) -> np.ndarray | None:
        """Seconds to bring the task's input to each node of the view (None: no input)."""
        if task.input_node is None:
            return None
        state = view.state
        home = state.node_index.get(task.input_node, -1)
        if home < 0:
            return None  # input on a node this cell does not know: every node is as far
        return state.topology.transfer_s(state.node_names, home, self.input_mib,
                                         self.cap_s)[view.idx]

    def score(self, task: TaskRequest, view: NodesView, options: Options) -> np.ndarray:
        cost = self.transfer_s(task, view)
        if cost is None:
            return np.zeros(len(options))
        return -self.weight_per_s * cost[options.node]

    def native_term(self, task: TaskRequest, state: ClusterState) -> tuple[str, tuple]:
        """This score as the core's scheduler pass takes it (``hetsched_core.score_feasible``):
        the capped seconds to every node of the state, or None for a task without input."""
        home = -1 if task.input_node is None else state.node_index.get(task.input_node, -1)
        if home < 0:
            return NAME, (self.weight_per_s, None)
        return NAME, (self.weight_per_s, state.topology.transfer_s(
            state.node_names, home, self.input_mib, self.cap_s))


def factory(args: Mapping[str, object] | None = None) -> Locality:
    return Locality(**take(NAME, args, DEFAULTS))
