"""The core's moves with GPU model speed known (``AdaptConfig.model_speed``).

Hand-made clusters with known answers: where a classified probe goes at peak and off
peak, and moves onto a model so slow that the task loses more than the move gains are
not made. Catalog figures (tests' ``FIGURES``): A100 19.5 TFLOPS / 2,039 GB/s / 400 W,
V100M32 15.7 / 900 / 300, T4 8.1 / 320 / 70. Compute work on a T4 runs at 42% of an
A100's speed, on a V100 at 81%; per unit of compute work a T4 takes 8.6 J/TFLOP-s, an
A100 20.5, a V100 19.1; per unit of data work the A100 is the most frugal (0.196 W per
GB/s against the T4's 0.219).
"""

from __future__ import annotations

import pytest
from adapt_builders import SCHED, T0, config, kinds, node, run, task, tick, usage

from streams.core.adapt import speed
from streams.core.cell import Cell
from streams.core.objectives import WeightRule, WeightSchedule
from streams.core.profile import Profile
from streams.profiles.compile import compile_profile
from streams.profiles.service import typical_tasks

NIGHT = 10 * 3600.0
"""Test times are seconds after 12:00 UTC; ``NIGHT`` later is 22:00 (off peak)."""


def _sched(weights: dict[str, float], args: dict | None = None):
    return compile_profile(Profile("p", weights, args or {}),
                           {"typical": typical_tasks(), "seed": 0})


def _offpeak_energy() -> WeightSchedule:
    """The documented default shape: nothing at peak, ``energy`` beside ``hetsched`` off
    peak (20:00-08:00), as in bench/adapt.py."""
    return WeightSchedule((WeightRule("off-peak", _sched({"hetsched": 1.0, "energy": 0.5}),
                                      20.0, 8.0),))


def _cell(objectives: WeightSchedule | None = None, **kw) -> Cell:
    return Cell("cell-0", SCHED, objectives=objectives, adapt=config(**kw))


# ---- the trade-off ----------------------------------------------------------------------

def test_the_energy_share_follows_the_hours_placement_terms():
    assert speed.energy_share(SCHED) == 0.0  # no energy term: completion first
    assert speed.energy_share(_sched({"hetsched": 1.0, "energy": 0.5})) == 1.0
    # only the model part of the energy term counts; a powered-servers-only term is none
    assert speed.energy_share(_sched({"hetsched": 1.0, "energy": 0.5},
                                     {"energy": {"busy_weight": 1.0}})) == 0.0
    both = _sched({"compute": 1.0, "energy": 1.0}, {"energy": {"busy_weight": 0.0}})
    assert speed.energy_share(both) == pytest.approx(0.5)


def test_models_rank_by_run_time_at_peak_and_by_energy_per_work_off_peak():
    c = _cell()
    run(c, node("a", "A100", t=0), node("v", "V100M32", t=0), node("t", "T4", t=0))
    s = c.state
    assert speed.ranked(s, "compute", (), 0.0) == [("A100",), ("V100M32",), ("T4",)]
    assert speed.ranked(s, "compute", (), 1.0) == [("T4",), ("V100M32",), ("A100",)]
    assert speed.ranked(s, "data", (), 1.0)[0] == ("A100",)  # most work per joule too
    # the reference is the fastest model the task may use
    assert speed.speeds(s, "compute", ("V100M32", "T4")) == pytest.approx(
        {"V100M32": 1.0, "T4": 8.1 / 15.7})
    assert speed.speeds(s, "compute")["T4"] == pytest.approx(8.1 / 19.5)


# ---- placement after a probe ------------------------------------------------------------

def _probed_to(objectives: WeightSchedule | None, t0: float, **kw) -> str:
    """A featureless 1-GPU task is probed on half a GPU and found compute bound; A100 node
    a and T4 node t (2 GPUs each) are free: the model its real allocation moves to."""
    c = _cell(objectives, probe_s=30.0, **kw)
    out = run(c, node("a", "A100", gpus=2, t=t0), node("t", "T4", gpus=2, t=t0),
              task("p", t=t0 + 1, profile=None))
    assert kinds(out) == ["TaskProbe"]
    where = c.tasks["p"].node or ""
    run(c, usage("p", where, t0 + 5, 95.0, gpus=c.tasks["p"].gpus),
        usage("p", where, t0 + 20, 96.0, gpus=c.tasks["p"].gpus))
    out = run(c, tick(1, t0 + 32))
    assert kinds(out) == ["TaskMigrating"] and out[0].reason.code == "probe_classified"
    assert out[0].reason.message.startswith("compute/")
    return c.nodes[out[0].to_node_id].added.gpu_model


