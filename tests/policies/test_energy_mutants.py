"""The energy term against its documented formula, where ``./dev mutate`` found most
of it unchecked.

score = scale x ((1 - busy_weight) x efficiency + busy_weight x powered), efficiency =
the node model's TFLOPS/W over the best in the cluster (a model without a TDP: 0),
powered = 1 if the node holds a task; CPU-only tasks score 0. per_work=1 (off by
default) scores a task with an input_node by bandwidth/W instead. busy_weight in
[0, 1], per_work 0 or 1. Catalog figures are set by hand, so expected values are
plain arithmetic.
"""

from __future__ import annotations

import numpy as np
import pytest

from streams.core.policy import NodesView, Options
from streams.core.request import TaskRequest
from streams.core.state import ClusterState
from streams.policies.energy import Energy, factory


def cluster(n_models: int = 3) -> ClusterState:
    """a: 40 TFLOPS / 200 W = 0.2, 400 GB/s -> 2 per W, holds one task;
    b: 0.1 TFLOPS / 1 W = 0.1, 4 GB/s -> 4 per W, idle; c: no catalog figures, idle."""
    state = ClusterState(capacity=3)
    for name in ("a", "b", "c")[:n_models]:
        state.add_node(name, 8000, 1 << 20, 1, f"m{name}")
    state.allocate(TaskRequest("cpu", 1000, 0), 0, ())
    state.model_fp32_tflops = np.array([40.0, 0.1, 0.0])[:n_models]
    state.model_bandwidth_gbps = np.array([400.0, 4.0, 0.0])[:n_models]
    state.model_tdp_w = np.array([200.0, 1.0, 0.0])[:n_models]
    return state


GPU = TaskRequest("g", 0, 0, 1, 1000)
FED = TaskRequest("g", 0, 0, 1, 1000, input_node="a")


def scores(pol: Energy, task: TaskRequest, state: ClusterState | None = None) -> list[float]:
    state = state or cluster()
    view = NodesView(state, np.arange(state.n))
    return pol.score(task, view, Options.for_task(task, view)).tolist()


def test_score_is_weighted_relative_efficiency_plus_powered():
    # rel: a 0.2/0.2 = 1, b 0.1/0.2 = 0.5, c 0; powered: a only
    assert scores(factory(), GPU) == [100.0, 25.0, 0.0]
    assert scores(factory({"busy_weight": 0.0, "scale": 10}), GPU) == [10.0, 5.0, 0.0]


def test_per_work_is_off_by_default_and_scores_fed_tasks_by_bandwidth_per_watt():
    assert scores(Energy(100.0, 0.5), FED) == [100.0, 25.0, 0.0]
    # per W: a 2, b 4 -> rel a 0.5, b 1
    assert scores(factory({"per_work": 1}), FED) == [75.0, 50.0, 0.0]
    assert scores(factory({"per_work": 1}), GPU) == [100.0, 25.0, 0.0]  # no input: TFLOPS


def test_a_node_with_one_task_is_powered():
    assert scores(factory({"busy_weight": 1.0}), GPU) == [100.0, 0.0, 0.0]


def test_cpu_only_tasks_and_clusters_without_figures_score_by_the_rule():
    assert scores(factory(), TaskRequest("c", 1000, 0)) == [0.0, 0.0, 0.0]
    one = cluster(1)
    assert scores(factory(), GPU, one) == [100.0]
    blank = cluster(1)
    blank.model_fp32_tflops = np.zeros(1)
    blank.model_tdp_w = np.zeros(1)
    assert scores(factory(), GPU, blank) == [50.0]  # efficiency 0, powered


def test_busy_weight_bounds_and_per_work_values():
    assert Energy(1.0, 0.0).busy_weight == 0.0
    assert Energy(1.0, 1.0, 1).per_work is True
    for bad in (-0.1, 1.5):
        with pytest.raises(ValueError, match=r"policy 'energy': busy_weight must be in \[0, 1\]"):
            Energy(1.0, bad)
    with pytest.raises(ValueError, match="policy 'energy': per_work must be 0 or 1"):
        Energy(1.0, 0.5, 2)
    with pytest.raises(ValueError, match="policy 'energy': unknown arguments"):
        factory({"nope": 1})
