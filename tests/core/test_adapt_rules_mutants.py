"""The small pure rules of ``streams.core.adapt``, each against its module's documented rule.

``./dev mutate`` runs the fast unit tests only (``tests/core``, ``tests/timesched``,
``tests/policies``, ``tests/reliability``), and the adaptation's own tests
(``tests/adapt``) drive whole cells, so no test of that selection held these rules:
thermal headroom and its hysteresis, the power model, liveness and fatal XIDs,
the migration cost, benefit and budget, the window's mean and coefficient of
variation, memory booked against observed, elastic resizing, the probe's
classification and the default per-QoS elastic thresholds. Values here are worked
out from the docstrings (``thermal.py``, ``energy.py``, ... ``config.py``).
"""

from __future__ import annotations

import math

import pytest

from streams.core.adapt import elastic, energy, membership, migration, probe, reconcile, thermal
from streams.core.adapt.config import AdaptConfig, ElasticConfig
from streams.core.adapt.window import Window, mean_cv

# ---- thermal -------------------------------------------------------------------------


def test_hot_within_the_margin_or_when_a_slowdown_is_reported():
    assert thermal.is_hot(85.0, [], throttle_c=90.0, margin_c=5.0)
    assert not thermal.is_hot(84.9, [], throttle_c=90.0, margin_c=5.0)
    assert not thermal.is_hot(84.9, ["gpu_idle"], throttle_c=90.0, margin_c=5.0)
    for reason in sorted(thermal.SLOWDOWN_REASONS):
        assert thermal.is_hot(20.0, [reason, "gpu_idle"], throttle_c=90.0, margin_c=5.0)


def test_cool_only_below_twice_the_margin_and_without_a_slowdown():
    assert thermal.is_cool(79.9, [], throttle_c=90.0, margin_c=5.0)
    assert not thermal.is_cool(80.0, [], throttle_c=90.0, margin_c=5.0)
    assert not thermal.is_cool(20.0, ["sw_power_cap"], throttle_c=90.0, margin_c=5.0)
    assert thermal.is_cool(20.0, ["gpu_idle"], throttle_c=90.0, margin_c=5.0)


# ---- energy --------------------------------------------------------------------------


def test_gpu_power_is_idle_share_of_tdp_plus_the_rest_times_utilisation():
    assert energy.gpu_power_w(400.0, 0.0) == pytest.approx(80.0)
    assert energy.gpu_power_w(400.0, 0.5) == pytest.approx(240.0)
    assert energy.gpu_power_w(400.0, 1.0) == pytest.approx(400.0)
    assert energy.gpu_power_w(400.0, 1.5) == pytest.approx(400.0)  # clamped to 0..1
    assert energy.gpu_power_w(400.0, -0.5) == pytest.approx(80.0)


def test_node_power_is_the_host_plus_its_gpus_and_nothing_when_off():
    assert energy.node_power_w(400.0, [0.0, 1.0], powered=True) == pytest.approx(
        150.0 + 80.0 + 400.0)
    assert energy.node_power_w(400.0, [], powered=True) == pytest.approx(150.0)
    assert energy.node_power_w(400.0, [1.0], powered=False) == 0.0


def test_perf_per_watt_is_compute_or_bandwidth_per_watt():
    assert energy.perf_per_watt(20.0, 2000.0, 400.0, "compute") == pytest.approx(0.05)
    assert energy.perf_per_watt(20.0, 2000.0, 400.0, "data") == pytest.approx(0.005)
    assert energy.perf_per_watt(20.0, 2000.0, 0.0, "compute") == 0.0
    assert energy.perf_per_watt(20.0, 2000.0, -1.0, "data") == 0.0
    assert energy.perf_per_watt(20.0, 2000.0, 0.5, "compute") == pytest.approx(40.0)


# ---- membership ----------------------------------------------------------------------


