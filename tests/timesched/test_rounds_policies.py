"""Gavel's allocation policies (streams/sim/time/rounds/policies.py) on hand-solved cases."""

import numpy as np
import pytest

from streams.sim.time.rounds import policies


def _mmf(t, sf=None, w=None, nw=(1, 1), aware=True):
    t = np.asarray(t, dtype=float)
    m = t.shape[0]
    sf = np.ones(m) if sf is None else np.asarray(sf, dtype=float)
    w = np.ones(m) if w is None else np.asarray(w, dtype=float)
    return policies.max_min_fairness(t, sf, w, np.asarray(nw, dtype=float), aware=aware)


def test_aware_puts_each_job_on_its_fast_type_and_splits_it_evenly():
    # jobs 0, 1 are 10x faster on type A, jobs 2, 3 on type B; one GPU of each.
    # Proportional throughput 5.5 for all; normalised rates 10/5.5 and 1/5.5. The
    # unique max-min optimum: A shared by 0 and 1, B by 2 and 3 (min = 5/5.5).
    t = [[10, 1], [10, 1], [1, 10], [1, 10]]
    x = _mmf(t)
    np.testing.assert_allclose(x, [[0.5, 0], [0.5, 0], [0, 0.5], [0, 0.5]], atol=1e-7)


def test_agnostic_ignores_speeds():
    t = [[10, 1], [10, 1], [1, 10], [1, 10]]
    x = _mmf(t, aware=False)
    # every job gets the same total share, 2 GPUs / 4 jobs, wherever it lands
    np.testing.assert_allclose(x.sum(axis=1), 0.5, atol=1e-7)
    assert np.all(x.sum(axis=0) <= 1 + 1e-7)
    # and the same allocation as for equal speeds: the speeds are not looked at
    np.testing.assert_allclose(x, _mmf(np.ones((4, 2)), aware=False), atol=1e-9)
    # judged by speed, it does worse than the aware policy
    tn = np.asarray(t, float) / 5.5
    assert (tn * x).sum(axis=1).min() < (tn * _mmf(t)).sum(axis=1).min() - 0.1


def test_priority_weight_divides_the_share():
    # one type, one GPU; max min(x0 / 2, x1) with x0 + x1 <= 1 -> x0 = 2/3, x1 = 1/3
    x = _mmf([[1.0], [1.0]], w=[2.0, 1.0], nw=[1])
    np.testing.assert_allclose(x, [[2 / 3], [1 / 3]], atol=1e-7)


def test_scale_factor_counts_gpus():
    # one type, 2 GPUs; job 0 takes 2 GPUs: max min(2 x0, x1), 2 x0 + x1 <= 2, x <= 1
    # -> 2 x0 = x1 = t, 2t <= 2 -> x0 = 0.5, x1 = 1
    x = _mmf([[1.0], [1.0]], sf=[2, 1], nw=[2])
    np.testing.assert_allclose(x, [[0.5], [1.0]], atol=1e-7)


def test_fewer_jobs_than_gpus_each_gets_all_its_time():
    x = _mmf([[3.0, 1.0]], nw=[4, 4])
    assert x.sum() == pytest.approx(1.0, abs=1e-7)


def test_job_that_runs_nowhere_gets_nothing():
    x = _mmf([[0.0, 0.0], [1.0, 1.0]])
    np.testing.assert_allclose(x[0], 0.0)
    assert x[1].sum() == pytest.approx(1.0, abs=1e-7)


def test_proportional_throughput():
    p = policies.proportional_throughputs(np.array([[3.0, 1.0]]), np.array([1.0, 3.0]))
    assert p[0] == pytest.approx(3 * 0.25 + 1 * 0.75)


def test_fifo_perf_arrival_order_fastest_free_type():
    names = ["K80", "V100"]
    t = np.array([[1.0, 4.0],   # V100
                  [1.0, 4.0],   # V100 taken: K80
                  [1.0, 4.0]])  # nothing left
    x = policies.fifo_perf(t, np.ones(3), np.array([1.0, 1.0]), names)
    np.testing.assert_array_equal(x, [[0, 1], [1, 0], [0, 0]])


def test_fifo_perf_skips_a_job_that_cannot_run_on_the_free_type():
    names = ["K80", "V100"]
    t = np.array([[1.0, 4.0], [0.0, 4.0], [2.0, 1.0]])
    x = policies.fifo_perf(t, np.ones(3), np.array([1.0, 1.0]), names)
    # job 1 only fits the K80 and cannot run there: skipped, job 2 takes it
    np.testing.assert_array_equal(x, [[0, 1], [0, 0], [1, 0]])


def test_fifo_perf_stops_at_a_job_that_fits_nowhere():
    names = ["V100"]
    t = np.ones((3, 1))
    x = policies.fifo_perf(t, np.array([1.0, 2.0, 1.0]), np.array([2.0]), names)
    # job 1 needs 2 GPUs, 1 is free: FIFO stops, job 2 does not jump it
    np.testing.assert_array_equal(x, [[1], [0], [0]])
