"""The compiled fragmentation table and scores (hetsched_core) equal their oracles, to the bit.

FGD's published scores hinge on the last bits of F (the 49-or-50 cases of
docs/packing-benchmark.md §4), so every comparison here is exact: the node rows the
core keeps, F(v) and F(v') of every option of random tasks on random cluster states,
against tests/oracle/fragmentation.py. The oracle's own two statements of the sum
(one row in Python, many rows with ``cumsum``) are checked against each other first.
"""

from __future__ import annotations

import math

import hetsched_core
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streams.core.policy import NodesView, OptionRows, Options
from streams.core.request import TaskRequest
from streams.core.state import ClusterState
from streams.policies.fgd import Fgd, frag_delta, frag_delta_rows
from streams.policies.fragmentation import FragCache, TypicalTasks
from streams.policies.hetsched import Hetsched
from streams.profiles.service import typical_tasks
from tests.oracle import fragmentation as oracle
from tests.oracle import scores as oracle_scores

MODELS = ["A100", "V100M32", "T4"]


def _mixes() -> list[TypicalTasks]:
    rng = np.random.default_rng(7)
    tasks = []
    for i in range(400):
        n = int(rng.choice([0, 1, 1, 1, 2, 4, 8]))
        milli = int(rng.choice([100, 250, 300, 500, 700, 1000])) if n == 1 else (1000 if n else 0)
        models = (("A100",), ("V100M32", "T4"), ())[i % 3] if n else ()
        tasks.append(TaskRequest(f"t{i}", int(rng.integers(0, 9)) * 4000,
                                 1024, n, milli, models))
    return [typical_tasks(), TypicalTasks.from_tasks(tasks)]


def test_the_oracles_one_row_equals_its_vectorized_rows_bit_for_bit() -> None:
    rng = np.random.default_rng(11)
    for typical in _mixes():
        model_ok = typical.model_ok(MODELS)
        rows = 2000
        gpus = rng.integers(0, 9, rows)
        shares = rng.choice([0, 50, 100, 250, 300, 400, 500, 650, 750, 900, 1000], (rows, 8))
        gpu_free = np.where(np.arange(8)[None, :] < gpus[:, None], shares, 0).astype(np.int64)
        cpu_free = (rng.integers(0, 33, rows) * 2000).astype(np.int64)
        model = rng.integers(-1, len(MODELS), rows)
        cnt, frag_lt = oracle.aggregates(gpu_free, typical)
        code0 = oracle.base_code(model_ok[:, model].T, typical)
        expected = oracle.fragmentation(cpu_free, gpu_free.sum(axis=1), code0, cnt, frag_lt,
                                        typical)
        for v in range(rows):
            c, f, c0, total = oracle.fragmentation_row(
                gpu_free[v].tolist(), int(cpu_free[v]), model_ok[:, model[v]].tolist(), typical)
            assert c == cnt[v].tolist() and f == frag_lt[v].tolist() and c0 == code0[v].tolist()
            assert np.float64(total).tobytes() == expected[v].tobytes(), v


def test_the_oracles_ordered_sum_of_free_aggregates_equals_its_vectorized_sum() -> None:
    rng = np.random.default_rng(5)
    for typical in _mixes():
        k = len(typical)
        rows = 2000
        cpu_free = (rng.integers(0, 33, rows) * 2000).astype(np.int64)
        idle = rng.integers(0, 8001, rows).astype(np.int64)
        code0 = (8 * typical.cpu_only[None, :] + 4 * rng.integers(0, 2, (rows, k))).astype(
            np.int64)
        cnt = rng.integers(0, 9, (rows, k)).astype(np.int64)
        frag = rng.integers(0, 8000, (rows, k)).astype(np.int64)
        expected = oracle.fragmentation(cpu_free, idle, code0, cnt, frag, typical)
        for v in range(rows):
            got = oracle.ordered_sum(int(cpu_free[v]), int(idle[v]), code0[v].tolist(),
                                     cnt[v].tolist(), frag[v].tolist(), typical)
            assert np.float64(got).tobytes() == expected[v].tobytes(), v


