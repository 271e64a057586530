"""The compute and data terms against their documented formulas, where ``./dev mutate``
found only the winning node checked.

compute: scale * (TFLOPS of the model / the fastest present) * free share of the GPU
the task lands on (1 for whole GPUs); CPU-only tasks score 0.
data: scale * (bandwidth / the fastest present) * free share, minus ``transfer_cost``
on every node but the task's ``input_node``.
The catalog figures are set by hand (models "slow" and "fast"), so the expected
values are plain arithmetic.
"""

from __future__ import annotations

import numpy as np
import pytest

from streams.core.policy import NodesView, Options
from streams.core.request import TaskRequest
from streams.core.state import ClusterState
from streams.policies import compute, data
from streams.policies.compute import free_fraction


def cluster(models=("slow", "fast"), figures=(10.0, 40.0)) -> ClusterState:
    """One node per model, one GPU each; the first GPU has 400 milli taken."""
    state = ClusterState(capacity=2)
    for m in models:
        state.add_node(m, 8000, 1 << 20, 1, m)
    state.allocate(TaskRequest("pre", 0, 0, 1, 400), 0, (0,))
    state.model_fp32_tflops = np.array(figures)
    state.model_bandwidth_gbps = np.array(figures) * 20
    return state


def scores(policy, state: ClusterState, task: TaskRequest) -> list[float]:
    view = NodesView(state, np.arange(state.n))
    return policy.score(task, view, Options.for_task(task, view)).tolist()


SHARE = TaskRequest("share", 1000, 0, 1, 300)
WHOLE = TaskRequest("whole", 1000, 0, 1, 1000)
CPU = TaskRequest("cpu", 1000, 0)


def test_compute_is_relative_tflops_times_the_free_share():
    # slow: 10/40 * 600/1000 = 0.15; fast: 1 * 1
    assert scores(compute.factory(), cluster(), SHARE) == pytest.approx([15.0, 100.0])
    # a whole GPU task takes idle GPUs: free share 1 (feasibility is Fit's business)
    assert scores(compute.factory({"scale": 50}), cluster(), WHOLE) == [12.5, 50.0]


def test_compute_with_one_model_scores_its_free_share():
    assert scores(compute.factory(), cluster(("fast",), (40.0,)), SHARE) == [60.0]


def test_cpu_only_tasks_score_zero_even_without_catalog_figures():
    unknown = cluster(("x", "y"), (0.0, 0.0))  # models the catalog does not know
    assert scores(compute.factory(), unknown, CPU) == [0.0, 0.0]
    assert scores(data.factory(), unknown, CPU) == [0.0, 0.0]


def test_free_fraction_is_the_share_left_on_the_gpu_or_one_or_zero():
    state = cluster()
    view = NodesView(state, np.arange(2))
    assert free_fraction(SHARE, Options.for_task(SHARE, view)).tolist() == [0.6, 1.0]
    assert free_fraction(WHOLE, Options.for_task(WHOLE, view)).tolist() == [1.0, 1.0]
    assert free_fraction(CPU, Options.for_task(CPU, view)).tolist() == [0.0, 0.0]


def test_data_is_relative_bandwidth_times_free_share_minus_transfer_cost():
    # bandwidth 200 and 800: slow 0.25 * 0.6 = 0.15, fast 1
    assert scores(data.factory(), cluster(), SHARE) == pytest.approx([15.0, 100.0])
    moved = TaskRequest("share", 1000, 0, 1, 300, input_node="slow")
    assert scores(data.factory({"transfer_cost": 30}), cluster(), moved) == pytest.approx(
        [15.0, 70.0])


def test_an_input_node_not_in_the_cluster_costs_the_transfer_everywhere():
    gone = TaskRequest("cpu", 1000, 0, input_node="gone")
    state = cluster()
    state.add_node("third", 8000, 1 << 20, 0, None)
    assert scores(data.factory(), state, gone) == [-20.0, -20.0, -20.0]


@pytest.mark.parametrize("mod", [compute, data])
def test_a_bad_argument_is_reported_with_the_policy_name(mod):
    with pytest.raises(ValueError, match=f"policy '{mod.NAME}': unknown arguments"):
        mod.factory({"nope": 1})
