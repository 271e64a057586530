"""Gavel's round mechanism and simulator (streams/sim/time/rounds) on hand-computed runs."""

import dataclasses

import numpy as np
import pytest

from streams.sim.time.rounds import mechanism
from streams.sim.time.rounds.simulator import Workload, simulate


def test_priority_is_allocation_over_fraction_received():
    alloc = np.array([[0.5], [0.5], [0.5], [0.5]])
    in_alloc = np.array([True, True, False, True])
    tput = np.array([[1.0], [1.0], [1.0], [0.0]])
    job_time = np.array([[180.0], [540.0], [180.0], [180.0]])
    p = mechanism.priorities(alloc, in_alloc, tput, job_time, np.array([720.0]))
    # 0.5 / (180/720) = 2; 0.5 / (540/720) = 2/3; not in the allocation: 0; cannot run: 0
    np.testing.assert_allclose(p[:, 0], [2.0, 2 / 3, 0.0, 0.0])


def test_assign_round_order_types_ties_and_fifo_skip():
    prio = np.array([[1.0, 5.0], [3.0, 0.0], [3.0, 0.0], [0.0, 0.0]])
    zeros = np.zeros_like(prio)
    tput = np.ones_like(prio)
    sf = np.ones(4)
    # type 0 first, 2 GPUs: jobs 1 and 2 (priority 3, tie kept in arrival order);
    # then type 1, 1 GPU: job 0 (priority 5)
    placed = mechanism.assign_round([0, 1], prio, zeros, zeros, tput, sf, np.array([2.0, 1.0]),
                                    skip_zero_priority=False)
    np.testing.assert_array_equal(placed, [1, 0, 0, -1])
    # type 1 first (1 GPU): job 0 there; then type 0 (3 GPUs): jobs 1, 2, then 3
    placed = mechanism.assign_round([1, 0], prio, zeros, zeros, tput, sf, np.array([3.0, 1.0]),
                                    skip_zero_priority=False)
    np.testing.assert_array_equal(placed, [1, 0, 0, 0])  # job 3: priority 0 fills a free GPU
    placed = mechanism.assign_round([1, 0], prio, zeros, zeros, tput, sf, np.array([3.0, 1.0]),
                                    skip_zero_priority=True)
    np.testing.assert_array_equal(placed, [1, 0, 0, -1])  # FIFO leaves it idle


def test_assign_round_deficit_breaks_ties_and_zero_throughput_is_skipped():
    prio = np.array([[1.0], [1.0], [1.0]])
    deficits = np.array([[0.0], [5.0], [9.0]])
    tput = np.array([[1.0], [1.0], [0.0]])
    placed = mechanism.assign_round([0], prio, deficits, np.zeros((3, 1)), tput, np.ones(3),
                                    np.array([1.0]), skip_zero_priority=False)
    np.testing.assert_array_equal(placed, [-1, 0, -1])


def _wl(arrival, duration, window=None):
    duration = np.asarray(duration, dtype=float)
    n = len(arrival)
    return Workload(
        job_ids=[f"j{i}" for i in range(n)], arrival=np.asarray(arrival, dtype=float),
        duration=duration, scale_factor=np.ones(n),
        in_window=np.ones(n, bool) if window is None else np.asarray(window, bool),
        type_names=[f"T{k}" for k in range(duration.shape[1])],
    )


def test_alone_a_job_runs_at_once_and_finishes_mid_round():
    res = simulate(_wl([0.0], [[1000.0]]), np.array([1.0]), "gavel-las")
    assert res.completion[0] == pytest.approx(1000.0)  # rounds 0-360-720, done at 1000
    assert res.rounds == 3


def test_las_round_by_round_by_hand():
    # one GPU; A (10000 s) at 0, B (100 s) at 100.
    # round 0-360: A alone. B waits for the round's end (its JCT counts it).
    # at 360 the job set changed and the last reset was at 0: reset, 0.5 each;
    # both fractions 0.5, priority 1 each, tie -> arrival order: A runs 360-720.
    # at 720 no reset (no change): A received 540/720, B 180/720 -> B (priority 2)
    # runs 720-820 and completes mid-round; A then runs alone: 820 + 9280 = 10100.
    for policy in ("las", "gavel-las"):
        res = simulate(_wl([0.0, 100.0], [[10000.0], [100.0]]), np.array([1.0]), policy)
        assert res.completion[1] == pytest.approx(820.0), policy
        assert res.completion[0] == pytest.approx(10100.0), policy


def test_a_job_that_runs_again_after_a_round_off_loses_its_restart_s():
    """The run above with a 60 s restart cost: B's first run and A's rounds in a row pay
    nothing; A, back after B's round, loses 60 s of it."""
    wl = dataclasses.replace(_wl([0.0, 100.0], [[10000.0], [100.0]]),
                             restart_s=np.array([60.0, 60.0]))
    res = simulate(wl, np.array([1.0]), "gavel-las")
    assert res.completion[1] == pytest.approx(820.0)
    assert res.completion[0] == pytest.approx(10160.0)
    alone = dataclasses.replace(_wl([0.0], [[1000.0]]), restart_s=np.array([60.0]))
    assert simulate(alone, np.array([1.0]), "gavel-las").completion[0] == pytest.approx(1000.0)


