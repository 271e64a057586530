"""The whole-GPU research baselines (streams.sim.time.baselines): hand-computed schedules.

Restart cost: 40 s for jobs of at most 8 GPUs (``restart_s``); Tiresias: one
threshold of 3,600 GPU-seconds, promotion after 8 x the time run since the
last promotion.
"""

from __future__ import annotations

import argparse
import json

import pytest

from streams.core.cell import Preempted
from streams.core.decisions import Placement
from streams.sim.time import baselines
from streams.sim.time.cli import make_policy
from streams.sim.time.engine import Simulator, make_simulator
from streams.sim.time.jobs import make_job, write_jobs
from streams.sim.time.mixed import mixed_cluster, mixed_jobs
from streams.sim.traces import NodeSpec


def _nodes(count: int, gpus: int = 4) -> list[NodeSpec]:
    return [NodeSpec(f"n{i}", 48_000, 385_426, gpus, "V100") for i in range(count)]


def _run(policy: str, nodes, jobs, horizon=None):
    """Run and return (recorder, events, ends): events are (time, kind, task, by) for
    every start and preemption, ends the finish time per task."""
    sim = make_simulator(make_policy(policy, jobs), nodes, jobs, horizon)
    events: list[tuple[float, str, str, str]] = []
    holder: dict[tuple[str, int], str] = {}
    capacity = {n.name: n.gpu_count for n in nodes}

    def watch(s, t, o):
        if isinstance(o, Placement):
            members = o.members or ((o.node, o.gpus),)
            assert sum(len(g) for _, g in members) == sim.view.tasks[o.task].gpus  # whole gang
            for node, gpus in members:
                for g in gpus:
                    assert 0 <= g < capacity[node]
                    assert (node, g) not in holder, f"{o.task} on a GPU of {holder[(node, g)]}"
                    holder[(node, g)] = o.task
            events.append((t, "start", o.task, ""))
        elif isinstance(o, Preempted):
            for k in [k for k, v in holder.items() if v == o.task]:
                del holder[k]
            events.append((t, "preempt", o.task, o.by_task))

    sim.observers.append(watch)
    finish = sim.handlers["finish"]

    def on_finish(s, t, payload):
        finish(s, t, payload)
        if sim.view.tasks[payload[0]].status == baselines.DONE:
            for k in [k for k, v in holder.items() if v == payload[0]]:
                del holder[k]

    sim.handlers["finish"] = on_finish
    rec = sim.run()
    assert not holder  # every GPU given back
    ends = {t: s.end_s for t, s in rec.jobs.items()}
    return rec, events, ends


def test_tiresias_preempts_a_job_at_its_threshold_not_before():
    # A (4 GPUs) crosses 3,600 GPU-s at 900 s and drops to Q1; B (zero service, Q0) has
    # waited since 100 s: it preempts A at 900, not at its arrival. A restarts when B
    # ends (1,500) with 40 s of restart: 5,000 - 900 + 40 = 4,140 s left, ends at 5,640.
    jobs = [make_job("A", 0, 5000, 4, 1000), make_job("B", 100, 600, 4, 1000)]
    rec, events, ends = _run("tiresias", _nodes(1), jobs)
    assert events == [(0, "start", "A", ""), (900, "preempt", "A", "B"),
                      (900, "start", "B", ""), (1500, "start", "A", "")]
    assert ends == {"A": 5640, "B": 1500}
    assert (rec.jobs["A"].preemptions, rec.jobs["B"].preemptions) == (1, 0)
    assert (rec.jobs["A"].wait_s, rec.jobs["B"].wait_s) == (600, 800)
    assert rec.summary()["preemptions"] == 1


def test_tiresias_does_not_preempt_within_a_queue():
    # Both in Q0 (A has 3,000 GPU-s when B arrives at 750): B waits for A's threshold.
    jobs = [make_job("A", 0, 800, 4, 1000), make_job("B", 750, 100, 4, 1000)]
    _, events, ends = _run("tiresias", _nodes(1), jobs)
    assert [e for e in events if e[1] == "preempt"] == []
    assert ends == {"A": 800, "B": 900}


