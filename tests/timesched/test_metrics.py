"""The time simulator's metrics, against figures computed by hand.

Percentiles are numpy's ``method="linear"`` (its default): for n sorted values
the q-th percentile sits at rank (n - 1) q / 100, interpolated linearly between
the two closest ranks. Each expectation below is worked out in its comment.
"""

from __future__ import annotations

import argparse
import csv
import json

import pytest

from streams.core.profile import get_profile
from streams.core.queue import QueueConfig
from streams.profiles.compile import compile_profile
from streams.sim.time.engine import SimPolicy, Simulator
from streams.sim.time.jobs import Job, make_job, write_jobs
from streams.sim.time.metrics import JobStats, Recorder, bounded_slowdown, pct
from streams.sim.traces import NodeSpec

H = 7200.0
NODE = NodeSpec("rack00-node000", 64_000, 262_144, 8, "A100")
POLICY = SimPolicy("bestfit", compile_profile(get_profile("bestfit")), QueueConfig())


def _recorder(*rows: tuple[Job, dict]) -> Recorder:
    """A recorder of a real (empty) one-node run, fed hand-made job stats."""
    rec = Simulator(POLICY, [NODE], [], H).recorder
    for job, stats in rows:
        rec.jobs[job.job_id] = JobStats(job, **stats)
    return rec


def _job(job_id: str, tenant: str, arrival: float, duration: float) -> Job:
    return make_job(job_id, arrival, duration, 1, 1000, tenant=tenant)


def _hand_run() -> Recorder:
    """Six jobs, three tenants (each job 1 GPU = 1000 milli; work in milli x s):

    ====  ======  =======  ========  =====  =====  ===========  ===========  ======
    job   tenant  arrival  duration  wait   end    JCT          slowdown     preempt
    ====  ======  =======  ========  =====  =====  ===========  ===========  ======
    A     a       0        5         0      5      5            max(1, 5/10)=1  0
    B     a       100      100       300    500    400          400/100=4    0
    C     b       200      1000      4000   5200   5000         5000/1000=5  2
    D     b       300      20        0      320    20           20/20=1      1
    E     b       400      1020      3700   -      unfinished   -            0
    F     c       500      100       -      -      unschedulable             0
    ====  ======  =======  ========  =====  =====  ===========  ===========  ======
    """
    fin = "finished"
    return _recorder(
        (_job("A", "a", 0, 5), dict(first_start_s=0, end_s=5, wait_s=0, done_work=5_000,
                                    status=fin)),
        (_job("B", "a", 100, 100), dict(first_start_s=400, end_s=500, wait_s=300,
                                        done_work=100_000, status=fin)),
        (_job("C", "b", 200, 1000), dict(first_start_s=1000, end_s=5200, wait_s=4000,
                                         preemptions=2, done_work=1_000_000, status=fin)),
        (_job("D", "b", 300, 20), dict(first_start_s=300, end_s=320, wait_s=0, preemptions=1,
                                       done_work=20_000, status=fin)),
        (_job("E", "b", 400, 1020), dict(wait_s=3700, status="queued")),
        (_job("F", "c", 500, 100), dict(status="unschedulable")),
    )


def test_bounded_slowdown_is_feitelsons_with_a_10_s_threshold():
    assert bounded_slowdown(0, 5) == 1.0  # (0 + 5) / 10 = 0.5, raised to 1
    assert bounded_slowdown(15, 5) == 2.0  # (15 + 5) / max(5, 10)
    assert bounded_slowdown(300, 100) == 4.0  # (300 + 100) / 100
    assert bounded_slowdown(0, 1000) == 1.0


def test_percentiles_are_numpys_linear_and_zero_when_empty():
    assert pct([0, 0, 300, 3700, 4000], 95) == pytest.approx(3940.0)  # rank 3.8
    assert pct([], 99) == 0.0


