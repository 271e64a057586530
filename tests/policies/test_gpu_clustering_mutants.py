"""GpuClustering's scores against its documented rule, where ``./dev mutate`` found
only the winner of one case checked.

A GPU task's tag is "shared" (fractional) or "k-gpu". A node whose only tag is the
task's scores base+75, one holding it among others base+50, a node with no GPU task
base+25, else base; base = 25 * (8000 - T) // 8000 (T: the node's free milli-GPU).
CPU-only tasks score 0.
"""

from __future__ import annotations

import numpy as np
import pytest

from streams.core.policy import NodesView, Options
from streams.core.request import TaskRequest
from streams.core.state import ClusterState
from streams.policies.gpu_clustering import factory


def cluster() -> ClusterState:
    state = ClusterState(capacity=4)
    state.add_node("only", 8000, 1 << 20, 4, "T4")   # one shared task: T = 3800
    state.add_node("mixed", 8000, 1 << 20, 4, "T4")  # shared + 1-gpu: T = 2800
    state.add_node("empty", 8000, 1 << 20, 2, "T4")  # no GPU task: T = 2000
    state.add_node("other", 8000, 1 << 20, 2, "T4")  # one 1-gpu task: T = 1000
    state.allocate(TaskRequest("s1", 0, 0, 1, 200), 0, (0,))
    state.allocate(TaskRequest("s2", 0, 0, 1, 200), 1, (0,))
    state.allocate(TaskRequest("w1", 0, 0, 1, 1000), 1, (1,))
    state.allocate(TaskRequest("w2", 0, 0, 1, 1000), 3, (0,))
    return state


def node_scores(task: TaskRequest) -> list[float]:
    state = cluster()
    view = NodesView(state, np.arange(4))
    options = Options(np.arange(4), np.full(4, -1), per_node=True)  # one per node
    return factory().score(task, view, options).tolist()


# base: only 25*4200//8000 = 13, mixed 25*5200//8000 = 16, empty 25*6000//8000 = 18,
# other 25*7000//8000 = 21
def test_a_shared_task_prefers_the_node_holding_only_shared_tasks():
    assert node_scores(TaskRequest("t", 0, 0, 1, 300)) == [13 + 75, 16 + 50, 18 + 25, 21 + 0]


def test_a_one_gpu_task_prefers_the_node_holding_only_one_gpu_tasks():
    assert node_scores(TaskRequest("t", 0, 0, 1, 1000)) == [13 + 0, 16 + 50, 18 + 25, 21 + 75]


def test_cpu_only_tasks_score_zero_on_every_option():
    assert node_scores(TaskRequest("t", 1000, 0)) == [0.0, 0.0, 0.0, 0.0]


def test_gpuclustering_takes_no_arguments_and_says_which():
    with pytest.raises(ValueError, match=r"policy 'gpuclustering' takes no arguments, got \['a'\]"):
        factory({"a": 1})