def test_tiresias_promotes_a_starving_job_at_knob_times_its_run():
    # A: Q0 until 900 s (3,600 GPU-s), preempted by B at 900. B drops to Q1 at 1,800:
    # same queue as A, so no preemption, and B runs on. A has run 900 s since it entered
    # Q0: promoted back at 900 + 8 x 900 = 8,100, it preempts B (Q1). A restarts (40 s),
    # runs 900 s (to 9,040) in Q0, drops to Q1, no one waits in Q0: it ends at
    # 8,100 + 10,000 - 900 + 40 = 17,240. B ran 7,200 s; it restarts at 17,240 and
    # ends at 17,240 + 20,000 - 7,200 + 40 = 30,080 (its own promotion, due at
    # 8,100 + 8 x 7,200, comes later).
    jobs = [make_job("A", 0, 10_000, 4, 1000), make_job("B", 100, 20_000, 4, 1000)]
    _rec, events, ends = _run("tiresias", _nodes(1), jobs)
    assert events == [(0, "start", "A", ""), (900, "preempt", "A", "B"),
                      (900, "start", "B", ""), (8100, "preempt", "B", "A"),
                      (8100, "start", "A", ""), (17_240, "start", "B", "")]
    assert ends == {"A": 17_240, "B": 30_080}
    assert baselines.PROMOTE_KNOB == 8.0 and baselines.TIRESIAS_THRESHOLDS_GPU_S == (3600.0,)


def test_srtf_runs_a_shorter_arrival_ahead_and_matches_the_hand_schedule():
    # A (1,000 s) runs; B (300 s) arrives at 200 with less left than A's 800: A is
    # preempted, B runs 200-500. C (900 s) arrives at 250 and waits: A's 800 + 40 s of
    # restart = 840 < 900, so A goes first, 500-1,340. D (100 s) arrives at 1,300: A has
    # 40 s left, so D waits, then runs before C (100 < 900): 1,340-1,440, C 1,440-2,340.
    jobs = [make_job("A", 0, 1000, 4, 1000), make_job("B", 200, 300, 4, 1000),
            make_job("C", 250, 900, 4, 1000), make_job("D", 1300, 100, 4, 1000)]
    rec, events, ends = _run("srtf-oracle", _nodes(1), jobs)
    assert events == [(0, "start", "A", ""), (200, "preempt", "A", "B"),
                      (200, "start", "B", ""), (500, "start", "A", ""),
                      (1340, "start", "D", ""), (1440, "start", "C", "")]
    assert ends == {"A": 1340, "B": 500, "C": 2340, "D": 1440}
    assert rec.summary()["preemptions"] == 1


@pytest.mark.parametrize("policy", baselines.NAMES)
def test_a_gang_starts_whole_on_idle_nodes_or_not_at_all(policy):
    # 2 nodes x 4 GPUs; S holds 1 GPU of n0 until 1,000; G (8 GPUs) needs both nodes whole.
    # SRTF: G (100 s) < S's 990 s left: S is preempted at 10 and G starts whole at once.
    # Tiresias: S stays in Q0 (1,000 GPU-s < 3,600): G waits, then starts whole at 1,000.
    jobs = [make_job("S", 0, 1000, 1, 1000), make_job("G", 10, 100, 8, 1000)]
    _rec, events, ends = _run(policy, _nodes(2), jobs)
    starts = [e for e in events if e[2] == "G"]
    assert starts == [(10 if policy == baselines.SRTF else 1000, "start", "G", "")]
    assert ends["G"] == starts[0][0] + 100