def _cluster(n: int, models: list[str | None]) -> ClusterState:
    state = ClusterState()
    for i in range(n):
        m = models[i % len(models)]
        state.add_node(f"n{i}", 64000, 262144, 8 if m else 0, m)
    return state


def _assert_rows_equal(cache: FragCache, state: ClusterState, step: int) -> None:
    want = oracle.OracleFragCache(cache.typical, state.model_names)
    want.refresh(state)
    n = state.n
    assert cache.frag(n).tobytes() == want.frag.tobytes(), step
    for v in range(n):
        cnt, frag_lt, code0, f = cache.table.row(v)
        assert cnt == want.cnt_ge[v].tolist(), (step, v)
        assert frag_lt == want.frag_lt[v].tolist(), (step, v)
        assert code0 == want.code0[v].tolist(), (step, v)
        assert np.float64(f).tobytes() == want.frag[v].tobytes(), (step, v)


def test_rows_refreshed_by_version_equal_the_oracle_through_a_random_walk() -> None:
    # Tasks come and go on random nodes; the core refreshes one or two stale rows at a
    # time (as after a placement), then all: its rows must be the oracle's, to the bit.
    rng = np.random.default_rng(3)
    for typical in _mixes():
        state = _cluster(12, ["A100", "V100M32", "T4", None])
        cache = FragCache(typical, state.model_names)
        cache.refresh(state)
        running: list[str] = []
        for step in range(600):
            if running and (rng.random() < 0.45 or len(running) > 30):
                state.release(running.pop(int(rng.integers(0, len(running)))))
            else:
                node = int(rng.integers(0, state.n))
                n_gpu = int(state.gpu_count[node])
                free = state.gpu_free[node, :n_gpu]
                share = int(rng.choice([250, 500, 1000]))
                gpus = tuple(int(g) for g in (free >= share).nonzero()[0][:1]) if n_gpu else ()
                cpu = int(rng.integers(0, 5)) * 4000
                if state.cpu_free[node] < cpu:
                    continue
                req = TaskRequest(f"t{step}", cpu, 1024, len(gpus), share if gpus else 0)
                state.allocate(req, node, gpus)
                running.append(req.task)
            stale = np.array([int(rng.integers(0, state.n))], np.int64)
            cache.refresh(state, stale)
            v = int(stale[0])
            cnt, frag_lt, code0, f = cache.table.row(v)
            want = oracle.OracleFragCache(typical, state.model_names)
            want.refresh(state)
            assert (cnt, frag_lt, code0) == (want.cnt_ge[v].tolist(), want.frag_lt[v].tolist(),
                                             want.code0[v].tolist()), step
            assert np.float64(f).tobytes() == want.frag[v].tobytes(), step
            cache.refresh(state)
            if step % 50 == 0:
                _assert_rows_equal(cache, state, step)
        _assert_rows_equal(cache, state, -1)


@st.composite
def _placements(draw: st.DrawFn) -> tuple[ClusterState, TypicalTasks, TaskRequest]:
    """A random cluster with random tasks on it, and a task to place."""
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    typical = _mixes()[draw(st.integers(0, 1))]
    state = _cluster(draw(st.integers(1, 14)), ["A100", "V100M32", "T4", None, "A100"])
    for i in range(draw(st.integers(0, 40))):
        node = int(rng.integers(0, state.n))
        n_gpu = int(state.gpu_count[node])
        share = int(rng.choice([100, 250, 500, 700, 1000]))
        whole = share == 1000 and n_gpu and rng.random() < 0.5
        free = state.gpu_free[node, :n_gpu]
        if whole:
            gpus = tuple(int(g) for g in (free == 1000).nonzero()[0][: int(rng.integers(1, 4))])
        else:
            gpus = tuple(int(g) for g in (free >= share).nonzero()[0][:1]) if n_gpu else ()
        cpu = int(rng.integers(0, 9)) * 2000
        if state.cpu_free[node] < cpu:
            continue
        req = TaskRequest(f"r{i}", cpu, 1024, len(gpus), share if len(gpus) == 1 else
                          (1000 if gpus else 0))
        state.allocate(req, node, gpus)
    kind = draw(st.sampled_from(["cpu", "fractional", "whole"]))
    cpu = draw(st.integers(0, 16)) * 1000
    if kind == "cpu":
        task = TaskRequest("x", cpu, 1024, 0, 0)
    elif kind == "fractional":
        task = TaskRequest("x", cpu, 1024, 1, draw(st.sampled_from([50, 100, 250, 500, 999])))
    else:
        task = TaskRequest("x", cpu, 1024, draw(st.integers(1, 8)), 1000)
    return state, typical, task


