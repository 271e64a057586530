"""The time-mode baselines (issue 31, part 1): ``fifo`` (alias ``static``) and ``backfill``.

The backfill cases are tiny clusters built by hand, so every start time below is
worked out in the comments, not read off a run.
"""

from __future__ import annotations

import argparse
import random

import pytest

from streams.core.queue import QueueConfig
from streams.sim.time.cli import backfill_estimate, make_policy
from streams.sim.time.engine import Simulator
from streams.sim.time.jobs import Job, make_job, write_jobs
from streams.sim.time.mixed import mixed_cluster, mixed_jobs
from streams.sim.traces import NodeSpec


def _nodes(count: int, gpus: int) -> list[NodeSpec]:
    return [NodeSpec(f"node{i}", 64_000, 262_144, gpus, "A100") for i in range(count)]


def _starts(policy: str, nodes: list[NodeSpec], jobs: list[Job]) -> dict[str, float]:
    run = Simulator(make_policy(policy, jobs), nodes, jobs).run()
    return {j: s.first_start_s for j, s in run.jobs.items()}


def test_fifo_and_static_are_the_same_policy_with_the_same_results():
    nodes = mixed_cluster()[::4]
    jobs = mixed_jobs(7, 3600.0, 0.6, nodes)
    fifo = Simulator(make_policy("fifo", jobs), nodes, jobs, 3600.0).run()
    static = Simulator(make_policy("static", jobs), nodes, jobs, 3600.0).run()
    assert fifo.summary() == static.summary()
    assert ({j: (s.first_start_s, s.status) for j, s in fifo.jobs.items()}
            == {j: (s.first_start_s, s.status) for j, s in static.jobs.items()})
    assert any(s.first_start_s > s.job.arrival_s for s in fifo.jobs.values())  # some waited


def _hole(c_expected: float | None = None) -> list[Job]:
    """One 8-GPU node. A (4 GPUs, 0..100) runs; B (all 8) cannot start before A ends:
    B is the head, reserved on the node at t=100. C (2 GPUs, 60 s) ends at 62 if it
    starts at 2: it fits in the hole before B's start. D (2 GPUs, 200 s) fits too, but
    it would hold its GPUs until 203 and push B back to 203, so EASY keeps it waiting."""
    return [
        make_job("A", 0.0, 100.0, 4, 1000),
        make_job("B", 1.0, 50.0, 8, 1000),
        make_job("C", 2.0, 60.0, 2, 1000, expected_s=c_expected),
        make_job("D", 3.0, 200.0, 2, 1000),
    ]


def test_backfill_starts_a_small_job_in_a_hole_but_not_one_that_would_delay_the_head():
    nodes = _nodes(1, 8)
    # C backfills at once; B starts when A ends (100), never later; D, which would have
    # delayed B, starts when B ends (150).
    assert _starts("backfill", nodes, _hole()) == {"A": 0.0, "B": 100.0, "C": 2.0, "D": 150.0}
    # The no-backfill baseline: C and D wait behind B, both start when B ends.
    assert _starts("fifo", nodes, _hole()) == {"A": 0.0, "B": 100.0, "C": 150.0, "D": 150.0}


def test_backfill_assumes_the_true_duration_only_where_no_runtime_is_declared():
    nodes = _nodes(1, 8)
    # No expected_s: the 60 s truth says C ends at 62, before B's start at 100. Had the
    # queue's default_duration_s (3600 s) been assumed, C would end "at 3602" and wait.
    assert QueueConfig().default_duration_s > 100.0
    assert _starts("backfill", nodes, _hole())["C"] == 2.0
    # A declared runtime is what the submitter says, even when the truth is shorter:
    # 500 s declared ends after 100, so C waits for B like D (and starts with it at 150).
    assert _starts("backfill", nodes, _hole(c_expected=500.0))["C"] == 150.0
    # A declared runtime shorter than the truth is believed too (EASY with user
    # estimates): 90 s declared fits the hole.
    assert _starts("backfill", nodes, _hole(c_expected=90.0))["C"] == 2.0


def test_only_the_backfill_baseline_is_told_the_true_duration():
    jobs = _hole()
    seen = {}
    for policy in ("backfill", "hetsched", "fifo"):
        sim = Simulator(make_policy(policy, jobs), _nodes(1, 8), jobs)
        sim.run()
        seen[policy] = sim.cell.tasks["C"].meta.expected_s
    assert seen == {"backfill": 60.0, "hetsched": None, "fifo": None}
    assert backfill_estimate(_hole(c_expected=7.0)[2]) == 7.0