def test_expired_is_the_tracked_nodes_silent_for_longer_than_the_timeout_sorted():
    seen = {"c": 0.0, "a": 5.0, "b": 10.0, "d": 100.0}
    assert membership.expired(seen, [], now_s=100.0, timeout_s=90.0) == ["a", "c"]
    assert membership.expired(seen, ["c"], now_s=100.0, timeout_s=90.0) == ["a"]
    assert membership.expired(seen, [], now_s=100.0, timeout_s=95.0) == ["c"]  # 95 is not > 95


def test_a_fatal_xid_or_a_new_double_bit_error_takes_the_gpu_out():
    assert membership.fatal_gpu_signal([13, 79, 48], 0, 0) == "xid 48"
    assert membership.fatal_gpu_signal([13, 31], 0, 0) is None
    assert membership.fatal_gpu_signal([], 3, 2) == "uncorrectable ECC"
    assert membership.fatal_gpu_signal([], 2, 2) is None
    assert membership.fatal_gpu_signal([94], 3, 2) == "xid 94"


# ---- migration -----------------------------------------------------------------------

CFG = AdaptConfig()  # 1.25 GB/s, 30 s restart, gain 1.5, budget 4 per 600 s


def test_the_cost_of_a_move_is_transfer_plus_restart():
    mib_per_s = 1.25 * 1e9 / 2**20
    assert migration.cost_s(0.0, CFG) == pytest.approx(30.0)
    assert migration.cost_s(mib_per_s * 10, CFG) == pytest.approx(40.0)


def test_judge_moves_only_when_the_gain_beats_the_cost_by_the_factor():
    # cost 30 s; from half speed to full the benefit is half the remaining time
    v = migration.judge(0.0, 100.0, 0.5, 1.0, CFG)
    assert (v.go, v.cost_s, v.benefit_s, v.why) == (True, 30.0, 50.0, "gain outweighs cost")
    v = migration.judge(0.0, 90.0, 0.5, 1.0, CFG)  # 45 = 1.5 x 30: not more
    assert (v.go, v.cost_s, v.benefit_s, v.why) == (False, 30.0, 45.0, "cost outweighs gain")
    v = migration.judge(0.0, 1000.0, 1.0, 0.5, CFG)  # onto a slower GPU: no gain
    assert (v.go, v.benefit_s) == (False, 0.0)
    v = migration.judge(0.0, 1000.0, 0.5, 0.0, CFG)  # destination speed unknown
    assert (v.go, v.benefit_s) == (False, 0.0)
    assert migration.judge(0.0, 1000.0, 0.25, 1.0, CFG).benefit_s == pytest.approx(750.0)


def test_the_budget_counts_moves_of_the_last_window_only():
    moves = [0.0, 100.0, 599.0, 600.0, 700.0]
    # at 700 the window is (100, 700]: 100 has just left it, 599, 600 and 700 count
    assert migration.budget_left(moves, 700.0, CFG) == 4 - 3
    assert migration.budget_left(moves, 1200.0, CFG) == 4 - 1
    assert migration.budget_left(moves, 100_000.0, CFG) == 4
    assert migration.budget_left([1.0] * 9, 2.0, CFG) == 0
    assert migration.prune(moves, 700.0, CFG) == [599.0, 600.0, 700.0]
    assert migration.prune(moves, 1199.0, CFG) == [600.0, 700.0]


# ---- window.mean_cv ------------------------------------------------------------------


def test_mean_and_coefficient_of_variation():
    assert mean_cv([]) == (0.0, 0.0)
    assert mean_cv([5.0, 5.0]) == (5.0, 0.0)
    m, cv = mean_cv([2.0, 4.0, 6.0])
    assert m == pytest.approx(4.0)
    assert cv == pytest.approx(math.sqrt(8.0 / 3.0) / 4.0)
    assert mean_cv([0.25, 0.75]) == (0.5, 0.5)  # a mean below 1 is still a mean
    assert mean_cv([-1.0, 1.0]) == (0.0, 0.0)
    assert mean_cv([-4.0, 2.0]) == (-1.0, 0.0)


# ---- reconcile -----------------------------------------------------------------------


