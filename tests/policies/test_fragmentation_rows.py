"""The one-node fragmentation path is bit-identical to the vectorized one.

``FragCache.refresh`` sums F(v) in plain Python when one or two nodes are
stale (replay speed, issue 9). FGD's published scores hinge on the last bits
of F (the 49-or-50 cases), so equality here is exact, not approximate.
"""

from __future__ import annotations

import numpy as np

from streams.core.request import TaskRequest
from streams.policies.fragmentation import (
    TypicalTasks,
    aggregates,
    base_code,
    fragmentation,
    fragmentation_row,
)
from streams.profiles.service import typical_tasks


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


def test_one_row_in_python_equals_the_vectorized_rows_bit_for_bit() -> None:
    rng = np.random.default_rng(11)
    models = ["A100", "V100M32", "T4"]
    for typical in _mixes():
        model_ok = typical.model_ok(models)
        rows = 3000
        gpus = rng.integers(0, 9, rows)
        shares = rng.choice([0, 50, 100, 250, 300, 400, 500, 650, 750, 900, 1000], (rows, 8))
        gpu_free = np.where(np.arange(8)[None, :] < gpus[:, None], shares, 0).astype(np.int64)
        cpu_free = (rng.integers(0, 33, rows) * 2000).astype(np.int64)
        model = rng.integers(-1, len(models), rows)
        cnt, frag_lt = aggregates(gpu_free, typical)
        code0 = base_code(model_ok[:, model].T, typical)
        expected = fragmentation(cpu_free, gpu_free.sum(axis=1), code0, cnt, frag_lt, typical)
        for v in range(rows):
            c, f, c0, total = fragmentation_row(gpu_free[v].tolist(), int(cpu_free[v]),
                                                model_ok[:, model[v]].tolist(), typical)
            assert c == cnt[v].tolist() and f == frag_lt[v].tolist() and c0 == code0[v].tolist()
            assert total == expected[v], (v, total, expected[v])
            assert np.float64(total).tobytes() == expected[v].tobytes()


def test_the_ordered_sum_of_hypothetical_rows_equals_the_vectorized_one() -> None:
    # fragmentation_near sums F(v') of a placement's aftermath in Python when one
    # or two rows are within rounding of F(v): aggregates then need not come from
    # any GPU row, so draw them freely.
    from streams.policies.fragmentation import _ordered_sum

    rng = np.random.default_rng(5)
    for typical in _mixes():
        k = len(typical)
        rows = 3000
        cpu_free = (rng.integers(0, 33, rows) * 2000).astype(np.int64)
        idle = rng.integers(0, 8001, rows).astype(np.int64)
        code0 = (8 * typical.cpu_only[None, :] + 4 * rng.integers(0, 2, (rows, k))).astype(
            np.int64)
        cnt = rng.integers(0, 9, (rows, k)).astype(np.int64)
        frag = rng.integers(0, 8000, (rows, k)).astype(np.int64)
        expected = fragmentation(cpu_free, idle, code0, cnt, frag, typical)
        for v in range(rows):
            got = _ordered_sum(int(cpu_free[v]), int(idle[v]), code0[v].tolist(),
                               cnt[v].tolist(), frag[v].tolist(), typical)
            assert np.float64(got).tobytes() == expected[v].tobytes(), v


def _vectorized(state, cache):  # type: ignore[no-untyped-def]
    n = state.n
    cnt, frag_lt = aggregates(state.gpu_free[:n], cache.typical)
    code0 = base_code(cache.model_ok[:, state.model[:n]].T, cache.typical)
    total = fragmentation(state.cpu_free[:n], state.gpu_free[:n].sum(axis=1), code0, cnt,
                          frag_lt, cache.typical)
    return cnt, frag_lt, code0, total


def test_rows_remembered_per_node_state_equal_the_vectorized_rows(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    # FragCache remembers one-by-one refreshed rows per node state (GPU shares, free
    # CPU, model): a row taken from the memo, for another node or a state seen
    # again, must be the row computed afresh, to the bit; emptying a full memo too.
    from streams.core.state import ClusterState
    from streams.policies import fragmentation as frag_module
    from streams.policies.fragmentation import FragCache

    monkeypatch.setattr(frag_module, "ROW_MEMO_MAX", 40)
    rng = np.random.default_rng(3)
    for typical in _mixes():
        state = ClusterState()
        models = ["A100", "V100M32", "T4", None]
        for i in range(12):
            m = models[i % 4]
            state.add_node(f"n{i}", 64000, 262144, 8 if m else 0, m)
        cache = FragCache(typical, state.model_names)
        cache.refresh(state)
        running: list[str] = []
        hits = 0
        for step in range(1500):
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
            before = len(cache._rows)
            stale = (cache.version[:state.n] != state.version[:state.n]).nonzero()[0]
            cache.refresh(state, stale[:2])
            hits += len(cache._rows) == before
            cache.refresh(state)
            cnt, frag_lt, code0, total = _vectorized(state, cache)
            n = state.n
            assert (cache.cnt_ge[:n] == cnt).all() and (cache.frag_lt[:n] == frag_lt).all()
            assert (cache.code0[:n] == code0).all()
            assert cache.frag[:n].tobytes() == total.tobytes(), step
            assert len(cache._rows) <= 40
        assert hits > 100  # states do come back: the memo is exercised