@pytest.mark.parametrize("policy", ["gavel-las", "las"])
def test_every_restart_after_a_round_off_or_a_type_change_costs_restart_s(policy: str):
    """Jobs of 1,000 s on either of two types: each one held GPUs for its 1,000 s plus
    30 s per time it ran again after a round off (a preemption) or on another type (a
    move), and the run has both."""
    n = 6
    wl = dataclasses.replace(_wl([150.0 * i for i in range(n)], [[1000.0, 1000.0]] * n),
                             restart_s=np.full(n, 30.0))
    res = simulate(wl, np.array([1.0, 1.0]), policy, until_window=False)
    assert res.preemptions.sum() > 0 and res.moves.sum() > 0
    np.testing.assert_allclose(res.run_s, 1000.0 + 30.0 * (res.preemptions + res.moves))


def test_fifo_waits_and_the_allocation_is_recomputed_on_change():
    # FIFO gives the GPU to A; B has priority 0 until A finishes at 10000;
    # then the job set changed and 9640 s >= 1920 s passed: B runs 10000-10100.
    res = simulate(_wl([0.0, 100.0], [[10000.0], [100.0]]), np.array([1.0]), "gavel-fifo")
    assert res.completion[0] == pytest.approx(10000.0)
    assert res.completion[1] == pytest.approx(10100.0)


def test_new_job_waits_for_the_next_reset_under_fifo():
    # two GPUs; A (500 s) and C (10000 s) at 0, B (100 s) at 400 (after the reset at 360
    # is impossible: nothing changed at 360). At 720 A has finished (at 500) and B
    # arrived: changed, but the last reset was at 0 -> allowed ("or last reset == 0").
    res = simulate(_wl([0.0, 0.0, 400.0], [[500.0], [10000.0], [100.0]]),
                   np.array([2.0]), "gavel-fifo")
    assert res.completion[0] == pytest.approx(500.0)
    assert res.completion[2] == pytest.approx(820.0)  # round 360-720, then B 720-820
    # next: a job arriving after that reset waits until 1920 s after it
    res = simulate(_wl([0.0, 0.0, 400.0, 900.0], [[500.0], [10000.0], [100.0], [100.0]]),
                   np.array([2.0]), "gavel-fifo")
    # reset at 720; D arrives at 900 and B finished at 820 -> change, but the next reset
    # is at the first round end >= 720 + 1920 = 2640: C's rounds end at 720 + 360k -> 2880
    assert res.completion[3] == pytest.approx(2880.0 + 100.0)


def test_aware_uses_each_job_on_its_fast_type():
    # two types, one GPU each; job 0 fast on T0, job 1 fast on T1: both done at 1000
    wl = _wl([0.0, 0.0], [[1000.0, 10000.0], [10000.0, 1000.0]])
    res = simulate(wl, np.array([1.0, 1.0]), "gavel-las")
    np.testing.assert_allclose(res.completion, [1000.0, 1000.0])


def _random_wl(seed, n=40, k=3):
    rng = np.random.default_rng(seed)
    arrival = np.sort(rng.uniform(0, 20000, n))
    dur = rng.uniform(300, 8000, (n, k))
    return _wl(arrival, dur)


def test_deterministic_with_a_seed_and_the_shuffle_depends_on_it():
    wl = _random_wl(1)
    nw = np.array([2.0, 2.0, 2.0])
    a = simulate(wl, nw, "las", seed=3).completion
    b = simulate(wl, nw, "las", seed=3).completion
    np.testing.assert_array_equal(a, b)
    others = [simulate(wl, nw, "las", seed=s).completion for s in range(4, 8)]
    assert any(not np.array_equal(a, o) for o in others)
    assert np.all(np.isfinite(a))


def test_stops_when_the_window_finished():
    wl = _random_wl(2)
    win = np.zeros(len(wl.arrival), bool)
    win[:5] = True
    wl = Workload(wl.job_ids, wl.arrival, wl.duration, wl.scale_factor, win, wl.type_names)
    res = simulate(wl, np.array([1.0, 1.0, 1.0]), "gavel-las")
    assert np.all(np.isfinite(res.completion[:5]))
    assert np.isnan(res.completion).any()
    full = simulate(wl, np.array([1.0, 1.0, 1.0]), "gavel-las", until_window=False)
    np.testing.assert_allclose(full.completion[:5], res.completion[:5])


def test_a_job_that_runs_nowhere_ends_the_run_instead_of_hanging():
    wl = _wl([0.0, 10.0], [[np.inf], [100.0]])
    for policy in ("gavel-las", "gavel-fifo", "las"):
        res = simulate(wl, np.array([1.0]), policy)
        # nothing ran at 0 (job 0 fits nowhere), so job 1 starts on arrival: 10 + 100
        assert np.isnan(res.completion[0]) and res.completion[1] == pytest.approx(110.0)