def test_summary_figures_match_the_hand_computation():
    s = _hand_run().summary()
    assert (s["jobs"], s["finished"], s["unfinished"], s["unschedulable"]) == (6, 4, 1, 1)
    # wait over A..E (F unschedulable is out; E counts with its censored 3700 s):
    # sorted 0, 0, 300, 3700, 4000
    assert s["wait_mean_s"] == pytest.approx(8000 / 5)
    assert s["wait_p50_s"] == pytest.approx(300.0)  # rank 2
    assert s["wait_p95_s"] == pytest.approx(3700 + 0.8 * 300)  # rank 3.8
    assert s["wait_p99_s"] == pytest.approx(3700 + 0.96 * 300)  # rank 3.96
    assert s["wait_over_1h_pct"] == pytest.approx(40.0)  # C and E of five
    # JCT over the finished A..D: sorted 5, 20, 400, 5000
    assert s["jct_mean_s"] == pytest.approx(5425 / 4)
    assert s["jct_p50_s"] == pytest.approx(20 + 0.5 * 380)  # rank 1.5
    assert s["jct_p95_s"] == pytest.approx(400 + 0.85 * 4600)  # rank 2.85
    assert s["jct_p99_s"] == pytest.approx(400 + 0.97 * 4600)  # rank 2.97
    # slowdowns 1, 4, 5, 1: sorted 1, 1, 4, 5
    assert s["slowdown_mean"] == pytest.approx(11 / 4)
    assert s["slowdown_p99"] == pytest.approx(4 + 0.97 * 1)
    # tenant a: (1 + 4) / 2 = 2.5; b: (5 + 1) / 2 = 3 (E unfinished has no slowdown)
    assert s["worst_tenant_slowdown"] == pytest.approx(3.0)
    assert s["preemptions"] == 3
    assert s["preemptions_per_job"] == pytest.approx(3 / 6)  # over every arrived job


def test_jain_is_over_tenants_work_shares():
    rec = _hand_run()
    # a: done = asked = 105 000 -> 1; b: done 1 020 000 of 2 040 000 asked -> 0.5;
    # c: 0 of 100 000 (F never ran) -> 0
    assert rec.tenant_shares() == pytest.approx({"a": 1.0, "b": 0.5, "c": 0.0})
    # (1 + 0.5 + 0)^2 / (3 x (1 + 0.25 + 0)) = 2.25 / 3.75
    assert rec.jain() == pytest.approx(0.6)
    assert rec.summary()["jain"] == pytest.approx(0.6)


def test_per_tenant_rows():
    t = _hand_run().per_tenant()
    assert set(t) == {"a", "b"}  # c's only job is unschedulable
    assert t["a"] == pytest.approx({"jobs": 2, "unfinished": 0, "wait_mean_s": 150.0,
                                    "jct_mean_s": 202.5, "slowdown_mean": 2.5,
                                    "work_share": 1.0})
    assert t["b"] == pytest.approx({"jobs": 3, "unfinished": 1, "wait_mean_s": 7700 / 3,
                                    "jct_mean_s": 2510.0, "slowdown_mean": 3.0,
                                    "work_share": 0.5})


def test_a_job_still_queued_when_the_run_stops_has_its_wait_censored_there():
    one_gpu = NodeSpec("rack00-node000", 64_000, 262_144, 1, "A100")
    first, second = _job("j1", "t", 0, 1000), _job("j2", "t", 10, 1000)
    sim = Simulator(POLICY, [one_gpu], [first, second], H)  # driven by hand, not run()
    sim.handlers["arrive"](sim, 0.0, first)  # placed at once
    sim.handlers["arrive"](sim, 10.0, second)  # queued behind it
    sim.recorder.close(500.0)
    assert sim.recorder.jobs["j2"].wait_s == pytest.approx(490.0)
    s = sim.recorder.summary()
    assert (s["finished"], s["unfinished"]) == (0, 2)
    assert s["wait_mean_s"] == pytest.approx(245.0)  # (0 + 490) / 2
    assert s["jct_mean_s"] == 0.0  # no job finished: no JCT


def test_a_full_run_waits_behind_a_busy_gpu():
    one_gpu = NodeSpec("rack00-node000", 64_000, 262_144, 1, "A100")
    jobs = [_job("j1", "t", 0, 100), _job("j2", "t", 10, 100)]
    s = Simulator(POLICY, [one_gpu], jobs, 10.0).run().summary()
    # j2 waits from 10 to 100, then runs 100 s: JCT 190, slowdown 190 / 100
    assert s["wait_mean_s"] == pytest.approx(45.0)
    assert s["jct_mean_s"] == pytest.approx(145.0)  # (100 + 190) / 2
    assert s["slowdown_p99"] == pytest.approx(1 + 0.99 * 0.9)  # sorted 1, 1.9: rank 0.99