def test_gangs_of_the_real_shape_never_hold_gpus_in_part():
    # 3 nodes x 8 GPUs; gangs of 16 and 12 GPUs among single-node jobs: every start of
    # every gang holds all its GPUs (checked in _run), and each job runs its whole duration.
    jobs = [make_job(f"j{i}", i * 50.0, 400 + 37 * (i % 7), g, 1000)
            for i, g in enumerate([8, 16, 4, 12, 2, 16, 1, 8, 12, 3, 24, 6])]
    for policy in baselines.NAMES:
        rec, _events, ends = _run(policy, _nodes(3, 8), jobs)
        assert all(s.status == "finished" for s in rec.jobs.values())
        for j in jobs:
            assert ends[j.job_id] - j.arrival_s >= j.duration_s


@pytest.mark.parametrize("policy", baselines.NAMES)
def test_a_mixed_run_is_deterministic_and_loses_no_job(policy):
    nodes = mixed_cluster()[::4]
    jobs = mixed_jobs(7, 3600.0, 0.2, nodes)
    a, _, _ = _run(policy, nodes, jobs, 3600.0)
    b, _, _ = _run(policy, nodes, jobs, 3600.0)
    assert a.summary() == b.summary()
    assert {s.status for s in a.jobs.values()} <= {"finished", "unschedulable"}
    assert len(a.jobs) == len(jobs)


def test_the_cell_simulator_refuses_a_baseline_policy():
    jobs = [make_job("A", 0, 10, 1, 1000)]
    with pytest.raises(TypeError, match="make_simulator"):
        Simulator(make_policy("tiresias", jobs), _nodes(1), jobs)


def test_the_cli_accepts_the_baselines_and_refuses_the_fault_layer_with_them(tmp_path):
    from streams.commands import simulate

    nodes = mixed_cluster()[::4]
    csv_path = tmp_path / "jobs.csv"
    write_jobs(csv_path, mixed_jobs(7, 3600.0, 0.2, nodes))
    parser = argparse.ArgumentParser()
    simulate.add_arguments(parser)
    out = tmp_path / "out"
    args = parser.parse_args(["--mode", "time", "--jobs", str(csv_path), "--policies",
                              "static,tiresias,srtf-oracle", "--out", str(out)])
    assert simulate.run(args) == 0
    assert "| static | tiresias | srtf-oracle |" in (out / "summary.md").read_text()
    assert set(json.loads((out / "summary.json").read_text())["summary"]) == {
        "static", "tiresias", "srtf-oracle"}
    args = parser.parse_args(["--mode", "time", "--jobs", str(csv_path), "--policies",
                              "tiresias", "--fail-fraction", "0.1", "--out", str(out)])
    assert simulate.run(args) == 2
    with pytest.raises(SystemExit):
        parser.parse_args(["--policies", "tiresia"])


def test_gpus_a_preemption_frees_beyond_the_preemptors_need_go_to_waiting_jobs_at_once():
    # SRTF, 1 node x 8 GPUs. A (8 GPUs, 1,000 s) runs; B (2 GPUs, 5,000 s) waits: it has
    # more left than A. C (2 GPUs, 100 s) at 20 preempts A (980 s left) and takes 2 GPUs;
    # B takes 2 of the 6 left at once. C ends at 120: A (980 + 40 s restart = 1,020 s)
    # has less left than B (4,900 s) and preempts it, 120-1,140; B restarts with 40 s:
    # 1,140 + 4,900 + 40 = 6,080.
    jobs = [make_job("A", 0, 1000, 8, 1000), make_job("B", 10, 5000, 2, 1000),
            make_job("C", 20, 100, 2, 1000)]
    _, events, ends = _run("srtf-oracle", _nodes(1, 8), jobs)
    assert events == [(0, "start", "A", ""), (20, "preempt", "A", "C"),
                      (20, "start", "C", ""), (20, "start", "B", ""),
                      (120, "preempt", "B", "A"), (120, "start", "A", ""),
                      (1140, "start", "B", "")]
    assert ends == {"A": 1140, "B": 6080, "C": 120}
