"""The scheduler's plain-Python scoring of a few nodes gives the numpy path's results.

``_score_feasible_py`` promises the same feasible nodes, options, weighted totals and
best option per node as ``_score_feasible_np``. ``./dev mutate`` found that no test
compared them with a weight other than 1, with no scoring policy (``fit`` alone), or
when nothing fits; here every case is run on both paths and compared whole.
"""

from __future__ import annotations

import numpy as np
import pytest

from streams.core.profile import Profile
from streams.core.request import TaskRequest
from streams.core.scheduler import _score_feasible_np, _score_feasible_py
from streams.core.state import ClusterState
from streams.policies.fragmentation import TypicalTasks
from streams.profiles.compile import compile_profile

CTX = {"typical": TypicalTasks.from_tasks([TaskRequest("w", 1000, 0, 1, 500)], coverage=1.0),
       "seed": 3}


def cluster() -> ClusterState:
    """max_gpus 4: the tie-break key's width is then exactly one above b's last GPU."""
    state = ClusterState(capacity=2, max_gpus=4)
    for name, cpu, gpus, model in (("a", 8000, 2, "A100"), ("b", 4000, 4, "T4"),
                                   ("c", 16000, 1, "A100")):
        state.add_node(name, cpu, 65536, gpus, model)
    state.allocate(TaskRequest("used", 1000, 0, 1, 300), state.node_index["a"], (1,))
    # b's GPUs free 301, 1000, 1000, 300 milli: the least free one has the highest index
    state.allocate(TaskRequest("used2", 0, 0, 1, 699), state.node_index["b"], (0,))
    state.allocate(TaskRequest("used3", 0, 0, 1, 700), state.node_index["b"], (3,))
    return state


PROFILES = {
    "fit alone (no scoring policy)": {"fit": 1.0},
    "bestfit weighted 2": {"bestfit": 2.0},
    "bestfit weighted 0.5 and fgd": {"bestfit": 0.5, "fgd": 1.0},
}
TASKS = [
    TaskRequest("cpu-only", 2000, 1024),
    TaskRequest("whole", 2000, 1024, 1, 1000),
    TaskRequest("share", 2000, 1024, 1, 300),
    TaskRequest("a100-share", 2000, 1024, 1, 500, ("A100",)),
    TaskRequest("nowhere", 64000, 1024),
]


@pytest.mark.parametrize("task", TASKS, ids=lambda t: t.task)
@pytest.mark.parametrize("weights", list(PROFILES.values()), ids=list(PROFILES))
def test_the_plain_python_path_matches_the_numpy_path(weights, task):
    state = cluster()
    sched = compile_profile(Profile("p", weights), CTX)
    idx = np.arange(state.n)
    py_pos, py_gpu, py_total, py_scores = _score_feasible_py(state, sched, task, idx)
    np_pos, np_gpu, np_total, np_scores = _score_feasible_np(state, sched, task, idx)
    assert py_pos.dtype == np_pos.dtype == np.intp
    assert py_pos.tolist() == np_pos.tolist()
    assert (py_gpu is None) == (np_gpu is None)
    if py_gpu is not None and np_gpu is not None:
        assert py_gpu.tolist() == np_gpu.tolist()
    assert py_total.shape == np_total.shape and py_total.dtype == np.float64
    assert np.allclose(py_total, np_total)
    assert len(py_scores) == len(np_scores)
    for a, b in zip(py_scores, np_scores, strict=True):
        assert np.allclose(a, b)


def test_a_share_goes_to_the_least_free_gpu_that_fits_whatever_its_index():
    state = cluster()
    sched = compile_profile(Profile("p", {"fit": 1.0}), CTX)
    b = state.node_index["b"]
    pos, gpu, _, _ = _score_feasible_py(state, sched, TaskRequest("s", 0, 0, 1, 300),
                                        np.array([b]))
    assert pos.tolist() == [0] and gpu is not None and gpu.tolist() == [3]


def test_fit_alone_scores_every_feasible_node_zero_and_a_weight_scales_the_total():
    state = cluster()
    idx = np.arange(state.n)
    task = TaskRequest("whole", 2000, 1024, 1, 1000)
    pos, _, total, scores = _score_feasible_py(state, compile_profile(Profile("p", {"fit": 1})),
                                               task, idx)
    assert pos.tolist() == [0, 1, 2] and total.tolist() == [0.0, 0.0, 0.0] and scores == []
    _, _, one, _ = _score_feasible_py(state, compile_profile(Profile("p", {"bestfit": 1.0})),
                                      task, idx)
    _, _, two, _ = _score_feasible_py(state, compile_profile(Profile("p", {"bestfit": 2.0})),
                                      task, idx)
    assert np.allclose(two, 2 * one) and not np.allclose(one, 0.0)
