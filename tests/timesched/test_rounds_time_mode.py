"""Gavel's round-based policies in ``simulate --mode time`` (streams/sim/time/gavel.py).

The JCT figures through ``hetsched simulate --mode time`` must be those of
``python -m streams.sim.time.rounds --all-jobs`` on the same files, bit for bit.
"""

from __future__ import annotations

import argparse
import json
import math

import pytest

from streams.commands import simulate
from streams.sim.time import gavel
from streams.sim.time.cli import make_policy
from streams.sim.time.engine import make_simulator
from streams.sim.time.jobs import make_job
from streams.sim.time.rounds.__main__ import main as rounds_main
from streams.sim.traces import NodeSpec

HEAD = ("job_id,arrival_s,duration_s,num_gpus,gpu_milli,gpu_models,tenant,priority,qos,"
        "task_class,in_window,restart_s")
# 8 jobs over a V100, two K80s and a P100: blank cells (c: V100 only; f: no P100), a
# 2-GPU job (e, on the K80s or nowhere else with 2 GPUs), a window of 4 jobs; a restart
# costs most of them 30 s (both commands charge it after a round off or a type change)
JOBS = HEAD + """,duration_s@V100M16,duration_s@K80,duration_s@P100
a,0,1000,1,1000,,t1,0,burstable,x,0,30,1000,4000,2000
b,100,700,1,1000,,t1,0,burstable,y,1,30,700,900,800
c,150,500,1,1000,,t2,0,burstable,x,1,0,500,,
d,400,3000,1,1000,,t2,0,burstable,y,1,30,3000,9000,5000
e,500,2000,2,1000,,t1,0,burstable,x,1,30,2000,2500,3000
f,2000,800,1,1000,,t2,0,burstable,y,0,0,800,2400,
g,2100,400,1,1000,,t1,0,burstable,x,0,30,400,1200,600
h,5000,100,1,1000,,t2,0,burstable,y,0,30,100,300,200
"""
PLAIN = HEAD + "\n" + "\n".join(",".join(line.split(",")[:12])
                                for line in JOBS.splitlines()[1:]) + "\n"
"""The same jobs without ``duration_s@MODEL`` columns: every model runs a job in its
``duration_s``."""
BARE = HEAD.removesuffix(",restart_s") + "\n" + "\n".join(
    ",".join(line.split(",")[:11]) for line in JOBS.splitlines()[1:]) + "\n"
"""The same jobs with none of issue 35's columns."""
NODES = """sn,cpu_milli,memory_mib,gpu,model
v0,8000,65536,1,V100M16
k0,8000,65536,2,K80
p0,8000,65536,1,P100
"""


def _files(tmp_path, jobs=JOBS):
    (tmp_path / "jobs.csv").write_text(jobs)
    (tmp_path / "nodes.csv").write_text(NODES)
    return tmp_path / "jobs.csv", tmp_path / "nodes.csv"


def _simulate(argv: list[str]) -> int:
    parser = argparse.ArgumentParser()
    simulate.add_arguments(parser)
    return simulate.run(parser.parse_args(argv))


def _module(tmp_path, jobs, nodes, policy):
    out = tmp_path / f"mod-{policy}"
    assert rounds_main(["--jobs", str(jobs), "--nodes", str(nodes), "--policy", policy,
                        "--all-jobs", "--out", str(out)]) == 0
    return json.loads((out / "summary.json").read_text())


@pytest.mark.parametrize("jobs_text", [JOBS, PLAIN], ids=["per-model", "duration_s-only"])
def test_time_mode_gives_the_module_commands_jct_figures(tmp_path, capsys, jobs_text):
    jobs, nodes = _files(tmp_path, jobs_text)
    out = tmp_path / "out"
    assert _simulate(["--mode", "time", "--jobs", str(jobs), "--nodes", str(nodes),
                      "--policies", "fifo,gavel-las,gavel-fifo,las", "--out", str(out)]) == 0
    got = json.loads((out / "summary.json").read_text())["summary"]
    for policy in gavel.NAMES:
        want = _module(tmp_path, jobs, nodes, policy)
        s = got[policy]
        assert s["window_jct_mean_s"] == want["window_jct_mean_s"]
        assert s["jct_mean_s"] == want["jct_mean_s"]
        assert s["window_jobs"] == want["window_jobs"] == 4
        assert s["finished"] == want["jobs_finished"] == 8
        assert s["rounds"] == want["rounds"] and s["allocations"] == want["allocations"]
        assert "sim_seconds" in s and "wait_mean_s" in s and "preemptions" in s
        for key in gavel.ABSENT:  # absent, not wrong
            assert key not in s
        assert "alloc_pct" in got["fifo"]
    md = (out / "summary.md").read_text()
    assert "| fifo | gavel-las | gavel-fifo | las |" in md
    assert "| GPU allocation % | " in md and " - |" in md
    assert "Gavel's round-based policies" in md