def test_share_of_rounds_memory_up_to_milli_of_the_gpu():
    assert reconcile.share_of(1.0, 80_000) == 1
    assert reconcile.share_of(40_000.0, 80_000) == 500
    assert reconcile.share_of(40_001.0, 80_000) == 501
    assert reconcile.share_of(200_000.0, 80_000) == 1000
    assert reconcile.share_of(0.0, 80_000) == 0
    assert reconcile.share_of(-5.0, 80_000) == 0
    assert reconcile.share_of(100.0, 0) == 0
    assert reconcile.share_of(0.5, 1) == 500


def test_overuse_is_what_exceeds_the_booking_plus_its_tolerance():
    assert reconcile.overuse_mib(1200.0, 1000.0, 0.1) == pytest.approx(100.0)
    assert reconcile.overuse_mib(1100.0, 1000.0, 0.1) == 0.0
    assert reconcile.overuse_mib(500.0, 1000.0, 0.1) == 0.0


def test_unaccounted_memory_up_to_the_reserve_is_the_gpus_own():
    assert reconcile.unaccounted_mib(2000.0, 1000.0, 0.0, reserve_mib=1000.0) == 0.0
    assert reconcile.unaccounted_mib(2001.0, 1000.0, 0.0, reserve_mib=1000.0) == 1001.0
    assert reconcile.unaccounted_mib(2201.0, 1000.0, 0.1, reserve_mib=1000.0) == 1101.0
    assert reconcile.unaccounted_mib(1001.0, 1000.0, 0.0) == 1.0


def test_the_driver_reserve_and_what_to_reserve():
    assert reconcile.driver_reserve_mib(80_000, 2.0) == pytest.approx(1600.0)
    assert reconcile.driver_reserve_mib(80_000, 0.0) == 0.0
    assert reconcile.driver_reserve_mib(80_000, 0.5) == pytest.approx(400.0)
    assert reconcile.driver_reserve_mib(80_000, -1.0) == 0.0
    assert reconcile.to_reserve(100.0, 300.0) == 300.0
    assert reconcile.to_reserve(500.0, 300.0) == 500.0
    assert reconcile.to_reserve(100.0, None) == 100.0
    assert reconcile.to_reserve(0.0, None) == 0.0
    assert reconcile.to_reserve(0.0, 0) == 0.0


# ---- elastic -------------------------------------------------------------------------


def test_keeps_slots_only_for_an_odd_one_out():
    assert [n for n in range(0, 17) if elastic.keeps_slots(n)] == [1, 3, 5, 7, 9, 11, 13, 15]
    assert elastic.keeps_slots(3, shapes=(2,))
    assert elastic.keeps_slots(2, shapes=(4,))  # 2 -> 1 keeps no quad to lose
    assert not elastic.keeps_slots(4, shapes=(4,))
    assert not elastic.keeps_slots(0, shapes=())


ECFG = ElasticConfig(high_pct=90.0, low_pct=30.0, window_s=60.0, cooldown_s=120.0)


def busy(value: float) -> Window:
    w = Window(600.0)
    w.add(0.0, value)
    return w


def view(**kw) -> elastic.ElasticView:
    base = dict(gpus=2, min_gpus=1, max_gpus=4, last_resize_s=None, free_gpus_on_node=1,
                others_waiting=False)
    base.update(kw)
    return elastic.ElasticView(**base)


def test_grow_when_busy_for_a_window_with_a_free_gpu_and_nobody_waiting():
    assert elastic.decide(view(), busy(95.0), 100.0, ECFG) == "up"
    assert elastic.decide(view(), busy(90.0), 100.0, ECFG) is None  # must be above
    assert elastic.decide(view(), busy(95.0), 59.0, ECFG) is None  # not a whole window yet
    assert elastic.decide(view(free_gpus_on_node=0), busy(95.0), 100.0, ECFG) is None
    assert elastic.decide(view(gpus=4), busy(95.0), 100.0, ECFG) is None
    assert elastic.decide(view(others_waiting=True), busy(95.0), 100.0, ECFG) is None


