"""The scheduler's plain-Python scoring of a few nodes equals the numpy path bit for bit.

When at most a handful of nodes need re-scoring, ``_score_feasible_py`` builds
the options as lists and calls each policy's ``score_rows`` instead of a dozen
numpy calls per policy (replay speed, issue 9). Decisions, candidate scores and
terms hinge on the last bits (FGD's 49-or-50 cases, signed zeros of BestFit's
truncation, which reach the decision bytes), so every returned array is
compared byte for byte with the array path on random cluster states and tasks.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from streams.core.profile import Profile, get_profile
from streams.core.request import MILLI_PER_GPU, TaskRequest
from streams.core.scheduler import (
    Scheduler,
    _score_feasible_native,
    _score_feasible_np,
    _score_feasible_py,
)
from streams.core.state import ClusterState
from streams.policies.fragmentation import TypicalTasks
from streams.profiles.compile import compile_profile
from streams.profiles.service import typical_tasks

MODELS = ["A100", "V100M32", "T4", "P100"]


def _constrained_mix() -> TypicalTasks:
    """A mix where some typical tasks need given models (hetsched's scarcity term)."""
    rng = np.random.default_rng(3)
    tasks = []
    for i in range(300):
        n = int(rng.choice([0, 1, 1, 1, 2, 4, 8]))
        milli = int(rng.choice([100, 250, 500, 700, 1000])) if n == 1 else (1000 if n else 0)
        models = (("A100",), ("V100M32", "T4"), ())[i % 3] if n else ()
        tasks.append(TaskRequest(f"t{i}", int(rng.integers(0, 9)) * 4000, 1024, n, milli,
                                 models))
    return TypicalTasks.from_tasks(tasks)


def _schedulers() -> list[Scheduler]:
    out = []
    for mix in (typical_tasks(), _constrained_mix()):
        ctx = {"typical": mix, "seed": 0}
        for name in ("hetsched", "fgd", "bestfit"):
            out.append(compile_profile(get_profile(name), ctx))
        out.append(compile_profile(Profile("mixed", {"hetsched": 1.0, "bestfit": 0.3,
                                                     "fgd": 2.0}), ctx))
    out.append(compile_profile(Profile("tuned", {"hetsched": 1.0}, {"hetsched": {
        "strand_weight": 0.5, "scarcity_weight": 2.0}}), {"typical": _constrained_mix()}))
    out.append(compile_profile(Profile("lowest", {"bestfit": 1.0},
                                       gpu_tiebreak="lowest_index"), {}))
    return out


def _state(rng: np.random.Generator) -> ClusterState:
    state = ClusterState()
    for v in range(40):
        gpus = int(rng.choice([0, 1, 2, 4, 8]))
        model = MODELS[int(rng.integers(0, len(MODELS)))] if gpus else None
        state.add_node(f"n{v}", int(rng.integers(1, 80)) * 4000, int(rng.integers(8, 600)) * 1024,
                       gpus, model)
    for t in range(150):  # random running tasks: fractional shares, whole GPUs, CPU only
        v = int(rng.integers(0, state.n))
        free = state.gpu_free[v, : int(state.gpu_count[v])]
        cpu = int(rng.integers(0, 6)) * 2000
        if cpu > state.cpu_free[v] or state.mem_free[v] < 1024:
            continue
        kind = rng.random()
        if kind < 0.5 and free.shape[0] and free.max() > 0:
            g = int(rng.integers(0, free.shape[0]))
            share = int(rng.integers(1, int(free[g]) + 1)) if free[g] else 0
            if share == 0:
                continue
            state.allocate(TaskRequest(f"t{t}", cpu, 1024, 1, share), v, (g,))
        elif kind < 0.8:
            idle = [g for g in range(free.shape[0]) if free[g] == MILLI_PER_GPU]
            if not idle:
                continue
            n = int(rng.integers(1, len(idle) + 1))
            state.allocate(TaskRequest(f"t{t}", cpu, 1024, n, MILLI_PER_GPU), v,
                           tuple(idle[:n]))
        else:
            state.allocate(TaskRequest(f"t{t}", cpu, 1024), v, ())
    for v in rng.choice(state.n, 3, replace=False).tolist():
        state.set_health(v, False)
    return state


def _tasks(rng: np.random.Generator) -> list[TaskRequest]:
    out = []
    for i in range(60):
        n = int(rng.choice([0, 1, 1, 1, 2, 4, 8]))
        milli = int(rng.choice([100, 250, 500, 810, 1000])) if n == 1 else (1000 if n else 0)
        models = (("A100",), ("V100M32", "T4"), (), (), ("H100",))[i % 5] if n else ()
        out.append(TaskRequest(f"q{i}", int(rng.integers(0, 20)) * 2000,
                               int(rng.integers(0, 64)) * 1024, n, milli, models))
    return out


def _same(a: np.ndarray | None, b: np.ndarray | None) -> bool:
    if a is None or b is None:
        return a is None and b is None
    return a.shape == b.shape and a.dtype == b.dtype and a.tobytes() == b.tobytes()


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_scalar_scoring_equals_the_array_path_bit_for_bit(seed: int) -> None:
    rng = np.random.default_rng(seed)
    compared = scored = 0
    for sched in _schedulers():
        assert sched.scalar
        state = _state(rng)
        for task in _tasks(rng):
            for size in (1, 2, 3, 6, 10):
                idx = np.sort(rng.choice(state.n, size, replace=False)).astype(np.intp)
                py = _score_feasible_py(state, sched, task, idx)
                ar = _score_feasible_np(state, sched, task, idx)
                if ar[0].shape[0] == 0:  # nothing feasible: only "none" is compared
                    assert py[0].shape[0] == 0, (sched.profile, task, idx)
                    continue
                assert _same(py[0], ar[0]) and _same(py[1], ar[1]), (sched.profile, task, idx)
                assert _same(py[2], ar[2]), (sched.profile, task, idx, py[2], ar[2])
                for p, a in zip(py[3], ar[3], strict=True):
                    assert _same(p, a), (sched.profile, task, idx, p, a)
                compared += 1
                scored += py[0].shape[0]
    assert compared > 1000 and scored > 1000  # the random states do exercise scoring


@pytest.mark.parametrize("seed", [4, 5, 6])
def test_the_cores_scoring_pass_equals_the_python_paths_bit_for_bit(seed: int) -> None:
    # Profiles of core policies only score in hetsched_core.score_feasible; the Python
    # paths remain for policies written in Python, and are the core pass's oracle here
    # (their policies' scores are held to tests/oracle by test_fragmentation_core.py).
    rng = np.random.default_rng(seed)
    compared = fractional = told = located = 0
    mix = _constrained_mix()
    speedy = [compile_profile(Profile("speedy", {"hetsched": 1.0, "speed": 0.5}),
                              {"typical": mix}),
              compile_profile(Profile("neg", {"bestfit": 1.0, "speed": 1.0},
                                      {"speed": {"scale": -40.0}}), {"typical": mix}),
              # the time simulator's profile, told speeds (streams/sim/time/cli.py)
              compile_profile(Profile("time", {"hetsched": 1.0, "locality": 1.0,
                                               "speed": 100.0}), {"typical": mix}),
              compile_profile(Profile("near", {"fgd": 1.0, "locality": 0.5},
                                      {"locality": {"cap_s": 20.0}}), {"typical": mix}),
              # a first weight other than 1 (the core sums the first term apart)
              compile_profile(Profile("weighted", {"bestfit": 0.7, "hetsched": 1.0}),
                              {"typical": mix})]
    for sched in [*_schedulers(), *speedy]:
        assert sched.native
        state = _state(rng)
        for task in _tasks(rng):
            if task.num_gpu and rng.random() < 0.6:  # told speeds on some models
                task = dataclasses.replace(task, speeds=tuple(
                    (m, float(rng.choice([0.25, 0.5, 1.0]))) for m in MODELS[:3]))
                told += 1
            if rng.random() < 0.5:  # an input on one node (or on one the cell does not know)
                home = int(rng.integers(0, state.n + 2))
                task = dataclasses.replace(task, input_node=f"n{home}")
                located += 1
            for size in (1, 3, 10, 40):
                idx = np.sort(rng.choice(state.n, size, replace=False)).astype(np.intp)
                core = _score_feasible_native(state, sched, task, idx)
                ar = _score_feasible_np(state, sched, task, idx)
                if ar[0].shape[0] == 0:
                    assert core[0].shape[0] == 0 and core[1] is None and core[3] == []
                    continue
                assert _same(core[0], ar[0]) and _same(core[1], ar[1]), (sched.profile, task)
                assert _same(core[2], ar[2]), (sched.profile, task, core[2], ar[2])
                assert len(core[3]) == len(ar[3])
                for c, a in zip(core[3], ar[3], strict=True):
                    assert _same(c, a), (sched.profile, task, c, a)
                compared += 1
                fractional += task.fractional
    assert compared > 1000 and fractional > 100 and told > 100 and located > 100


@pytest.mark.parametrize("tiebreak", ["least_free", "lowest_index"])
def test_a_tie_between_gpus_whose_free_shares_differ_less_than_their_indices(
        tiebreak: str) -> None:
    """Options of one node tie on a node-level score (bestfit): the GPU with the least free
    share wins under ``least_free`` even where the shares differ by less than the GPUs'
    indices (502 on GPU 0, 500 on GPU 7), a case random states hardly draw; the lowest
    index wins under ``lowest_index``."""
    state = ClusterState()
    state.add_node("n0", 32000, 65536, 8, "A100")
    state.allocate(TaskRequest("a", 0, 0, 1, 498), 0, (0,), task_id="a")
    state.allocate(TaskRequest("b", 0, 0, 1, 500), 0, (7,), task_id="b")
    sched = compile_profile(Profile("tie", {"bestfit": 1.0}, gpu_tiebreak=tiebreak), {})
    task = TaskRequest("t", 1000, 1024, 1, 100)
    idx = np.arange(1, dtype=np.intp)
    core = _score_feasible_native(state, sched, task, idx)
    assert core[1] is not None and core[1].tolist() == [7 if tiebreak == "least_free" else 0]
    for path in (_score_feasible_np, _score_feasible_py):
        assert path(state, sched, task, idx)[1].tolist() == core[1].tolist()


def test_a_gpu_node_of_no_known_model_is_scored_against_the_no_model_column() -> None:
    """A node may report GPUs without a model name (model id -1): hetsched's scarcity
    pressure of its options is the last column, "no model", in the core as in Python."""
    state = ClusterState()
    state.add_node("named", 32000, 65536, 4, "A100")
    state.add_node("unnamed", 32000, 65536, 4, None)
    sched = compile_profile(get_profile("hetsched"), {"typical": _constrained_mix()})
    task = TaskRequest("t", 4000, 1024, 1, 1000)
    idx = np.arange(2, dtype=np.intp)
    pressure = sched.policies[0]._pressure(task, state)  # type: ignore[attr-defined]
    assert pressure is not None and pressure[-1] != pressure[0]  # the columns differ
    core = _score_feasible_native(state, sched, task, idx)
    assert core[0].tolist() == [0, 1]
    for path in (_score_feasible_np, _score_feasible_py):
        found = path(state, sched, task, idx)
        assert _same(core[2], found[2]) and _same(core[3][0], found[3][0])


def test_a_profile_with_a_python_policy_keeps_the_python_paths() -> None:
    ctx = {"typical": typical_tasks(), "seed": 0}
    assert not compile_profile(get_profile("balanced"), ctx).native  # compute, data: Python
    assert compile_profile(get_profile("hetsched"), ctx).native
