"""bench/hetero_hetsched.py's figures: the run time alone of each window job and Jain's
index of finish-time fairness (issue 35's targets)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("hetero_hetsched",
                                              ROOT / "bench" / "hetero_hetsched.py")
assert spec is not None and spec.loader is not None
bench = importlib.util.module_from_spec(spec)
spec.loader.exec_module(bench)


def test_alone_is_the_fastest_models_run_time_of_window_jobs_only(tmp_path: Path) -> None:
    jobs = tmp_path / "jobs.csv"
    jobs.write_text("job_id,in_window,duration_s,duration_s@V100M16,duration_s@K80\n"
                    "a,1,100,100,400\n"       # fastest on the V100
                    "b,1,50,,30\n"            # runs only on the K80 (blank cell)
                    "c,0,10,10,20\n")         # not measured
    assert bench.alone_s(jobs) == {"a": 100.0, "b": 30.0}


def test_jain_is_one_when_equal_and_one_over_n_when_one_job_takes_all() -> None:
    assert bench.jain([2.0, 2.0, 2.0]) == pytest.approx(1.0)
    assert bench.jain([1.0, 0.0, 0.0, 0.0]) == pytest.approx(0.25)
    assert bench.jain([1.0, 3.0]) == pytest.approx(16 / (2 * 10))


def test_restart_default_blanks_only_the_restart_column(tmp_path: Path) -> None:
    jobs = tmp_path / "jobs.csv"
    jobs.write_text("job_id,restart_s,duration_s@K80\na,0,400\nb,5,30\n")
    out = bench.without_restart_costs(jobs, tmp_path / "out.csv")
    assert out.read_text().splitlines() == ["job_id,restart_s,duration_s@K80", "a,,400",
                                            "b,,30"]
