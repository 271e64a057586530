"""The round simulator's shortcuts (LP cache, one-GPU fast path) change no result."""

import numpy as np
import pytest

from streams.sim.time.rounds import mechanism, policies


def _walk(type_order, prio, deficits, allocation, throughputs, sf, num_workers, skip_zero):
    """``assign_round``'s rule as written in its docstring, one job at a time."""
    m = prio.shape[0]
    placed = np.full(m, -1)
    left = np.asarray(num_workers, dtype=float).copy()
    for j in type_order:
        key = sorted(range(m), key=lambda i: (-prio[i, j], -deficits[i, j], -allocation[i, j], i))
        for i in key:
            if left[j] <= 0:
                break
            if placed[i] >= 0 or throughputs[i, j] <= 0 or (skip_zero and prio[i, j] <= 0):
                continue
            if sf[i] > left[j]:
                continue
            left[j] -= sf[i]
            placed[i] = j
    return placed


@pytest.mark.parametrize("seed", range(20))
@pytest.mark.parametrize("skip_zero", [False, True])
def test_assign_round_fast_path_is_the_walk(seed, skip_zero):
    rng = np.random.default_rng(seed)
    m, n = int(rng.integers(1, 40)), 3
    # few distinct values: many ties on every key, and zeros
    prio = rng.integers(0, 4, (m, n)).astype(float)
    deficits = rng.integers(-1, 2, (m, n)).astype(float)
    alloc = rng.integers(0, 3, (m, n)) / 2.0
    tput = rng.integers(0, 3, (m, n)).astype(float)
    nw = rng.integers(0, 12, n).astype(float)
    order = [int(t) for t in rng.permutation(n)]
    unit = np.ones(m)
    got = mechanism.assign_round(order, prio, deficits, alloc, tput, unit, nw,
                                 skip_zero_priority=skip_zero)
    np.testing.assert_array_equal(got, _walk(order, prio, deficits, alloc, tput, unit, nw,
                                             skip_zero))
    # mixed sizes take the general walk; also compared with the rule
    sf = rng.integers(1, 4, m).astype(float)
    got = mechanism.assign_round(order, prio, deficits, alloc, tput, sf, nw,
                                 skip_zero_priority=skip_zero)
    np.testing.assert_array_equal(got, _walk(order, prio, deficits, alloc, tput, sf, nw,
                                             skip_zero))


def test_lp_cache_gives_the_fresh_allocation():
    rng = np.random.default_rng(1)
    nw = np.array([3.0, 2.0, 4.0])
    cache = policies.LPCache()
    for aware in (True, False):
        for m in (2, 7, 7, 12, 2):  # repeated sizes: the agnostic LP is then the same
            t = rng.uniform(0.5, 5.0, (m, 3))
            t[0, 1] = 0.0  # a type where a job cannot run
            sf, w = np.ones(m), np.ones(m)
            fresh = policies.max_min_fairness(t, sf, w, nw, aware=aware)
            cached = policies.max_min_fairness(t, sf, w, nw, aware=aware, cache=cache)
            np.testing.assert_array_equal(cached, fresh)
            again = policies.max_min_fairness(t, sf, w, nw, aware=aware, cache=cache)
            np.testing.assert_array_equal(again, fresh)
            again[:] = -1.0  # a caller writing into its copy does not reach the cache
    # aware: 5 different LPs; agnostic: one per size (2, 7, 12); each asked again once
    assert (cache.misses, cache.hits) == (5 + 3, 5 + 7)


def test_lp_cache_keeps_at_most_max_entries():
    cache = policies.LPCache(max_entries=2)
    nw = np.array([1.0])
    for m in (1, 2, 3, 1):
        x = cache.solve(np.ones((m, 1)), np.ones(m), nw)
        np.testing.assert_array_equal(x, policies._solve_max_min(np.ones((m, 1)), np.ones(m), nw))
    assert len(cache._solved) == 2 and cache.hits == 0 and cache.misses == 4
