"""The one-node fragmentation path is bit-identical to the vectorized one.

``FragCache.refresh`` sums F(v) in plain Python when one or two nodes are
stale (replay speed, issue 9). FGD's published scores hinge on the last bits
of F (the 49-or-50 cases), so equality here is exact, not approximate.
"""

from __future__ import annotations

import numpy as np

from streams.core.request import TaskRequest
from streams.core.service_profile import typical_tasks
from streams.policies.fragmentation import (
    TypicalTasks,
    aggregates,
    base_code,
    fragmentation,
    fragmentation_row,
)


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
