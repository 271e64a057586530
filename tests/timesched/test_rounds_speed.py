"""The round simulator's LP cache changes no result."""

import numpy as np

from streams.sim.time.rounds import policies


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
