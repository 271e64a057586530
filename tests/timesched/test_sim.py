"""The time simulator: the generic CSV, determinism for a seed, and the CLI end to end."""

from __future__ import annotations

import argparse

import pytest

from streams.sim.time.cli import make_policy
from streams.sim.time.engine import Simulator
from streams.sim.time.jobs import read_jobs, write_jobs
from streams.sim.time.mixed import mixed_cluster, mixed_jobs
from streams.sim.traces import TraceFormatError

HOURS = 1.0


def _small() -> tuple[list, list]:
    nodes = mixed_cluster()[::4]
    return nodes, mixed_jobs(7, HOURS * 3600, 0.2, nodes)


def test_the_generic_csv_round_trips_and_bad_rows_name_line_and_field(tmp_path):
    _, jobs = _small()
    path = tmp_path / "jobs.csv"
    write_jobs(path, jobs)
    again = read_jobs(path)
    assert [(j.job_id, j.request, j.meta) for j in again] == [
        (j.job_id, j.request, j.meta) for j in jobs]
    bad = tmp_path / "bad.csv"
    bad.write_text("arrival_s,duration_s,num_gpus,gpu_milli,gpu_models,tenant,priority,qos\n"
                   "0,10,2,500,,t,0,burstable\n")
    with pytest.raises(TraceFormatError, match=r"bad.csv:2: field 'gpu_milli'"):
        read_jobs(bad)


HEADER = "arrival_s,duration_s,num_gpus,gpu_milli,gpu_models,tenant,priority,qos\n"


@pytest.mark.parametrize(("row", "error"), [
    (",10,1,1000,,t,0,burstable", r":3: field 'arrival_s': missing"),
    ("0,ten,1,1000,,t,0,burstable", r":3: field 'duration_s': bad value 'ten'"),
    ("0,10,inf,1000,,t,0,burstable", r":3: field 'num_gpus': inf is not a finite number"),
    ("0,nan,1,1000,,t,0,burstable", r":3: field 'duration_s': nan is not a finite number"),
    ("0,10,1,1000,,t,-1,burstable", r":3: field 'priority': -1 is negative"),
    ("0,10,1.5,1000,,t,0,burstable", r":3: field 'num_gpus': 1.5 is not a whole number"),
])
def test_a_bad_number_is_refused_naming_line_field_and_value(tmp_path, row, error):
    path = tmp_path / "jobs.csv"
    path.write_text(HEADER + "0,10,1,1000,,t,0,burstable\n" + row + "\n")
    with pytest.raises(TraceFormatError, match=error):
        read_jobs(path)


def test_empty_optional_numbers_take_their_defaults(tmp_path):
    path = tmp_path / "jobs.csv"
    path.write_text(HEADER.strip() + ",cpu_milli,util,expected_s\n"
                    "5,10,1.0,,,t,,burstable,,,\n")  # 1.0 GPUs: a whole number
    (job,) = read_jobs(path)
    assert (job.request.num_gpu, job.request.gpu_milli, job.meta.priority,
            job.request.cpu_milli) == (1, 1000, 0, 1000)
    assert (job.util, job.meta.expected_s, job.arrival_s) == (1.0, None, 5.0)


@pytest.mark.parametrize("policy", ["static", "hetsched"])
def test_a_run_is_deterministic_and_loses_no_job(policy):
    nodes, jobs = _small()
    a = Simulator(make_policy(policy, jobs), nodes, jobs, HOURS * 3600).run()
    b = Simulator(make_policy(policy, jobs), nodes, jobs, HOURS * 3600).run()
    assert a.summary() == b.summary()
    assert {s.status for s in a.jobs.values()} <= {"finished", "unschedulable"}
    assert len(a.jobs) == len(jobs)


def test_the_cli_writes_the_comparison(tmp_path):
    from streams.commands import simulate

    _, jobs = _small()
    csv_path = tmp_path / "jobs.csv"
    write_jobs(csv_path, jobs)
    parser = argparse.ArgumentParser()
    simulate.add_arguments(parser)
    args = parser.parse_args(["--mode", "time", "--jobs", str(csv_path), "--out",
                              str(tmp_path / "out")])
    assert simulate.run(args) == 0
    table = (tmp_path / "out" / "summary.md").read_text()
    assert "| static | hetsched |" in table
    assert (tmp_path / "out" / "timeline.png").stat().st_size > 0
