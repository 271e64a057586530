"""The policy contract's helpers (streams/core/policy.py), where ``./dev mutate`` found
them unchecked; expected values follow from each helper's docstring."""

from __future__ import annotations

import math

import numpy as np

from streams.core.policy import NodesView, ScoreOnly, _lazy, trunc
from streams.core.request import TaskRequest
from streams.core.state import ClusterState


def test_trunc_is_numpys_for_every_float() -> None:
    for value in (2.7, -2.7, -0.3, 0.0, -0.0, math.inf, -math.inf, math.nan, 99.99999):
        got, want = trunc(value), float(np.trunc(value))
        assert (math.isnan(got) and math.isnan(want)) or (
            got == want and math.copysign(1, got) == math.copysign(1, want))


def view_of(*nodes: tuple[int, str | None], idx: list[int] | None = None):
    state = ClusterState(capacity=len(nodes))
    for i, (gpus, model) in enumerate(nodes):
        state.add_node(f"n{i}", 1000 * (i + 1), 1024, gpus, model)
    return NodesView(state, np.array(idx if idx is not None else range(len(nodes))))


def test_a_view_reads_its_nodes_once_and_keeps_the_arrays() -> None:
    view = view_of((1, "T4"), (2, "V100"), (0, None), idx=[2, 0])
    assert len(view) == 2
    first = view.cpu_free
    assert first.tolist() == [3000, 1000]       # the view's nodes, in the view's order
    assert view.cpu_free is first               # computed once, then a plain attribute
    assert view.__dict__["cpu_free"] is first
    assert isinstance(NodesView.gpu_free, _lazy)  # on the class: the descriptor itself
    assert NodesView.gpu_free.__doc__ == (
        "Free milli-share per GPU slot, shape (nodes, max_gpus); absent GPUs are 0.")
    assert NodesView.gpu_free.name == "gpu_free"


def test_per_model_figures_reach_each_node_and_gpu_less_nodes_get_zero() -> None:
    view = view_of((1, "T4"), (2, "V100"), (0, None), (4, "T4"))
    assert view.per_model(np.array([1.5, 2.5])).tolist() == [1.5, 2.5, 0.0, 1.5]


def test_a_score_only_policy_keeps_every_node() -> None:
    view = view_of((1, "T4"), (0, None), (2, "V100"))
    kept = ScoreOnly().filter(TaskRequest("t", 1000, 0, 1, 1000), view)
    assert kept.dtype == bool and kept.tolist() == [True, True, True]