def _options_of(state: ClusterState,
                task: TaskRequest) -> tuple[NodesView, Options, OptionRows] | None:
    """The nodes that fit ``task`` by GPU, its options on them, and the same options as the
    scheduler's scalar path lists them; None when no node has the GPUs."""
    idx = np.arange(state.n, dtype=np.int64)
    view = NodesView(state, idx)
    if task.num_gpu:
        has = view.gpu_free >= task.gpu_milli
        keep = has.any(axis=1) if task.fractional else has.sum(axis=1) >= task.num_gpu
        if not keep.any():
            return None
        view = NodesView(state, idx[keep])
    options = Options.for_task(task, view)
    rows = OptionRows(
        state=state, nodes=view.idx, at=options.node.tolist(),
        cpu_free=options.at(view.cpu_free).tolist(),
        idle_milli=options.at(view.gpu_idle_milli).tolist(),
        model=options.at(view.model).tolist(),
        free=options.free.tolist() if task.fractional else None,
        first=list(range(len(options))))
    return view, options, rows


@settings(max_examples=300, deadline=None)
@given(_placements())
def test_every_options_before_and_after_equal_the_oracle_bit_for_bit(
        case: tuple[ClusterState, TypicalTasks, TaskRequest]) -> None:
    state, typical, task = case
    found = _options_of(state, task)
    if found is None:
        return
    view, options, rows = found
    got = frag_delta(task, view, options, typical)
    before, after = oracle.frag_delta(task, view, options, typical)
    assert got.before.tobytes() == before.tobytes()
    assert got.after.tobytes() == after.tobytes()
    # The scalar path's lists, from the same options: the same floats.
    b_rows, a_rows = frag_delta_rows(task, rows, typical)
    assert np.array(b_rows).tobytes() == before.tobytes()
    assert np.array(a_rows).tobytes() == after.tobytes()


def test_bad_input_is_refused_naming_what_is_wrong() -> None:
    with pytest.raises(ValueError, match="one equal, non-zero length"):
        hetsched_core.FragTable([1], [2, 3], [1], [1.0], [[True]])
    with pytest.raises(ValueError, match="one column of 1 flags"):
        hetsched_core.FragTable([1], [2], [1], [1.0], [[True, False]])
    typical = _mixes()[0]
    state = _cluster(3, ["A100"])
    cache = FragCache(typical, state.model_names)
    with pytest.raises(ValueError, match="node slot 7 is outside the state's 3 nodes"):
        cache.refresh(state, np.array([7], np.int64))
    with pytest.raises(ValueError, match="node slot 2 has no row in the table"):
        cache.table.row(2)
    cache.refresh(state)
    with pytest.raises(ValueError, match="n = 5 but the table holds 3 rows"):
        cache.frag(5)
    with pytest.raises(ValueError, match="a fractional task needs each option's free share"):
        cache.table.delta(np.array([0], np.int64), np.array([0], np.int64),
                          np.array([0], np.int64), None, 0, 1, 500, True)


@pytest.mark.parametrize("form", ["fgd", "hetsched"])
def test_the_cores_steps_are_where_the_formula_steps(form: str) -> None:
    core = np.array(hetsched_core.sigmoid_steps(form))
    assert core.tobytes() == oracle_scores.steps(form).tobytes()
    # Counting steps gives the formula itself, evaluated with exp: everywhere on a grid,
    # and on the doubles right around every step (where exp's last bit decides).
    formula = oracle_scores.FORMULAS[form]
    grid = np.linspace(-40.0, 40.0, 40_001)
    around = np.array([oracle_scores._double(oracle_scores._order(t) + d)
                       for t in core.tolist() for d in range(-3, 4)])
    for y in (grid, around, np.array([0.0, -0.0, -1.1e-16, 3e-16, np.inf, -np.inf])):
        counted = oracle_scores.sigmoid_centile(form, y)
        assert counted.tolist() == [float(formula(v)) for v in y.tolist()]
    assert oracle_scores.sigmoid_centile(form, np.array([-1.1e-16])).tolist() == [50.0]


