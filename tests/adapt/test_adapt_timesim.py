"""The time simulator's adaptation and fault layer on small clusters with known answers."""

from __future__ import annotations

import pytest

from streams.core.adapt.config import AdaptConfig, ElasticConfig
from streams.core.queue import QueueConfig
from streams.profiles.service import service_scheduler
from streams.sim.time.adapt import SimAdaptConfig, attach_adaptation, attach_failures, attach_faults
from streams.sim.time.engine import SimPolicy, Simulator
from streams.sim.time.jobs import make_job
from streams.sim.traces import NodeSpec


def _sim(nodes, jobs, horizon_s=None):
    return Simulator(SimPolicy("hetsched", service_scheduler("hetsched"), QueueConfig()),
                     nodes, jobs, horizon_s)


def _a100(count, gpus=4):
    return [NodeSpec(f"n{i}", 32000, 262144, gpus, "A100") for i in range(count)]


def test_jobs_on_failed_nodes_are_re_placed_and_every_job_finishes():
    jobs = [make_job(f"j{i}", 60.0 * i, 1800.0, 1, 1000) for i in range(24)]
    sim = _sim(_a100(4), jobs)
    log = attach_failures(sim, fraction=0.5, seed=1, repair_s=600.0)
    rec = sim.run()
    assert log.failures == 2 and log.evictions > 0 and log.work_lost_gpu_h > 0
    assert all(s.status == "finished" for s in rec.jobs.values())


def test_with_adaptation_off_every_decision_and_end_is_the_plain_simulators():
    jobs = [make_job(f"j{i}", 90.0 * i, 600.0 + 40 * i, 1 + i % 2, 1000, util=0.5)
            for i in range(30)]
    plain = _sim(_a100(2), jobs).run()
    sim = _sim(_a100(2), jobs)
    layer = attach_adaptation(sim, SimAdaptConfig(adapt=False, shaped=False))
    rec = sim.run()
    assert {k: v.end_s for k, v in rec.jobs.items()} == pytest.approx(
        {k: v.end_s for k, v in plain.jobs.items()})
    assert sim.cell.adapt.meta.get("counters", {}) == {}
    assert layer.summary()["usage_reports"] == 0


def _elastic_sim(adapt: bool, keep_slots: bool = False):
    """``keep_slots=False``: the original growth rule, so that the job can grow twice on its
    own node (the slot rule would keep the node's free pairs for arrivals)."""
    e = ElasticConfig(window_s=60.0, cooldown_s=120.0)
    core = AdaptConfig(probe_s=0.0, elastic=(("burstable", e),), elastic_keep_slots=keep_slots)
    job = make_job("train", 0.0, 7200.0, 2, 1000, task_class="training", util=1.0)
    sim = _sim(_a100(1, gpus=8), [job])
    layer = attach_adaptation(sim, SimAdaptConfig(adapt=adapt, core=core, shaped=False))
    return sim, layer


def test_a_saturated_elastic_job_grows_on_an_idle_node_and_ends_sooner():
    sim, layer = _elastic_sim(True)
    rec = sim.run()
    s = layer.summary()
    # one GPU per cooldown up to its declared max of 2 x 2 (two resizes, at 120 s and
    # 240 s); never shrinks (nobody waits); then runs at (4/2)**0.85 = 1.80x speed
    assert s["resizes_up"] == 2 and s["resizes_down"] == 0
    left = 7200.0 - 120.0 - 120.0 * 1.5 ** 0.85
    assert rec.jobs["train"].end_s == pytest.approx(240.0 + left / 2.0 ** 0.85, rel=1e-6)
    off, _ = _elastic_sim(False)
    assert off.run().jobs["train"].end_s == pytest.approx(7200.0)


def test_with_the_slot_rule_a_job_alone_on_a_node_keeps_its_free_pairs():
    sim, layer = _elastic_sim(True, keep_slots=True)
    rec = sim.run()  # 6 free GPUs of 8: every one completes a pair a 2-GPU arrival may want
    assert layer.summary()["resizes_up"] == 0
    assert rec.jobs["train"].end_s == pytest.approx(7200.0)


def test_a_throttled_gpu_halves_the_speed_of_its_task_for_the_episode():
    sim = _sim(_a100(1, gpus=1), [make_job("j", 0.0, 3600.0, 1, 1000)])
    attach_adaptation(sim, SimAdaptConfig(adapt=False, shaped=False))
    attach_faults(sim, seed=0)
    sim.push(600.0, "throttle_on", ("n0", 0))
    sim.push(1800.0, "throttle_off", ("n0", 0))
    rec = sim.run()
    assert rec.jobs["j"].end_s == pytest.approx(3600.0 + 600.0)  # 1200 s at half speed