def test_each_job_records_its_start_end_wait_and_preemptions():
    # las on one V100: a and b (720 s each, at 0) share it round by round. Round 1 (0-360):
    # both at priority 1, a first (arrival order); round 2: b (a got 3/4 of the type's
    # time, b 1/4); round 3: a again (tie), a finishes at 1080; b runs 1080-1440.
    # (restart_s 0: what a restart costs is test_rounds_mechanism's)
    jobs = [make_job(n, 0, 720, 1, 1000, tenant="t", in_window=True, restart_cost_s=0.0)
            for n in ("a", "b")]
    nodes = [NodeSpec("v0", 8000, 65536, 1, "V100M16")]
    rec = make_simulator(make_policy("las", jobs), nodes, jobs).run()
    a, b = rec.jobs["a"], rec.jobs["b"]
    assert (a.first_start_s, a.end_s, a.wait_s, a.preemptions) == (0.0, 1080.0, 360.0, 1)
    assert (b.first_start_s, b.end_s, b.wait_s, b.preemptions) == (360.0, 1440.0, 720.0, 1)
    s = rec.summary()
    assert s["window_jct_mean_s"] == (1080.0 + 1440.0) / 2 == s["jct_mean_s"]
    assert s["preemptions"] == 2 and s["type_moves"] == 0
    assert s["wait_mean_s"] == 540.0


def test_a_job_that_can_run_nowhere_is_unschedulable_not_unfinished():
    jobs = [make_job("a", 0, 100, 1, 1000), make_job("k", 0, 100, 1, 1000, gpu_models=("K80",))]
    nodes = [NodeSpec("v0", 8000, 65536, 1, "V100M16")]
    rec = make_simulator(make_policy("gavel-fifo", jobs), nodes, jobs).run()
    assert rec.jobs["k"].status == "unschedulable" and rec.jobs["a"].end_s == 100.0
    assert rec.summary()["unfinished"] == 0


@pytest.mark.parametrize(("job", "why"), [
    (make_job("q", 0, 100, 1, 500), "fraction of a GPU"),
    (make_job("q", 0, 100, 0, 0), "no GPU"),
    (make_job("q", 0, 100, 1, 1000, depends_on=("a",)), "depends_on"),
])
def test_what_the_rounds_cannot_model_is_refused_by_name(job, why):
    jobs = [make_job("a", 0, 100, 1, 1000), job]
    with pytest.raises(ValueError, match=rf"gavel-las: job q .*{why}"):
        make_policy("gavel-las", jobs)


def test_the_cli_refuses_a_fractional_job_and_the_fault_layer(tmp_path, capsys):
    frac = JOBS.replace("h,5000,100,1,1000,", "h,5000,100,1,300,")
    jobs, nodes = _files(tmp_path, frac)
    assert _simulate(["--mode", "time", "--jobs", str(jobs), "--nodes", str(nodes),
                      "--policies", "gavel-fifo", "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert "gavel-fifo: job h asks for a fraction of a GPU (gpu_milli 300)" in err
    jobs, nodes = _files(tmp_path, BARE)
    assert _simulate(["--mode", "time", "--jobs", str(jobs), "--nodes", str(nodes),
                      "--policies", "las", "--throttle", "0.1",
                      "--out", str(tmp_path / "o")]) == 2
    assert "--throttle need the cell; las run Gavel's round simulator" in \
        capsys.readouterr().err
    assert simulate.parse_policies("gavel-las,las") == ["gavel-las", "las"]


def test_tenant_work_share_is_unknown_not_zero():
    jobs = [make_job("a", 0, 100, 1, 1000, tenant="t")]
    nodes = [NodeSpec("v0", 8000, 65536, 1, "V100M16")]
    rec = make_simulator(make_policy("gavel-las", jobs), nodes, jobs).run()
    row = rec.per_tenant()["t"]
    assert math.isnan(row["work_share"]) and row["jct_mean_s"] == 100.0


def test_the_types_are_walked_in_the_node_files_order_not_by_node_name(tmp_path):
    _, nodes = _files(tmp_path)  # v0 V100M16, k0 K80, p0 P100: by name k0, p0, v0
    order = gavel.file_type_order(nodes)
    assert order == ("V100M16", "K80", "P100")
    specs = [NodeSpec("k0", 1, 1, 2, "K80"), NodeSpec("p0", 1, 1, 1, "P100"),
             NodeSpec("v0", 1, 1, 1, "V100M16")]
    names, counts = gavel.gpu_types(specs, order)
    assert names == list(order) and counts.tolist() == [1.0, 2.0, 1.0]
    assert gavel.gpu_types(specs)[0] == ["K80", "P100", "V100M16"]