@settings(max_examples=300, deadline=None)
@given(_placements(), st.sampled_from(["fgd", "hetsched", "weighted", "inf"]))
def test_every_options_score_equals_the_oracle(
        case: tuple[ClusterState, TypicalTasks, TaskRequest], policy: str) -> None:
    state, typical, task = case
    found = _options_of(state, task)
    if found is None:
        return
    view, options, rows = found
    pol = (Fgd(typical) if policy == "fgd" else
           Hetsched(typical, 500.0, 1.0, 1.0) if policy == "hetsched" else
           Hetsched(typical, 700.0, 2.5, 3.0) if policy == "weighted" else
           Hetsched(typical, 500.0, 0.0, math.inf))
    got = pol.score(task, view, options)
    if isinstance(pol, Fgd):
        want = oracle_scores.scores(task, view, options, typical, "fgd", 1000.0)
    else:
        pressure = pol._pressure(task, state)
        want = oracle_scores.scores(
            task, view, options, typical, "hetsched", pol.scale, (pol.ratio, pol.strand_weight),
            None if pressure is None else (pol.scarcity_weight,
                                           pressure[options.at(view.model)]))
    assert got.tobytes() == want.tobytes()
    assert np.array(pol.score_rows(task, rows)).tobytes() == want.tobytes()


def _one_task_table() -> hetsched_core.FragTable:
    """One typical task (1 CPU, 1 GPU) over model id 0 and "no model" (-1)."""
    return hetsched_core.FragTable([1000], [1000], [1], [1.0], [[True], [True]])


def _refresh(table: hetsched_core.FragTable, version: list[int], model: list[int],
             idx: list[int] | None = None) -> None:
    n = len(version)
    table.refresh(n, np.array(version, np.int64), np.full((n, 2), 1000, np.int64),
                  np.full(n, 4000, np.int64), np.array(model, np.int64),
                  None if idx is None else np.array(idx, np.int64))


def _delta(table: hetsched_core.FragTable, slot: int) -> tuple[np.ndarray, np.ndarray]:
    one = np.array([4000], np.int64)
    return table.delta(np.array([slot], np.int64), one, np.array([2000], np.int64), None,
                       1000, 1, 1000, False)


def test_a_refreshed_row_is_read_whatever_its_version_and_an_unrefreshed_one_never() -> None:
    """Version 0 is a version (a node never changed since its state began); only a slot
    the table has not refreshed yet (held as -1) has no row."""
    table = _one_task_table()
    _refresh(table, [0, 3], [0, 0], idx=[0])
    before, after = _delta(table, 0)
    assert before.tolist() == [table.row(0)[3]] and after.shape == (1,)
    with pytest.raises(ValueError, match="node slot 1 has no row in the table"):
        _delta(table, 1)
    with pytest.raises(ValueError, match="node slot 2 has no row in the table"):
        _delta(table, 2)


@pytest.mark.parametrize("model", [2, 9, -3])
def test_a_model_id_outside_the_mixs_columns_is_refused(model: int) -> None:
    with pytest.raises(ValueError, match=f"model id {model} is outside the 2 model columns"):
        _refresh(_one_task_table(), [1], [model])
    _refresh(_one_task_table(), [1], [-1])  # -1, "no GPU model", is the last column


def test_more_nodes_than_the_states_arrays_hold_is_refused() -> None:
    table, two = _one_task_table(), np.ones(2, np.int64)
    with pytest.raises(ValueError, match="n = 3 but the state's arrays hold 2 node slots"):
        table.refresh(3, two, np.full((2, 2), 1000, np.int64), two, two * 0)
    table.refresh(2, two, np.full((2, 2), 1000, np.int64), two, two * 0)  # n == rows: fine
    assert table.frag(2).shape == (2,)