def test_with_adaptation_a_long_task_leaves_a_throttled_gpu_and_pays_the_move():
    nodes = _a100(2, gpus=1)
    sim = _sim(nodes, [make_job("j", 0.0, 36000.0, 1, 1000, expected_s=36000.0)])
    layer = attach_adaptation(sim, SimAdaptConfig(adapt=True, shaped=False,
                                                  core=AdaptConfig(probe_s=0.0)))
    attach_faults(sim, seed=0)
    sim.push(600.0, "throttle_on", ("n0", 0))
    rec = sim.run()
    s = layer.summary()
    assert s["moves_thermal_throttled"] == 1
    # throttled from 600 s to the next tick (660 s), then the move's cost is redone work
    expected = 36000.0 + 30.0 + s["migration_cost_s"]
    assert rec.jobs["j"].end_s == pytest.approx(expected, abs=31.0)


def test_a_failed_gpus_task_restarts_elsewhere_and_its_progress_is_counted_lost():
    sim = _sim(_a100(1, gpus=2), [make_job("j", 0.0, 3600.0, 1, 1000)])
    layer = attach_adaptation(sim, SimAdaptConfig(adapt=False, shaped=False))
    attach_faults(sim, seed=0)
    sim.push(1800.0, "gpu_fail", ("n0", 0))
    rec = sim.run()
    assert layer.faults.evictions == 1
    assert layer.faults.work_lost_gpu_h == pytest.approx(0.5)
    assert rec.jobs["j"].end_s == pytest.approx(1800.0 + 3600.0)
    assert sim.cell.state.gpu_free[0, 0] == 0  # the failed GPU is never offered again


def test_idle_servers_power_down_and_energy_follows_the_power_model():
    from streams.core.adapt.energy import HOST_IDLE_W, gpu_power_w

    sim = _sim(_a100(2, gpus=1), [make_job("j", 0.0, 3600.0, 1, 1000, util=0.5)])
    layer = attach_adaptation(sim, SimAdaptConfig(adapt=False, shaped=False, idle_off_s=600.0))
    sim.run()
    tdp = float(sim.cell.state.model_tdp_w[0])
    busy = HOST_IDLE_W + gpu_power_w(tdp, 0.5)
    idle = HOST_IDLE_W + gpu_power_w(tdp, 0.0)
    # one node busy for the hour; the other idle until powered down after 600 s
    expected_j = busy * 3600.0 + idle * 600.0
    assert layer.stats.energy_j == pytest.approx(expected_j, rel=0.02)


def test_the_cli_runs_adaptation_and_faults_and_reports_them(tmp_path):
    import argparse

    from streams.commands import simulate
    from streams.sim.time.jobs import write_jobs

    jobs = [make_job(f"t{i}", 120.0 * i, 3600.0, 2, 1000, task_class="training", util=0.9)
            for i in range(6)]
    jobs += [make_job(f"i{i}", 30.0 * i, 300.0, 1, 250, task_class="inference", util=0.6)
             for i in range(40)]
    csv_path = tmp_path / "jobs.csv"
    write_jobs(csv_path, jobs)
    nodes = tmp_path / "nodes.csv"
    nodes.write_text("sn,cpu_milli,memory_mib,gpu,model\n"
                     + "".join(f"node{i},64000,262144,8,A100\n" for i in range(4)))
    parser = argparse.ArgumentParser()
    simulate.add_arguments(parser)
    args = parser.parse_args(["--mode", "time", "--jobs", str(csv_path), "--nodes", str(nodes),
                              "--adapt", "--throttle", "0.25", "--gpu-fail-fraction", "0.1",
                              "--out", str(tmp_path / "out")])
    assert simulate.run(args) == 0
    table = (tmp_path / "out" / "summary.md").read_text()
    assert "## Adaptation and faults" in table
    rows = {line.split("|")[1].strip(): [c.strip() for c in line.split("|")[2:-1]]
            for line in table.splitlines() if line.startswith("| ") and "|" in line[2:]}
    assert rows["probes"][0] == "0.0" and float(rows["probes"][1]) > 0  # static never adapts
    assert float(rows["resizes up"][1]) > 0