def test_shrink_when_idle_for_a_window_while_others_wait():
    assert elastic.decide(view(others_waiting=True), busy(10.0), 100.0, ECFG) == "down"
    assert elastic.decide(view(others_waiting=True), busy(30.0), 100.0, ECFG) is None
    assert elastic.decide(view(), busy(10.0), 100.0, ECFG) is None
    assert elastic.decide(view(gpus=1, others_waiting=True), busy(10.0), 100.0, ECFG) is None


def test_the_cooldown_blocks_both_directions_until_it_has_passed():
    last = 100.0
    assert elastic.decide(view(last_resize_s=last), busy(95.0), last + 119.0, ECFG) is None
    assert elastic.decide(view(last_resize_s=last), busy(95.0), last + 120.0, ECFG) == "up"
    assert elastic.decide(view(last_resize_s=last, others_waiting=True), busy(10.0),
                          last + 119.0, ECFG) is None


def test_borrowed_gpus_are_reclaimed_at_once_when_a_queued_task_needs_them():
    v = view(gpus=3, base_gpus=2, others_waiting=True, last_resize_s=199.0)
    assert elastic.decide(v, busy(95.0), 200.0, ECFG) == "reclaim"  # no cooldown
    assert elastic.decide(view(gpus=3, base_gpus=2, others_waiting=True, needed=False),
                          busy(95.0), 200.0, ECFG) is None
    assert elastic.decide(view(gpus=2, base_gpus=2, others_waiting=True), busy(95.0),
                          200.0, ECFG) is None
    assert elastic.decide(view(gpus=3, base_gpus=2), busy(50.0), 200.0, ECFG) is None


# ---- probe ---------------------------------------------------------------------------


def test_classify_kind_by_bandwidth_then_compute():
    cfg = AdaptConfig()  # data at 40 % memory-controller, compute at 60 % SM
    assert probe.classify([10.0], [40.0], [100.0], None, cfg).kind == "data"
    assert probe.classify([90.0], [39.9], [100.0], None, cfg).kind == "compute"
    assert probe.classify([60.0], [0.0], [100.0], None, cfg).kind == "compute"
    assert probe.classify([59.9], [0.0], [100.0], None, cfg).kind == "mixed"


def test_classify_length_burstiness_and_the_means():
    cfg = AdaptConfig()  # long at 3600 s, bursty above cv 0.35
    c = probe.classify([20.0, 60.0], [10.0, 30.0], [1000.0, 3000.0], 3600.0, cfg)
    assert (c.length, c.bursty) == ("long", True)  # cv 0.5
    assert (c.util_pct, c.mem_util_pct, c.mem_mib) == (40.0, 20.0, 2000.0)
    assert c.label == "mixed/long/bursty"
    c = probe.classify([50.0, 50.0], [0.0], [0.0], 3599.0, cfg)
    assert (c.length, c.bursty, c.label) == ("short", False, "mixed/short/steady")
    assert probe.classify([50.0], [0.0], [0.0], None, cfg).length == "unknown"
    # cv exactly at the threshold is not bursty: 0.35 = sd / mean
    assert not probe.classify([65.0, 135.0], [0.0], [0.0], None, cfg).bursty


def test_command_key_is_tenant_image_and_program():
    assert probe.command_key("t", ["python", "train.py"], "img:1") == "t|img:1|python"
    assert probe.command_key("t", None, None) == "t||"
    assert probe.command_key("t", [], "img") == "t|img|"


# ---- config --------------------------------------------------------------------------


def test_the_default_elastic_thresholds_per_qos():
    cfg = AdaptConfig()
    assert cfg.elastic == (
        ("guaranteed", ElasticConfig(90.0, 20.0, 60.0, 120.0)),
        ("burstable", ElasticConfig(90.0, 30.0, 60.0, 120.0)),
        ("best_effort", ElasticConfig(95.0, 30.0, 60.0, 300.0)),
    )