def _simulate(tmp_path, jobs, *flags: str):
    """``simulate --mode time`` on ``jobs`` written as a job CSV; its output folder."""
    from streams.commands import simulate

    path = tmp_path / "jobs.csv"
    write_jobs(path, jobs)
    out = tmp_path / "out"
    parser = argparse.ArgumentParser()
    simulate.add_arguments(parser)
    args = parser.parse_args(["--mode", "time", "--jobs", str(path), "--out", str(out),
                              *flags])
    assert simulate.run(args) == 0
    return out


def test_the_cli_writes_the_keys_the_job_rows_and_the_plots(tmp_path):
    jobs = [make_job("a", 0, 100, 1, 1000, tenant="t1", task_class="training",
                     expected_s=120),
            make_job("b", 30, 50, 1, 500, tenant="t2", task_class="inference")]
    out = _simulate(tmp_path, jobs, "--jobs-out", str(tmp_path / "out" / "rows" / "jobs.csv"))
    data = json.loads((out / "summary.json").read_text())
    keys = {"jct_mean_s", "jct_p99_s", "wait_mean_s", "wait_p99_s", "wait_over_1h_pct",
            "slowdown_p99", "jain", "preemptions_per_job", "sim_seconds", "wait_p95_s",
            "alloc_pct", "used_pct", "unfinished", "worst_tenant_slowdown"}
    assert len(data["summary"]) == 2
    for name, summary in data["summary"].items():
        assert keys <= set(summary), name
        assert summary["sim_seconds"] == data["simulate_s"][name] > 0
    with (out / "tenants.csv").open() as fh:
        tenants = list(csv.DictReader(fh))
    assert sorted((r["policy"], r["tenant"]) for r in tenants) == sorted(
        (name, t) for name in data["summary"] for t in ("t1", "t2"))
    for png in ("cdf.png", "tenants.png", "timeline.png"):
        assert (out / png).stat().st_size > 0, png
    with (out / "rows" / "jobs.csv").open() as fh:
        rows = list(csv.DictReader(fh))
    assert len(rows) == 2 * len(data["summary"])
    by = {(r["policy"], r["job_id"]): r for r in rows}
    name = next(iter(data["summary"]))
    a, b = by[(name, "a")], by[(name, "b")]
    # an empty mixed cluster: both start on arrival
    assert {k: a[k] for k in ("tenant", "class", "gpus", "arrival_s", "start_s", "end_s",
                              "wait_s", "jct_s", "slowdown", "preemptions", "status",
                              "duration_s", "expected_s")} == {
        "tenant": "t1", "class": "training", "gpus": "1", "arrival_s": "0", "start_s": "0",
        "end_s": "100", "wait_s": "0", "jct_s": "100", "slowdown": "1", "preemptions": "0",
        "status": "finished", "duration_s": "100", "expected_s": "120"}
    assert (b["gpus"], b["start_s"], b["jct_s"], b["expected_s"]) == ("0.5", "30", "50", "")


def test_the_job_rows_give_the_run_time_hetsched_predicted(tmp_path):
    # Four runs of tenant t's 'bert' one after another, 100 s each: the fourth is
    # predicted from the first three (p50 100 s); nothing is known before it.
    jobs = [make_job(f"r{i}", 200.0 * i, 100, 1, 1000, tenant="t", name="bert")
            for i in range(4)]
    out = _simulate(tmp_path, jobs, "--policies", "hetsched,hetsched-fcfs",
                    "--jobs-out", str(tmp_path / "out" / "jobs.csv"))
    with (out / "jobs.csv").open() as fh:
        rows = {(r["policy"], r["job_id"]): r["predicted_s"] for r in csv.DictReader(fh)}
    assert [rows["hetsched", f"r{i}"] for i in range(4)] == ["", "", "", "100"]
    assert {rows["hetsched-fcfs", f"r{i}"] for i in range(4)} == {""}