def test_backfill_orders_by_priority_then_submission_and_fifo_ignores_priority():
    nodes = _nodes(1, 4)
    jobs = [make_job("A", 0.0, 100.0, 4, 1000),
            make_job("B", 1.0, 10.0, 4, 1000),
            make_job("C", 2.0, 10.0, 4, 1000, priority=100),
            make_job("D", 3.0, 10.0, 4, 1000)]
    # A holds the node until 100; then C (priority 100) first, then B before D (FCFS).
    assert _starts("backfill", nodes, jobs) == {"A": 0.0, "C": 100.0, "B": 110.0, "D": 120.0}
    assert _starts("fifo", nodes, jobs) == {"A": 0.0, "B": 100.0, "C": 110.0, "D": 120.0}


def test_backfill_gives_fractional_jobs_whole_gpus_and_never_preempts():
    nodes = _nodes(1, 2)
    jobs = [make_job("be", 0.0, 100.0, 2, 1000, qos="best_effort"),
            make_job("half", 1.0, 10.0, 1, 500, priority=900, qos="guaranteed"),
            make_job("half2", 2.0, 10.0, 1, 500)]
    # Under hetsched's queue the guaranteed job would preempt the best-effort one; here
    # it waits for it to end. Each 0.5-GPU job gets a whole GPU: both start at 100.
    assert _starts("backfill", nodes, jobs) == {"be": 0.0, "half": 100.0, "half2": 100.0}


@pytest.mark.parametrize(("seeds", "count", "gpus", "n_jobs", "gaps"), [
    (range(12), 3, 8, 60, (0, 5, 30, 60)),
    (range(100, 102), 40, 8, 500, (0, 0, 5, 10, 30)),
])
def test_backfill_never_starts_the_head_after_its_first_reservation(seeds, count, gpus, n_jobs,
                                                                   gaps):
    """EASY's promise: with true runtimes and one priority, a head starts no later than the
    first start it was promised, whatever is backfilled meanwhile (gangs included)."""
    checked = 0
    for seed in seeds:
        rng = random.Random(seed)
        t = 0.0
        jobs = []
        for k in range(n_jobs):
            t += rng.choice(gaps)
            jobs.append(make_job(f"j{k}", t, float(rng.randint(10, 2000)),
                                 rng.choice([1, 1, 2, 3, 4, gpus, 2 * gpus]), 1000))
        sim = Simulator(make_policy("backfill", jobs), _nodes(count, gpus), jobs)
        promised: dict[str, float] = {}
        reserve = sim.cell._reserve

        def recording(rec, reserve=reserve, promised=promised):
            res = reserve(rec)
            if res is not None:
                promised.setdefault(rec.task, res.start_s)
            return res

        sim.cell._reserve = recording  # type: ignore[method-assign]
        run = sim.run()
        late = {task: (start, run.jobs[task].first_start_s) for task, start in promised.items()
                if run.jobs[task].first_start_s > start + 1e-9}
        assert late == {}, f"seed {seed}: heads started after their reservation: {late}"
        checked += len(promised)
    assert checked > 50  # the runs did queue, reserve and backfill


def test_the_cli_takes_every_baseline_and_names_a_bad_policy(tmp_path, capsys):
    from streams.commands import simulate

    path = tmp_path / "jobs.csv"
    write_jobs(path, _hole())
    nodes = tmp_path / "nodes.csv"
    nodes.write_text("sn,cpu_milli,memory_mib,gpu,model\nnode0,64000,262144,8,A100\n")
    parser = argparse.ArgumentParser()
    simulate.add_arguments(parser)
    args = parser.parse_args(["--mode", "time", "--jobs", str(path), "--nodes", str(nodes),
                              "--policies", "fifo,backfill,static,hetsched",
                              "--out", str(tmp_path / "out")])
    assert simulate.run(args) == 0
    summary = (tmp_path / "out" / "summary.md").read_text()
    assert "| fifo | backfill | static | hetsched |" in summary
    assert "TRUE duration" in summary and "straw man" in summary
    with pytest.raises(SystemExit) as exc:
        parser.parse_args(["--mode", "time", "--policies", "fifo,easy", "--out", "x"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "unknown policy 'easy'" in err and "backfill" in err
    # The baselines are time-mode policies: packing mode says so, naming them.
    args = parser.parse_args(["--nodes", str(nodes), "--tasks", str(path),
                              "--policies", "backfill,fifo", "--out", str(tmp_path / "p")])
    assert simulate.run(args) == 2
    assert "backfill, fifo: time-mode policies" in capsys.readouterr().err
