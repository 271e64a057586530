"""Issue 35, part 1: per-model speeds, elastic ranges, restart costs and the measured window
in the job CSV, and the time simulator running each job at its true speed.

Every expected figure is worked out by hand in the test's comment.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from streams.core.decisions import Placement
from streams.sim.time.cli import make_policy
from streams.sim.time.engine import make_simulator
from streams.sim.time.jobs import Job, job_restart_s, read_jobs, restart_note
from streams.sim.time.speeds import LEARNED, ORACLE, Speeds, told
from streams.sim.traces import NodeSpec, TraceFormatError, read_nodes, traces_dir

BASE = "job_id,arrival_s,duration_s,num_gpus,gpu_milli,gpu_models,tenant,priority,qos"
POLICIES = ("fifo", "backfill", "hetsched", "tiresias", "srtf-oracle")
K80, V100 = NodeSpec("a-k80", 8000, 65536, 1, "K80"), NodeSpec("b-v100", 8000, 65536, 1,
                                                               "V100M16")


def _csv(tmp_path: Path, header: str, *rows: str) -> Path:
    path = tmp_path / "jobs.csv"
    path.write_text("\n".join([header, *rows]) + "\n")
    return path


def _run(policy: str, nodes: list[NodeSpec], jobs: list[Job], speeds: str = "blind"):
    """Run one policy; the recorder and every placement as (task, node, time)."""
    sim = make_simulator(make_policy(policy, jobs, speeds=speeds), nodes, jobs)
    placed: list[tuple[str, str, float]] = []
    sim.observers.append(lambda s, t, o: placed.append((o.task, o.node, t))
                         if isinstance(o, Placement) else None)
    return sim.run(), placed


def _jct(rec, task: str) -> float:
    st = rec.jobs[task]
    assert st.status == "finished", (task, st.status)
    return st.end_s - st.job.arrival_s


# ---- the columns ----------------------------------------------------------------------


def test_every_column_is_read_into_the_job(tmp_path):
    path = _csv(tmp_path, BASE + ",duration_s@V100M16,duration_s@K80,duration1_s@V100M16,"
                "min_gpus,max_gpus,restart_s,in_window",
                "e,5,100,4,1000,,t,0,burstable,100,,250,1,8,12.5,1",
                "f,6,30,1,1000,,t,0,burstable,,30,,,,,0")
    e, f = read_jobs(path)
    assert e.speeds == Speeds({"V100M16": 100.0}, 4, None, {"V100M16": 250.0}, 1, 8)
    assert e.request.gpu_models == ("V100M16",)  # K80 blank: the job cannot run there
    assert (e.restart_s, e.in_window) == (12.5, True)
    assert f.speeds == Speeds({"K80": 30.0}, 1) and f.request.gpu_models == ("K80",)
    assert (f.restart_s, f.in_window) == (None, False)
    assert job_restart_s(f) == 40.0 and job_restart_s(e) == 12.5  # the default for f


def test_gpu_models_are_narrowed_to_the_models_with_a_run_time(tmp_path):
    path = _csv(tmp_path, BASE + ",duration_s@V100M16,duration_s@K80,duration_s@P100",
                "g,0,10,1,1000,P100|K80,t,0,burstable,10,40,20")
    (g,) = read_jobs(path)
    assert g.request.gpu_models == ("P100", "K80")  # V100M16 excluded by gpu_models
    assert dict(g.speeds.by_model) == {"K80": 40.0, "P100": 20.0}


def test_without_the_columns_a_job_is_as_before(tmp_path):
    (j,) = read_jobs(_csv(tmp_path, BASE, "h,0,10,1,1000,,t,0,burstable"))
    assert (j.speeds, j.restart_s, j.in_window, j.request.gpu_models) == (None, None, None, ())


@pytest.mark.parametrize(("header", "row", "says"), [
    (",duration_s@V100M16", ",abc", "field 'duration_s@V100M16': bad value 'abc'"),
    (",duration_s@V100M16", ",-5", "field 'duration_s@V100M16': -5 is negative"),
    (",duration_s@V100M16", ",0", "field 'duration_s@V100M16': 0 must be above 0"),
    (",duration_s@V100M16,duration1_s@V100M16", ",10,x",
     "field 'duration1_s@V100M16': bad value 'x'"),
    (",duration_s@V100M16,duration_s@K80,duration1_s@K80", ",10,,30",
     "field 'duration1_s@K80': a one-GPU run time where duration_s@K80 is blank"),
    (",duration_s@V100M16,duration_s@K80", ",,", "every duration_s@ cell is blank"),
    (",min_gpus", ",3", "field 'min_gpus': 3 not in 1..num_gpus (2)"),
    (",min_gpus", ",1.5", "field 'min_gpus': 1.5 is not a whole number"),
    (",max_gpus", ",1", "field 'max_gpus': 1 below num_gpus (2)"),
    (",restart_s", ",-1", "field 'restart_s': -1 is negative"),
    (",restart_s", ",soon", "field 'restart_s': bad value 'soon'"),
    (",in_window", ",2", "field 'in_window': '2' is not 0 or 1"),
    (",in_window", ",yes", "field 'in_window': 'yes' is not 0 or 1"),
])
def test_a_bad_value_names_the_column_the_row_and_the_value(tmp_path, header, row, says):
    path = _csv(tmp_path, BASE + header, "bad,0,10,2,1000,,t,0,burstable" + row)
    with pytest.raises(TraceFormatError) as exc:
        read_jobs(path)
    assert f"{path}:2: {says}" in str(exc.value), str(exc.value)


def test_a_column_for_a_model_the_catalog_lacks_names_the_known_ones(tmp_path):
    # V100S (a real board) is neither a catalog name nor an alias.
    path = _csv(tmp_path, BASE + ",duration_s@V100S", "a,0,10,1,1000,,t,0,burstable,10")
    with pytest.raises(TraceFormatError, match=r"column 'duration_s@V100S': unknown GPU model "
                       r"'V100S' \(known: .*K80.*V100M16.*; aliases: V100 = V100M32\)"):
        read_jobs(path)


def test_a_catalog_alias_in_the_job_file_is_read_as_the_catalog_name(tmp_path):
    # V100 is V100M32's alias, as in node lists: its column and its gpu_models cell say
    # V100M32, so the job matches the nodes a 'V100' node list gives.
    path = _csv(tmp_path, BASE + ",duration_s@V100,duration_s@K80",
                "a,0,10,1,1000,V100|K80,t,0,burstable,10,40")
    (a,) = read_jobs(path)
    assert dict(a.speeds.by_model) == {"V100M32": 10.0, "K80": 40.0}
    assert a.request.gpu_models == ("V100M32", "K80")
    both = _csv(tmp_path, BASE + ",duration_s@V100,duration_s@V100M32",
                "a,0,10,1,1000,,t,0,burstable,10,12")
    with pytest.raises(TraceFormatError, match=r"column 'duration_s@V100M32': "
                       r"'duration_s@V100' already gives V100M32"):
        read_jobs(both)


def test_an_elastic_range_needs_whole_gpus_and_a_cpu_job_has_no_speeds(tmp_path):
    frac = _csv(tmp_path, BASE + ",max_gpus", "a,0,10,1,500,,t,0,burstable,2")
    with pytest.raises(TraceFormatError, match="an elastic range needs whole GPUs"):
        read_jobs(frac)
    cpu = _csv(tmp_path, BASE + ",duration_s@K80", "a,0,10,0,1000,,t,0,burstable,5")
    with pytest.raises(TraceFormatError, match="'duration_s@K80': a speed for a job with no GPU"):
        read_jobs(cpu)


# ---- the rate --------------------------------------------------------------------------


def test_the_rate_interpolates_between_one_gpu_and_num_gpus_and_stops_there():
    # 4 GPUs: 100 s (rate 1/100); 1 GPU: 250 s (rate 1/250). On 2 GPUs, a third of the way:
    # 1/250 + (1/100 - 1/250) / 3 = 0.004 + 0.002 = 0.006.
    s = Speeds({"V100M16": 100.0}, 4, None, {"V100M16": 250.0}, 1, 8)
    assert s.rate("V100M16", 1) == pytest.approx(1 / 250, abs=1e-15)
    assert s.rate("V100M16", 2) == pytest.approx(0.006, abs=1e-15)
    assert s.rate("V100M16", 4) == s.rate("V100M16", 8) == s.rate("V100M16") == 1 / 100
    # No one-GPU figure: linear scaling, 1 GPU does a quarter of 4 GPUs' rate.
    lin = Speeds({"K80": 400.0}, 4)
    assert lin.rate("K80", 1) == pytest.approx(1 / 1600, abs=1e-15)
    assert lin.rate("K80", 3) == pytest.approx(3 / 1600, abs=1e-15)
    with pytest.raises(KeyError, match="cannot run on 'P100'"):
        s.rate("P100")


def test_oracle_tells_speeds_against_the_fastest_model_and_blind_tells_nothing():
    s = Speeds({"V100M16": 100.0, "K80": 300.0}, 1)
    assert told(s, ORACLE) == (("K80", 0.33), ("V100M16", 1.0))
    assert told(s, "blind") == () and told(None, ORACLE) == ()


# ---- the simulator -------------------------------------------------------------------


TWO_MODELS = (BASE + ",duration_s@V100M16,duration_s@K80,restart_s,in_window",)


@pytest.mark.parametrize("policy", POLICIES)
def test_a_job_runs_at_the_true_speed_of_the_model_it_gets(tmp_path, policy):
    # duration_s says 70 s; alone on a V100 it takes 100 s, on a K80 250 s.
    jobs = read_jobs(_csv(tmp_path, *TWO_MODELS, "a,0,70,1,1000,,t,0,burstable,100,250,0,1"))
    assert _jct(_run(policy, [V100], jobs)[0], "a") == pytest.approx(100.0)
    assert _jct(_run(policy, [K80], jobs)[0], "a") == pytest.approx(250.0)


# JCTs of 'v' and 'k' below, and the end of 'long', by policy (worked out in the test):
BLANK_CELL = {
    "backfill": (510.0, 30.0, 500.0), "hetsched": (510.0, 30.0, 500.0),
    "tiresias": (510.0, 30.0, 500.0),
    # strict FCFS (docs/simulation.md, "Baselines"): the queue stops at 'v', so 'k'
    # waits behind it although the K80 is idle, and both start at 500: k's JCT 530 - 20.
    "fifo": (510.0, 510.0, 500.0),
    # preemptive SRTF on true times: 'v' (20 s on the V100) preempts 'long' (490 s left)
    # at 10 and runs 10-30; 'long' (restart_s 0) runs again from 30 and ends at 520.
    "srtf-oracle": (20.0, 30.0, 520.0),
}


@pytest.mark.parametrize("policy", POLICIES)
def test_a_blank_cell_is_never_used(tmp_path, policy):
    # 'long' holds the V100 for 500 s; 'v' cannot run on the idle K80 (blank) and waits for
    # the V100 (JCT 500 - 10 + 20 = 510); 'k' may use the K80 only (JCT 30 where nothing
    # holds it back).
    jobs = read_jobs(_csv(tmp_path, *TWO_MODELS,
                          "long,0,500,1,1000,,t,0,burstable,500,,0,0",
                          "v,10,20,1,1000,,t,0,burstable,20,,0,1",
                          "k,20,30,1,1000,,t,0,burstable,,30,0,1"))
    rec, placed = _run(policy, [K80, V100], jobs)
    assert {(task, node) for task, node, _ in placed} == {
        ("long", "b-v100"), ("v", "b-v100"), ("k", "a-k80")}
    v, k, long_end = BLANK_CELL[policy]
    assert _jct(rec, "v") == pytest.approx(v) and _jct(rec, "k") == pytest.approx(k)
    assert rec.jobs["long"].end_s == pytest.approx(long_end)
    assert rec.jobs["long"].preemptions == (policy == "srtf-oracle")


def test_the_window_mean_is_over_the_window_jobs_only(tmp_path):
    # One V100, FIFO: a 0-100 (out of the window), b 100-150 (JCT 140), c 150-350 (JCT 330).
    # Window mean: (140 + 330) / 2 = 235.
    jobs = read_jobs(_csv(tmp_path, *TWO_MODELS,
                          "a,0,1,1,1000,,t,0,burstable,100,,0,0",
                          "b,10,1,1,1000,,t,0,burstable,50,,0,1",
                          "c,20,1,1,1000,,t,0,burstable,200,,0,1"))
    summary = _run("fifo", [V100], jobs)[0].summary()
    assert (summary["window_jobs"], summary["window_jct_mean_s"]) == (2.0, 235.0)
    assert summary["window_unfinished"] == 0.0
    assert summary["jct_mean_s"] == pytest.approx((100 + 140 + 330) / 3)


def test_no_window_column_no_window_figures(tmp_path):
    jobs = read_jobs(_csv(tmp_path, BASE, "a,0,10,1,1000,,t,0,burstable"))
    assert not any(k.startswith("window") for k in _run("fifo", [V100], jobs)[0].summary())


PREEMPT = BASE + ",duration_s@V100M16,restart_s"


@pytest.mark.parametrize(("restart", "end"), [("30", 1260.0), ("0", 1200.0), ("", 1280.0)])
def test_restart_s_is_charged_for_every_preemption(tmp_path, restart, end):
    # Best-effort 'be' needs 1000 s on the V100. 'ls1' (priority 600, 100 s) preempts it
    # at 200 (200 s done); 'be' restarts at 300, pays its restart r, works from 300 + r;
    # 'ls2' preempts it at 350 (50 - r s more done); 'be' restarts at 450 and pays r again:
    # end = 450 + r + (1000 - 200 - (50 - r)) = 1200 + 2r: r = 30 -> 1260, r = 0 -> 1200,
    # no restart_s -> the default, 40 s -> 1280.
    jobs = read_jobs(_csv(tmp_path, PREEMPT,
                          f"be,0,1,1,1000,,t,0,best_effort,1000,{restart}",
                          "ls1,200,1,1,1000,,t,600,guaranteed,100,0",
                          "ls2,350,1,1,1000,,t,600,guaranteed,100,0"))
    rec, _ = _run("hetsched", [V100], jobs)
    assert rec.jobs["be"].preemptions == 2
    assert rec.jobs["be"].end_s == end


def test_restart_s_reaches_the_research_baselines(tmp_path):
    # srtf-oracle: 'long' (1000 s) runs from 0; 'short' (100 s) preempts it at 100; 'long'
    # restarts at 200, pays restart_s 25, ends at 200 + 25 + 900 = 1125.
    jobs = read_jobs(_csv(tmp_path, PREEMPT, "long,0,1,1,1000,,t,0,burstable,1000,25",
                          "short,100,1,1,1000,,t,0,burstable,100,25"))
    rec, _ = _run("srtf-oracle", [V100], jobs)
    assert rec.jobs["long"].end_s == 1125.0


def test_srtf_oracle_compares_true_times_on_the_victims_model(tmp_path):
    # 'v' holds the V100 until 60, 'k' the K80 until 510 (blank cells keep each on its
    # model). 's' arrives at 10: 100 s on a V100, 1000 s on a K80. On its fastest model it
    # would end before 'k' (110 < 510), but on k's K80 it would take until 1010, so SRTF
    # on true times preempts nothing: 's' waits for the V100 (60-160, JCT 150).
    jobs = read_jobs(_csv(tmp_path, *TWO_MODELS,
                          "v,0,1,1,1000,,t,0,burstable,60,,0,1",
                          "k,0,1,1,1000,,t,0,burstable,,510,0,1",
                          "s,10,1,1,1000,,t,0,burstable,100,1000,0,1"))
    rec, placed = _run("srtf-oracle", [K80, V100], jobs)
    assert sum(st.preemptions for st in rec.jobs.values()) == 0
    assert ("s", "b-v100", 60.0) in placed and _jct(rec, "s") == 150.0
    assert rec.jobs["k"].end_s == 510.0


def test_the_report_states_the_restart_cost_it_used(tmp_path):
    with_col = read_jobs(_csv(tmp_path, PREEMPT, "a,0,1,1,1000,,t,0,burstable,10,5"))
    assert "each job's restart_s" in restart_note(with_col)
    without = read_jobs(_csv(tmp_path, BASE, "a,0,1,1,1000,,t,0,burstable"))
    assert "the simulator's default, 40 s" in restart_note(without)


def test_oracle_sends_a_job_to_its_faster_model_and_blind_does_not_look(tmp_path):
    # Both GPUs idle; the job takes 100 s on the V100 and 300 s on the K80. Blind, the cell
    # sees two equal GPUs and takes the first node (the K80: 300 s); told the truth, it
    # takes the V100 (100 s).
    jobs = read_jobs(_csv(tmp_path, *TWO_MODELS, "a,0,100,1,1000,,t,0,burstable,100,300,0,1"))
    for policy in ("hetsched", "bestfit"):
        blind, placed_blind = _run(policy, [K80, V100], jobs, "blind")
        oracle, placed_oracle = _run(policy, [K80, V100], jobs, ORACLE)
        assert placed_blind == [("a", "a-k80", 0.0)] and _jct(blind, "a") == pytest.approx(300.0)
        assert placed_oracle == [("a", "b-v100", 0.0)] and _jct(oracle, "a") == pytest.approx(100.0)


def test_learned_finds_the_faster_model_after_one_run_of_the_class(tmp_path):
    # Three jobs of one class, one after the other (each arrives after the last ended,
    # blind or learned),
    # 100 s on the V100 and 300 s on the K80. Learned, the cell knows nothing of the
    # class at first: 'a' goes where packing puts it (the K80, as blind), its run reports
    # its K80 rate, and the class's later jobs go to the V100 (filled from the catalog,
    # which ranks the V100 above the K80); blind keeps taking the K80.
    jobs = read_jobs(_csv(tmp_path, TWO_MODELS[0] + ",task_class",
                          "a,0,100,1,1000,,t,0,burstable,100,300,0,1,resnet",
                          "b,400,100,1,1000,,t,0,burstable,100,300,0,1,resnet",
                          "c,800,100,1,1000,,t,0,burstable,100,300,0,1,resnet"))
    learned, placed = _run("hetsched", [K80, V100], jobs, LEARNED)
    assert placed == [("a", "a-k80", 0.0), ("b", "b-v100", 400.0), ("c", "b-v100", 800.0)]
    assert [_jct(learned, j) for j in "abc"] == pytest.approx([300.0, 100.0, 100.0])
    _, placed_blind = _run("hetsched", [K80, V100], jobs, "blind")
    assert [node for _, node, _ in placed_blind] == ["a-k80"] * 3


def test_learned_is_told_nothing_by_the_simulator():
    s = Speeds({"V100M16": 100.0, "K80": 400.0}, 1)
    assert told(s, LEARNED) == ()


def test_blind_decides_as_if_the_speed_columns_were_not_there(tmp_path):
    # The same jobs with and without their duration_s@ columns (gpu_models spelt out, as
    # the columns narrow them): blind, every placement is the same; oracle moves some.
    rows = [(f"j{i}", i * 7, 50 + 13 * i, 100 + (37 * i) % 90, 60 + (53 * i) % 200)
            for i in range(40)]
    speeds = _csv(tmp_path, *TWO_MODELS, *(f"{j},{t},{d},1,1000,,t,0,burstable,{v},{k},0,1"
                                           for j, t, d, v, k in rows))
    plain = tmp_path / "plain.csv"
    plain.write_text("\n".join([BASE] + [f"{j},{t},{d},1,1000,K80|V100M16,t,0,burstable"
                                         for j, t, d, _, _ in rows]) + "\n")
    nodes = [K80, V100, NodeSpec("c-k80", 8000, 65536, 1, "K80")]
    with_cols, without = read_jobs(speeds), read_jobs(plain)
    for policy in ("hetsched", "fifo", "backfill", "tiresias"):
        a = [(task, node) for task, node, _ in _run(policy, nodes, with_cols)[1]]
        b = [(task, node) for task, node, _ in _run(policy, nodes, without)[1]]
        assert a[:3] == b[:3], policy  # same first choices, blind
    # Further decisions depend on when jobs end, which the true speeds change; the first
    # placements (before any end) are the test of blindness. Oracle changes them:
    oracle = [(task, node) for task, node, _ in _run("hetsched", nodes, with_cols, ORACLE)[1]]
    blind = [(task, node) for task, node, _ in _run("hetsched", nodes, with_cols)[1]]
    assert oracle != blind


# ---- the cluster and the command line --------------------------------------------------


def test_a_node_list_with_a_model_the_catalog_lacks_is_refused(tmp_path):
    path = tmp_path / "nodes.csv"
    path.write_text("sn,cpu_milli,memory_mib,gpu,model\nn0,8000,65536,1,K80\n"
                    "n1,8000,65536,1,V100S\nn2,8000,65536,0,\n")
    with pytest.raises(TraceFormatError) as exc:
        read_nodes(path)
    msg = str(exc.value)
    assert f"{path}:3: field 'model': unknown GPU model 'V100S' (known: " in msg
    assert all(m in msg for m in ("K80", "RTX2080Ti", "RTX6000", "V100M16", "A100"))
    assert msg.endswith("; aliases: V100 = V100M32)"), msg


def test_a_node_list_alias_is_read_as_the_catalog_name(tmp_path):
    path = tmp_path / "nodes.csv"
    path.write_text("sn,cpu_milli,memory_mib,gpu,model\nn0,8000,65536,8,V100\n"
                    "n1,8000,65536,8,V100M16\nn2,8000,65536,0,\n")
    assert [n.gpu_model for n in read_nodes(path)] == ["V100M32", "V100M16", ""]


VENUS = traces_dir() / "training" / "nodes-venus2vc.csv"


@pytest.mark.skipif(not VENUS.exists(), reason=f"{VENUS} not found ($HETSCHED_TRACES)")
def test_the_helios_node_list_reads_as_v100m32():
    # The shared Helios node list names its 8 x Tesla V100-SXM2 32 GB boards 'V100'
    # (training/README.md): the README's Helios command, bench/time_targets.py and
    # bench/gangs.py read it, so it must read, as V100M32.
    nodes = read_nodes(VENUS)
    assert (len(nodes), sum(n.gpu_count for n in nodes)) == (22, 176)
    assert {n.gpu_model for n in nodes} == {"V100M32"}


def _cli(tmp_path: Path, jobs: Path, nodes: str, *extra: str) -> int:
    from streams.commands import simulate

    node_path = tmp_path / "nodes.csv"
    node_path.write_text("sn,cpu_milli,memory_mib,gpu,model\n" + nodes)
    parser = argparse.ArgumentParser()
    simulate.add_arguments(parser)
    args = parser.parse_args(["--mode", "time", "--jobs", str(jobs), "--nodes", str(node_path),
                              "--out", str(tmp_path / "out"), *extra])
    return simulate.run(args)


def test_the_command_line_reports_window_speeds_and_restart(tmp_path, capsys):
    jobs = _csv(tmp_path, *TWO_MODELS, "a,0,100,1,1000,,t,0,burstable,100,300,0,1",
                "b,0,100,1,1000,,t,0,burstable,100,300,0,0")
    nodes = "k,8000,65536,1,K80\nv,8000,65536,1,V100M16\n"
    assert _cli(tmp_path, jobs, nodes, "--policies", "fifo,hetsched", "--speeds",
                "oracle") == 0
    out = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert out["speeds"] == "oracle" and "each job's restart_s" in out["restart"]
    # hetsched, told: a on the V100 (100 s), b on the K80 (300 s); only a is in the window.
    assert out["summary"]["hetsched"]["window_jct_mean_s"] == 100.0
    assert out["summary"]["hetsched"]["window_jobs"] == 1.0
    assert "told: oracle (the baselines: blind)" in (tmp_path / "out" / "summary.md").read_text()


def test_the_command_line_refuses_what_cannot_hold_together(tmp_path, capsys):
    jobs = _csv(tmp_path, *TWO_MODELS, "a,0,100,1,1000,,t,0,burstable,100,300,0,1")
    nodes = "k,8000,65536,1,K80\n"
    assert _cli(tmp_path, jobs, nodes, "--model-speed") == 2
    assert "drop --model-speed" in capsys.readouterr().err
    plain = tmp_path / "plain.csv"
    plain.write_text(BASE + "\na,0,10,1,1000,,t,0,burstable\n")
    assert _cli(tmp_path, plain, nodes, "--speeds", "oracle") == 2
    assert "the workload gives none" in capsys.readouterr().err
    assert _cli(tmp_path, jobs, "x,8000,65536,1,K81\n") == 2
    assert "unknown GPU model 'K81' (known: " in capsys.readouterr().err
    # The adaptation and fault layer times runs itself: it would ignore the columns.
    for flags in (["--adapt"], ["--fail-fraction", "0.1"], ["--throttle", "0.1"]):
        assert _cli(tmp_path, jobs, nodes, *flags) == 2, flags
        err = capsys.readouterr().err
        assert f"{flags[0]} run jobs at their duration_s" in err and "drop the option" in err
    restart_only = tmp_path / "restart.csv"
    restart_only.write_text(BASE + ",restart_s\na,0,10,1,1000,,t,0,burstable,5\n")
    assert _cli(tmp_path, restart_only, nodes, "--adapt") == 2
    assert _cli(tmp_path, plain, nodes, "--adapt", "--policies", "hetsched") == 0


def test_oracle_moves_a_job_to_the_faster_model_that_frees_up(tmp_path):
    # 'b' (100 s on the V100, 300 on the K80) arrives first and takes the V100; 'a' (1,000
    # s on the V100, 4,000 on the K80) arrives at 1 s and gets the K80. 'b' ends at 100 s
    # and nothing waits: a move would save 0.75 of what 'a' has left, taken to be as long
    # as it ran, and pays at 120 s saved (two restarts), after 160 s of running, so the
    # first tick past 161 s (180 s) moves it. By then 'a' did 179 / 4,000 of its work;
    # the rest takes 955.25 s on the V100 (restart_s 0): it ends at 1,135.25 s, not at
    # 4,001. Blind, the cell knows no speeds: 'b' takes the first node (the K80), 'a'
    # the V100, and nothing moves.
    jobs = read_jobs(_csv(tmp_path, *TWO_MODELS, "b,0,100,1,1000,,t,0,burstable,100,300,0,1",
                          "a,1,1000,1,1000,,t,0,burstable,1000,4000,0,1"))
    oracle, placed = _run("hetsched", [K80, V100], jobs, ORACLE)
    assert placed == [("b", "b-v100", 0.0), ("a", "a-k80", 1.0), ("a", "b-v100", 180.0)]
    assert _jct(oracle, "a") == pytest.approx(1134.25)
    assert oracle.jobs["a"].preemptions == 1
    blind, placed_blind = _run("hetsched", [K80, V100], jobs, "blind")
    assert placed_blind == [("b", "a-k80", 0.0), ("a", "b-v100", 1.0)]
    assert blind.jobs["a"].preemptions == 0


# ---- elastic sizing (hetsched's queue only) -------------------------------------------

ELASTIC = (BASE + ",duration_s@V100M16,duration1_s@V100M16,min_gpus,max_gpus,restart_s",)
FOUR = NodeSpec("v", 32000, 131072, 4, "V100M16")


def test_hetsched_starts_an_elastic_job_small_and_grows_it_the_baselines_do_not(tmp_path):
    # 'fixed' holds 3 of the 4 GPUs from 0 to 1,000 s. 'e' (1,000 s on 4 GPUs, 2,000 s on
    # one; range 1-4, restart_s 0) arrives at 1 s. hetsched starts it on the GPU left, at
    # 1/2,000 of its work a second. Once 'fixed' ended, nothing waits, and growing to 4
    # (taken to scale linearly: nothing was learned) saves 0.75 of what is left (taken to
    # be as long as it ran), far past two restarts: the first tick after 1,000 s (1,020)
    # grows it. It did 1,019 / 2,000 of its work by then; the rest takes 490.5 s on 4
    # GPUs: it ends at 1,510.5 s. The baselines run it on 4 GPUs once 'fixed' ends: 2,000.
    jobs = read_jobs(_csv(tmp_path, *ELASTIC, "fixed,0,1000,3,1000,,t,0,burstable,1000,,,,0",
                          "e,1,1000,4,1000,,t,0,burstable,1000,2000,1,4,0"))
    assert jobs[1].meta.elastic == (1, 4) and jobs[0].meta.elastic == ()
    rec, placed = _run("hetsched", [FOUR], jobs)
    assert [(task, t) for task, _, t in placed] == [("fixed", 0.0), ("e", 1.0), ("e", 1020.0)]
    assert rec.jobs["e"].end_s == pytest.approx(1510.5)
    assert rec.jobs["e"].preemptions == 1
    for policy in ("fifo", "backfill"):
        base, _ = _run(policy, [FOUR], jobs)
        assert base.jobs["e"].end_s == pytest.approx(2000.0), policy


def test_gavel_las_runs_an_elastic_job_at_its_num_gpus(tmp_path):
    # Gavel's policies give a job its scale factor or nothing: the range changes nothing.
    rows = ("fixed,0,1000,3,1000,,t,0,burstable,1000,,,,0",
            "e,1,1000,4,1000,,t,0,burstable,1000,2000,1,4,0")
    elastic = read_jobs(_csv(tmp_path, *ELASTIC, *rows))
    (tmp_path / "fixed").mkdir()
    fixed = read_jobs(_csv(tmp_path / "fixed", *ELASTIC,
                           *(r.replace(",2000,1,4,", ",,,,") for r in rows)))
    assert fixed[1].meta.elastic == ()
    got = [_run("gavel-las", [FOUR], jobs)[0].jobs["e"].end_s for jobs in (elastic, fixed)]
    assert got[0] == got[1]
