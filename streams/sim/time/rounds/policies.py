"""Gavel's allocation policies, pure: throughputs in, a time-fraction matrix out.

Source: stanford-futuredata/gavel at commit c4fa400 (the one the reference
table in ``../shared/traces/hetero/README.md`` was run at), MIT license.

An *allocation* is an ``(m, n)`` matrix ``x``: ``x[i, j]`` is the fraction of
time job ``i`` should run on GPU type ``j`` (Gavel's ``self._allocation``,
flattened as ``Policy.flatten`` does). The round mechanism
(``mechanism.py``) turns it into who runs in each round.

Nothing here reads files, the clock or an unseeded random source; the LP is
solved by SciPy's HiGHS (``scipy.optimize.linprog(method="highs")``) where
Gavel uses cvxpy with ECOS.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from scipy.optimize import linprog

FloatArray = np.ndarray


def proportional_throughputs(throughputs: FloatArray, num_workers: FloatArray) -> FloatArray:
    """Each job's throughput under an equal, type-proportional split of the cluster.

    Gavel ``scheduler/policies/proportional.py``, ``ProportionalPolicy.get_throughputs``:
    ``x[i, j] = num_workers[j] / m`` scaled so that the largest row sums to 1, i.e.
    ``x[i, j] = num_workers[j] / sum(num_workers)``; the throughput is ``sum_j T[i, j] x[i, j]``.
    """
    total = float(np.sum(num_workers))
    share = np.asarray(num_workers, dtype=float) / total
    return np.asarray(throughputs @ share, dtype=float)


class LPCache:
    """Solutions of :func:`_solve_max_min`, keyed by the LP's exact input bytes.

    Why: the agnostic ``las`` sets every throughput to 1, so its LP depends only on
    the number of active jobs (and their scale factors and the cluster): on Gavel's
    5.6 jobs/h workload 2,926 recomputations pose 519 distinct LPs, and solving them
    was over 80 % of the run. HiGHS is deterministic, so returning the stored
    solution of an identical LP gives the very allocation a fresh solve would (the
    key is the bytes of ``coef``, ``sf`` and ``num_workers`` and the shape, so two
    LPs share an entry only if they are equal to the bit). The aware policies rarely
    pose the same LP twice; the cache then only costs the key. At most
    ``max_entries`` are kept; the oldest goes first.
    """

    def __init__(self, max_entries: int = 4096) -> None:
        self.max_entries = max_entries
        self.hits = 0
        self.misses = 0
        self._solved: dict[tuple[tuple[int, ...], bytes, bytes, bytes], FloatArray] = {}

    def solve(self, coef: FloatArray, sf: FloatArray, num_workers: FloatArray) -> FloatArray:
        """``_solve_max_min(coef, sf, num_workers)``, from the cache where it was solved."""
        coef = np.ascontiguousarray(coef, dtype=float)
        sf = np.ascontiguousarray(sf, dtype=float)
        num_workers = np.ascontiguousarray(num_workers, dtype=float)
        key = (coef.shape, coef.tobytes(), sf.tobytes(), num_workers.tobytes())
        hit = self._solved.get(key)
        if hit is not None:
            self.hits += 1
            return hit.copy()
        self.misses += 1
        x = _solve_max_min(coef, sf, num_workers)
        if len(self._solved) >= self.max_entries:
            del self._solved[next(iter(self._solved))]
        self._solved[key] = x.copy()
        return x


def max_min_fairness(
    throughputs: FloatArray,
    scale_factors: FloatArray,
    priority_weights: FloatArray,
    num_workers: FloatArray,
    *,
    aware: bool = True,
    cache: LPCache | None = None,
) -> FloatArray:
    """Max-min fairness over normalised throughput, Gavel's LAS.

    ``aware=True`` is Gavel's heterogeneity-aware policy
    (``scheduler/policies/max_min_fairness.py``, ``MaxMinFairnessPolicyWithPerf.get_allocation``,
    policy name ``max_min_fairness_perf``); ``aware=False`` the agnostic one
    (``MaxMinFairnessPolicy.get_allocation``, ``max_min_fairness``), which replaces every
    throughput by 1.0 - also on a type where the job cannot run - before calling the
    aware one.

    The LP, as Gavel writes it::

        maximise  min_i  sum_j  T[i, j] / (w_i * P_i) * s_i * x[i, j]
        s.t.      x >= 0
                  sum_i s_i * x[i, j] <= num_workers[j]      (each type's GPUs)
                  sum_j x[i, j] <= 1                          (a job runs once at a time)

    with ``T`` the throughputs (any per-job unit: a row's scale cancels against
    ``P_i``), ``P_i`` the proportional throughput (:func:`proportional_throughputs`),
    ``w_i`` the priority weight and ``s_i`` the scale factor (GPUs per job). Solved
    in epigraph form (maximise ``t`` with ``t <= row_i``) by HiGHS; the result is
    clipped to [0, 1] as Gavel clips cvxpy's. A job whose proportional throughput
    is 0 (it can run nowhere) would divide by zero in Gavel; here it gets 0.
    ``cache``: reuse the solution of an identical LP (:class:`LPCache`).
    """
    tput = np.asarray(throughputs, dtype=float)
    m, n = tput.shape
    if m == 0:
        return np.zeros((0, n))
    if not aware:
        tput = np.ones_like(tput)
    sf = np.asarray(scale_factors, dtype=float)
    prop = proportional_throughputs(tput, np.asarray(num_workers, dtype=float))
    runnable = prop > 0
    coef = np.zeros_like(tput)
    pw = np.asarray(priority_weights, dtype=float)
    coef[runnable] = (
        tput[runnable] / (pw[runnable] * prop[runnable])[:, None] * sf[runnable][:, None]
    )
    alloc = np.zeros((m, n))
    idx = np.flatnonzero(runnable)
    if idx.size == 0:
        return alloc
    solve = _solve_max_min if cache is None else cache.solve
    alloc[idx] = solve(coef[idx], sf[idx], np.asarray(num_workers, dtype=float))
    return alloc


def _solve_max_min(coef: FloatArray, sf: FloatArray, num_workers: FloatArray) -> FloatArray:
    """``argmax_x min_i (coef x)_i`` under Gavel's base constraints, by HiGHS.

    Variables: ``x`` row-major (``i * n + j``), then ``t``. Rows: ``t - sum_j coef[i, j]
    x[i, j] <= 0`` (m), ``sum_i sf_i x[i, j] <= num_workers[j]`` (n), ``sum_j x[i, j] <= 1`` (m).
    Gavel's ``Policy.get_base_constraints``.
    """
    m, n = coef.shape
    nv = m * n
    rows_i = np.repeat(np.arange(m), n)
    cols = np.arange(nv)
    # t - coef x <= 0
    a1 = sp.csr_matrix(
        (
            np.concatenate([-coef.ravel(), np.ones(m)]),
            (np.concatenate([rows_i, np.arange(m)]), np.concatenate([cols, np.full(m, nv)])),
        ),
        shape=(m, nv + 1),
    )
    # capacity per type
    a2 = sp.csr_matrix(
        (np.repeat(sf, n), (np.tile(np.arange(n), m), cols)), shape=(n, nv + 1)
    )
    # one place at a time
    a3 = sp.csr_matrix((np.ones(nv), (rows_i, cols)), shape=(m, nv + 1))
    a_ub = sp.vstack([a1, a2, a3], format="csr")
    b_ub = np.concatenate([np.zeros(m), num_workers, np.ones(m)])
    c = np.zeros(nv + 1)
    c[-1] = -1.0
    bounds = [(0.0, None)] * nv + [(None, None)]
    res = linprog(c, A_ub=a_ub, b_ub=b_ub, bounds=bounds, method="highs")
    if res.status != 0 or res.x is None:  # Gavel prints a warning and goes on
        raise RuntimeError(f"max-min LP not solved: {res.message}")
    return np.clip(np.asarray(res.x[:nv]).reshape(m, n), 0.0, 1.0)


def fifo_perf(
    throughputs: FloatArray,
    scale_factors: FloatArray,
    num_workers: FloatArray,
    type_names: list[str],
) -> FloatArray:
    """Gavel's heterogeneity-aware FIFO: jobs in arrival order take the fastest free type.

    ``scheduler/policies/fifo.py``, ``FIFOPolicyWithPerf`` = ``FIFOPolicy(mode='perf')``,
    ``get_allocation``: the allocation is rebuilt from scratch at every call (perf mode
    resets ``self._allocation``); the rows of ``throughputs`` are the active jobs in
    arrival (job id) order; each job in turn, while some type has a free GPU, takes
    among the types with at least its scale factor free the one of highest throughput
    (ties: the first in alphabetical order of type names, Gavel's
    ``available_worker_types.sort()`` with a strict ``>``), with ``x = 1`` there; a job
    whose throughput there is 0 gets nothing and the next job is tried. The loop stops
    at the first job that fits no free type (FIFO: nobody jumps the queue).
    """
    tput = np.asarray(throughputs, dtype=float)
    m, n = tput.shape
    alloc = np.zeros((m, n))
    free = [float(v) for v in num_workers]
    order = sorted(range(n), key=lambda j: type_names[j])
    available = [j for j in order if free[j] > 0]
    for i in range(m):
        if not available:
            break
        s = float(scale_factors[i])
        fits = [j for j in available if free[j] >= s]
        if not fits:
            break
        best = -1
        best_tput = -1.0
        for j in fits:
            if tput[i, j] > best_tput:
                best_tput = tput[i, j]
                best = j
        if tput[i, best] > 0.0:
            alloc[i, best] = 1.0
            free[best] -= s
            if free[best] == 0:
                available.remove(best)
    return alloc