def test_a_compute_bound_probe_goes_to_the_fast_model_at_peak():
    assert _probed_to(_offpeak_energy(), 0.0, model_speed=True) == "A100"


def test_a_compute_bound_probe_goes_to_the_frugal_model_off_peak_with_the_energy_term():
    assert _probed_to(_offpeak_energy(), NIGHT, model_speed=True) == "T4"


def test_without_model_speed_a_probe_goes_to_the_most_efficient_models_all_day():
    assert _probed_to(_offpeak_energy(), 0.0) == "T4"  # the original rule, unchanged
    assert _probed_to(None, 0.0) == "T4"


def test_the_probe_takes_the_next_model_when_the_best_has_no_room():
    c = _cell(probe_s=30.0, model_speed=True)
    run(c, node("a", "A100", gpus=1, t=0), node("v", "V100M32", gpus=1, t=0),
        node("t", "T4", gpus=1, t=0), task("hog", t=1, models=("A100",), duration_s=36000))
    assert c.tasks["hog"].node == "a"
    run(c, task("p", t=2, profile=None))
    where = c.tasks["p"].node or ""
    run(c, usage("p", where, 5, 95.0, gpus=c.tasks["p"].gpus),
        usage("p", where, 20, 96.0, gpus=c.tasks["p"].gpus))
    out = run(c, tick(1, 33))
    assert kinds(out) == ["TaskMigrating"] and out[0].to_node_id == "v"


# ---- hot spots -------------------------------------------------------------------------

def _hot(dest_model: str, **kw) -> Cell:
    """A100 node n1 (2 GPUs) runs a and a2 (10 h), both 99% busy: a hot spot (10% slower).
    Two idle 1-GPU nodes of ``dest_model`` are the only destinations."""
    c = _cell(hot_spot_onto_idle=True, **kw)
    run(c, node("n1", "A100", gpus=2, t=0), task("a", t=1, duration_s=36000),
        task("a2", t=1.5, duration_s=72000))
    run(c, node("n2", dest_model, gpus=1, t=2), node("n3", dest_model, gpus=1, t=2))
    run(c, usage("a", "n1", 4, 99.0, gpus=c.tasks["a"].gpus),
        usage("a2", "n1", 4, 99.0, gpus=c.tasks["a2"].gpus))
    return c


def test_a_hot_spot_move_onto_a_much_slower_model_is_not_made():
    c = _hot("T4", model_speed=True)  # 90% of an A100 where it is, 42% on a T4
    assert run(c, tick(1, 10)) == []
    assert c.adapt.meta["counters"]["migrations_refused"] == 1
    assert c.tasks["a2"].node == "n1"


def test_a_hot_spot_move_onto_a_slightly_slower_model_is_not_made_either():
    c = _hot("V100M32", model_speed=True)  # 90% where it is, 81% on a V100
    assert run(c, tick(1, 10)) == []
    assert c.tasks["a2"].node == "n1"


def test_a_hot_spot_move_onto_the_same_model_is_made():
    c = _hot("A100", model_speed=True)
    out = run(c, tick(1, 10))
    assert kinds(out) == ["TaskMigrating"] and out[0].reason.code == "hot_spot"
    assert out[0].reason.metrics["benefit_s"] > 1.5 * out[0].reason.metrics["cost_s"]


def test_without_model_speed_the_hot_spot_moves_to_the_t4():
    out = run(_hot("T4"), tick(1, 10))
    assert kinds(out) == ["TaskMigrating"] and out[0].to_node_id in ("n2", "n3")


