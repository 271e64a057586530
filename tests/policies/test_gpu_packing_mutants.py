"""GpuPacking's tiers against docs/packing-benchmark.md §4, where ``./dev mutate``
found only the winners of two cases checked.

Node wholly idle (f GPUs): max(33 - f, f); a fractional task on a GPU already shared
with l free (the least free GPU that fits): max(100 - (l // 10) // 10, 50); a task
that would use idle GPUs of a partly used node: max(50 - GPUs used, 33); CPU-only
tasks score 0.
"""

from __future__ import annotations

import numpy as np
import pytest

from streams.core.policy import NodesView, Options
from streams.core.request import TaskRequest
from streams.core.state import ClusterState
from streams.policies.gpu_packing import factory, least_free_fitting


def cluster() -> ClusterState:
    state = ClusterState(capacity=6)
    for name, gpus in (("idle1", 1), ("idle20", 20), ("shared", 2), ("exact", 2),
                       ("part", 2), ("big", 24)):
        state.add_node(name, 8000, 1 << 20, gpus, "T4")
    used = {("shared", 0): 650, ("exact", 0): 700, ("part", 0): 900, ("big", 0): 100}
    for k, ((node, gpu), milli) in enumerate(used.items()):
        state.allocate(TaskRequest(f"pre{k}", 0, 0, 1, milli), state.node_index[node], (gpu,))
    return state


def node_scores(task: TaskRequest) -> list[float]:
    state = cluster()
    view = NodesView(state, np.arange(state.n))
    options = Options(np.arange(state.n), np.full(state.n, -1), per_node=True)
    return factory().score(task, view, options).tolist()


def test_a_fractional_task_fills_the_least_free_shared_gpu_that_fits():
    # idle1: max(32, 1); idle20: max(13, 20); shared: l = 350 -> 100 - 3;
    # exact: l = 300 (fits exactly) -> 100 - 3; part: only the idle GPU fits -> 50 - 1;
    # big: l = 900 -> 100 - 9
    assert node_scores(TaskRequest("t", 0, 0, 1, 300)) == [32, 20, 97, 97, 49, 91]


def test_least_free_fitting_is_the_least_free_share_per_node():
    state = cluster()
    view = NodesView(state, np.arange(state.n))
    got = least_free_fitting(TaskRequest("t", 0, 0, 1, 300), view).tolist()
    assert got[2:] == [350, 300, 1000, 900]


def test_a_whole_gpu_task_on_a_partly_used_node_scores_50_minus_its_gpus_at_least_33():
    # shared/exact/part/big are partly used: 50 - 1 = 49; idle nodes as above
    assert node_scores(TaskRequest("t", 0, 0, 1, 1000)) == [32, 20, 49, 49, 49, 49]
    assert node_scores(TaskRequest("t", 0, 0, 20, 1000))[5] == 33  # max(50 - 20, 33)
    assert node_scores(TaskRequest("t", 0, 0, 16, 1000))[5] == 34  # max(50 - 16, 33)


def test_cpu_only_tasks_score_zero_on_every_option():
    assert node_scores(TaskRequest("t", 1000, 0)) == [0.0] * 6


def test_gpupacking_takes_no_arguments_and_says_which():
    with pytest.raises(ValueError, match=r"policy 'gpupacking' takes no arguments, got \['a'\]"):
        factory({"a": 1})
