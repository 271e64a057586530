"""GPU model speed in the time simulator (``SimAdaptConfig.model_speed``), by hand.

The cluster has one A100 and one T4 server, one GPU each; the A100 server has
too little CPU for the test job, so an unconstrained job lands on the T4 while
its duration stays measured on the A100 (the fastest model it may use).
"""

from __future__ import annotations

import pytest

from schemas.gpu_catalog import load_catalog
from streams.core.adapt.energy import HOST_IDLE_W, gpu_power_w
from streams.core.decisions import Placement
from streams.core.queue import QueueConfig
from streams.profiles.service import service_scheduler
from streams.sim.time.adapt import SimAdaptConfig, attach_adaptation
from streams.sim.time.engine import SimPolicy, Simulator
from streams.sim.time.jobs import make_job
from streams.sim.traces import NodeSpec

CAT = load_catalog()
A100, T4 = CAT["A100"], CAT["T4"]
DURATION = 1000.0


def _run(model_speed: bool, *, input_node: str | None = None, a100_cpu: int = 100,
         gpu_models: tuple[str, ...] = (), task_class: str = "",
         data_classes: tuple[str, ...] = ()):
    nodes = [NodeSpec("big", a100_cpu, 262_144, 1, "A100"),
             NodeSpec("small", 32_000, 262_144, 1, "T4")]
    job = make_job("j", 0.0, DURATION, 1, 1000, cpu_milli=1000, util=1.0,
                   input_node=input_node, gpu_models=gpu_models, task_class=task_class)
    sim = Simulator(SimPolicy("hetsched", service_scheduler("hetsched"), QueueConfig()),
                    nodes, [job])
    layer = attach_adaptation(sim, SimAdaptConfig(adapt=False, shaped=False,
                                                  model_speed=model_speed,
                                                  data_classes=data_classes))
    placed: list[str] = []
    sim.observers.append(lambda _s, _t, o: placed.append(o.node)
                         if isinstance(o, Placement) and o.task == "j" else None)
    rec = sim.run()
    return rec.jobs["j"].end_s, placed[-1], layer


def test_a_compute_task_on_a_t4_takes_the_fp32_ratio_longer_than_on_an_a100():
    end, node, _ = _run(True)
    assert node == "small"
    assert end == pytest.approx(DURATION * A100.fp32_tflops / T4.fp32_tflops)
    end, node, _ = _run(True, a100_cpu=32_000)
    assert node == "big"
    assert end == pytest.approx(DURATION)


def test_a_data_task_on_a_t4_takes_the_bandwidth_ratio_longer():
    end, node, _ = _run(True, input_node="small")
    assert node == "small"
    assert end == pytest.approx(
        DURATION * A100.mem_bandwidth_gbps / T4.mem_bandwidth_gbps)


def test_a_class_named_as_data_work_runs_at_the_bandwidth_ratio_without_an_input_node():
    end, node, _ = _run(True, task_class="inference", data_classes=("inference",))
    assert node == "small"
    assert end == pytest.approx(DURATION * A100.mem_bandwidth_gbps / T4.mem_bandwidth_gbps)
    end, _, _ = _run(True, task_class="inference")  # default: compute work
    assert end == pytest.approx(DURATION * A100.fp32_tflops / T4.fp32_tflops)


def test_the_reference_is_the_fastest_model_the_job_may_use():
    end, node, _ = _run(True, gpu_models=("T4",))  # may only use T4s: measured on a T4
    assert node == "small"
    assert end == pytest.approx(DURATION)


def test_off_by_default_a_t4_runs_the_task_as_fast_as_an_a100():
    assert SimAdaptConfig().model_speed is False
    end, node, _ = _run(False)
    assert node == "small"
    assert end == pytest.approx(DURATION)


def test_energy_per_task_integrates_the_longer_run():
    fast, _, off = _run(False)
    slow, _, on = _run(True)
    extra_s = slow - fast
    assert extra_s == pytest.approx(DURATION * (A100.fp32_tflops / T4.fp32_tflops - 1.0))
    # the T4 server draws host + one GPU at full use for the extra time (ticks are 60 s)
    busy_w = HOST_IDLE_W + gpu_power_w(T4.tdp_w, 1.0)
    assert on.stats.energy_j - off.stats.energy_j == pytest.approx(busy_w * extra_s,
                                                                   abs=busy_w * 60.0)
    assert on.summary()["energy_per_task_wh"] - off.summary()["energy_per_task_wh"] == (
        pytest.approx(busy_w * extra_s / 3600.0, abs=busy_w * 60.0 / 3600.0))


def _energy_cell(per_work: float):
    from streams.core.cell import Cell
    from streams.core.events import NodeAdded
    from streams.core.profile import Profile
    from streams.profiles.compile import compile_profile

    prof = Profile("energy-only", {"energy": 1.0},
                   {"energy": {"busy_weight": 0.0, "per_work": per_work}}, "least_free")
    c = Cell("c", compile_profile(prof), QueueConfig(), explain=False)
    c.add_node(NodeAdded("a", "a100", 64_000, 262_144, 8, "A100"), now_s=0.0)
    c.add_node(NodeAdded("t", "t4", 64_000, 262_144, 8, "T4"), now_s=0.0)
    return c


@pytest.mark.parametrize(("per_work", "input_node", "expected"), [
    (0.0, None, "t4"), (0.0, "t4", "t4"),  # FP32 TFLOPS per watt: the T4 for everything
    (1.0, None, "t4"),  # compute work per joule: the T4 (8.1 TF / 70 W > 19.5 / 400)
    (1.0, "t4", "a100"),  # data work per joule: the A100 (2,039 GB/s / 400 W > 320 / 70)
])
def test_the_energy_term_per_unit_of_work_follows_the_tasks_kind(per_work, input_node,
                                                                 expected):
    from streams.core.events import TaskArrived
    from streams.core.queue import TaskMeta
    from streams.core.request import TaskRequest

    c = _energy_cell(per_work)
    c.submit(TaskArrived("s", TaskRequest("x", 1000, 1024, 1, 1000, (), input_node)), None,
             TaskMeta(), now_s=0.0)
    assert c.tasks["x"].node == expected


def test_the_energy_term_rejects_a_per_work_that_is_not_0_or_1():
    from streams.policies.energy import factory

    with pytest.raises(ValueError, match="per_work"):
        factory({"per_work": 0.5})


def test_the_cli_flag_installs_the_layer_with_model_speed_and_its_absence_does_not():
    import argparse

    from streams.sim.time.adapt import add_arguments, attach_from_args

    parser = argparse.ArgumentParser()
    add_arguments(parser)
    nodes = [NodeSpec("small", 32_000, 262_144, 1, "T4")]

    def sim():
        return Simulator(SimPolicy("hetsched", service_scheduler("hetsched"), QueueConfig()),
                         nodes, [make_job("j", 0.0, DURATION, 1, 1000)])

    layer = attach_from_args(sim(), parser.parse_args(["--model-speed"]), "hetsched")
    assert layer is not None and layer.cfg.model_speed and not layer.cfg.adapt
    assert attach_from_args(sim(), parser.parse_args([]), "hetsched") is None
    layer = attach_from_args(sim(), parser.parse_args(["--adapt"]), "hetsched")
    assert layer is not None and not layer.cfg.model_speed