def test_a_hot_spot_move_prefers_the_fast_model_when_both_have_room():
    c = _cell(hot_spot_onto_idle=True, model_speed=True)
    run(c, node("n1", "A100", gpus=2, t=0), task("a", t=1, duration_s=36000),
        task("a2", t=1.5, duration_s=72000))
    run(c, node("n2", "T4", gpus=1, t=2), node("n3", "A100", gpus=1, t=2))
    run(c, usage("a", "n1", 4, 99.0, gpus=c.tasks["a"].gpus),
        usage("a2", "n1", 4, 99.0, gpus=c.tasks["a2"].gpus))
    out = run(c, tick(1, 10))
    assert kinds(out) == ["TaskMigrating"] and out[0].to_node_id == "n3"


# ---- defragmentation -------------------------------------------------------------------

def _fragmented(spare_model: str, **kw) -> tuple[Cell, list]:
    """A100 n1 (2 GPUs) runs big1 (1 h); f1 and f2 (half a GPU, 10 h) share a GPU of A100
    n2; a 1-GPU node of ``spare_model`` is free. big2 (2 GPUs) waits; moving f1 and f2 to
    the spare node lets it start on n2 about an hour early (2 GPUs x ~1 h saved)."""
    c = _cell(defrag=True, **kw)
    run(c, node("n1", gpus=2, t=0), task("big1", gpus=2, t=1, duration_s=3600))
    run(c, node("n2", gpus=2, t=2), task("f1", share=500, t=3, duration_s=36000),
        task("f2", share=500, t=4, duration_s=36000))
    run(c, node("n3", spare_model, gpus=1, t=5))
    run(c, task("big2", gpus=2, t=6))
    return c, run(c, tick(1, 10))


def test_defragmentation_onto_a_slow_model_is_refused_when_the_victims_lose_more():
    # f1, f2 on a T4: 2 x 0.5 GPU x ~10 h x (1/0.42 - 1) ~ 14 GPU-h lost for ~2 GPU-h saved
    c, out = _fragmented("T4", model_speed=True)
    assert out == []
    assert c.adapt.meta["counters"]["defrag_refused_speed"] == 1
    assert c.tasks["f1"].node == c.tasks["f2"].node == "n2"
    assert c.tasks["big2"].node is None


def test_defragmentation_onto_the_same_model_goes_ahead_with_model_speed():
    c, out = _fragmented("A100", model_speed=True)
    assert kinds(out) == ["TaskMigrating", "TaskMigrating", "TaskPlaced"]
    assert c.tasks["big2"].node == "n2"


def test_without_model_speed_defragmentation_uses_the_t4():
    c, out = _fragmented("T4")
    assert kinds(out) == ["TaskMigrating", "TaskMigrating", "TaskPlaced"]
    assert {c.tasks["f1"].node, c.tasks["f2"].node} == {"n3"}


def test_the_config_reads_model_speed_from_the_environment():
    from streams.core.adapt.config import AdaptConfig

    assert not AdaptConfig.from_env({}).model_speed
    assert AdaptConfig.from_env({"HETSCHED_MODEL_SPEED": "1"}).model_speed
    assert T0.hour == 12  # NIGHT above assumes the tests' clock starts at noon UTC


def test_the_cli_turns_on_model_speed_in_the_core_with_the_simulators():
    import argparse

    from streams.core.queue import QueueConfig
    from streams.profiles.service import service_scheduler
    from streams.sim.time.adapt import add_arguments, attach_from_args
    from streams.sim.time.engine import SimPolicy, Simulator
    from streams.sim.time.jobs import make_job
    from streams.sim.traces import NodeSpec

    parser = argparse.ArgumentParser()
    add_arguments(parser)

    def sim():
        return Simulator(SimPolicy("hetsched", service_scheduler("hetsched"), QueueConfig()),
                         [NodeSpec("n", 32_000, 262_144, 1, "T4")],
                         [make_job("j", 0.0, 60.0, 1, 1000)])

    layer = attach_from_args(sim(), parser.parse_args(["--adapt", "--model-speed"]), "hetsched")
    assert layer is not None and layer.cfg.model_speed and layer.cfg.core.model_speed
    layer = attach_from_args(sim(), parser.parse_args(["--adapt"]), "hetsched")
    assert layer is not None and not layer.cfg.core.model_speed
