"""Workloads of time mode (issue 31, part 4): the seeded training generator and ``--load``.

The generator's targets are its module's stated facts (class shares, log-normal
quantiles, powers-of-two gangs, Zipf tenants, recurring names), checked on
samples large enough for a tolerance of several standard errors. ``--load``
multiplies the arrival rate of every workload: the recorded ones keep durations
and order and see their arrival times divided exactly.
"""

from __future__ import annotations

import argparse
import json
import math
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from streams.commands import simulate
from streams.sim.time import training
from streams.sim.time.cli import load
from streams.sim.time.jobs import read_jobs, scale_arrivals, write_jobs
from streams.sim.time.mixed import mixed_jobs

BIG_HOURS = 5000.0  # about 21,800 jobs at load 1: standard errors of a few tenths of a %


@pytest.fixture(scope="module")
def big() -> list:
    return training.training_jobs(3, BIG_HOURS * 3600.0)


def _args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    simulate.add_arguments(parser)
    return parser.parse_args(["--mode", "time", "--out", "unused", *argv])


def _key(jobs: list) -> list:
    return [(j.job_id, j.arrival_s, j.duration_s, j.request, j.meta, j.util) for j in jobs]


def test_the_same_seed_gives_the_same_jobs_and_another_seed_others() -> None:
    a = training.training_jobs(11, 48 * 3600.0)
    assert _key(a) == _key(training.training_jobs(11, 48 * 3600.0))
    assert _key(a) != _key(training.training_jobs(12, 48 * 3600.0))
    assert [j.arrival_s for j in a] == sorted(j.arrival_s for j in a)


def test_class_shares_are_the_readme_shares(big: list) -> None:
    assert len(big) > 20_000
    counts = Counter(j.task_class for j in big)
    target = training.class_shares()
    assert target == pytest.approx({"g1": 75 / 1867, "g2-8": 917 / 1867, "g>8": 875 / 1867})
    for cls, share in target.items():  # standard error <= 0.0034: 4 x is 0.014
        assert counts[cls] / len(big) == pytest.approx(share, abs=0.014), cls
    assert all(j.task_class == training.size_class(j.request.num_gpu) for j in big)


def test_gangs_are_present_and_sized_as_powers_of_two_over_whole_nodes(big: list) -> None:
    sizes = Counter(j.request.num_gpu for j in big)
    assert set(sizes) == {1, 2, 4, 8, 16, 32, 64, 128}
    assert all(n & (n - 1) == 0 for n in sizes)
    gangs = [j for j in big if j.request.num_gpu > training.GPUS_PER_NODE]
    assert len(gangs) / len(big) == pytest.approx(875 / 1867, abs=0.014)
    node = training.training_cluster()[0]
    for j in gangs[:50]:  # CPU and memory are asked per node: a whole node's share fits
        assert j.request.cpu_milli <= node.cpu_milli and j.request.memory_mib <= node.memory_mib


def test_durations_follow_the_stated_log_normal(big: list) -> None:
    """Sample quantiles against the analytic ones, tolerance in log space about 4 standard
    errors of each quantile (sigma x sqrt(q(1-q)) / (phi(z) sqrt(n)))."""
    d = np.array([j.duration_s for j in big])
    for q, tol in ((0.5, 0.12), (0.9, 0.16), (0.99, 0.35)):
        assert abs(math.log(np.quantile(d, q) / training.duration_quantile(q))) < tol, q
    assert training.duration_quantile(0.5) == pytest.approx(training.MEDIAN_S)
    assert 1 - training._phi(math.log(training.DAY_S / training.MEDIAN_S) / training.SIGMA) \
        == pytest.approx(training.DAY_SHARE)
    assert (d > training.DAY_S).mean() == pytest.approx(training.DAY_SHARE, abs=0.004)
    assert d.max() <= training.CAP_S
    # most jobs short, a heavy tail of long ones holding most of the GPU-time
    assert (d < 60).mean() == pytest.approx(0.414, abs=0.02)
    gpu_s = d * np.array([j.request.num_gpu for j in big])
    assert gpu_s[d > training.DAY_S].sum() / gpu_s.sum() > 0.5


def test_the_mean_duration_in_closed_form_matches_a_large_draw() -> None:
    rng = np.random.default_rng(0)
    x = np.minimum(np.exp(training.MU + training.SIGMA * rng.standard_normal(2_000_000)),
                   training.CAP_S)
    assert training.mean_duration_s() == pytest.approx(x.mean(), rel=0.03)


def test_arrivals_offer_the_stated_load(big: list) -> None:
    gpus = sum(n.gpu_count for n in training.training_cluster())
    assert gpus == 480
    rate = training.arrival_rate_per_s(1.0, gpus)
    assert rate * training.mean_gpus() * training.mean_duration_s() == pytest.approx(gpus)
    expected = rate * BIG_HOURS * 3600.0  # Poisson count: standard error sqrt(expected)
    assert abs(len(big) - expected) < 4 * math.sqrt(expected)
    double = training.training_jobs(3, 500 * 3600.0, 2.0)
    assert abs(len(double) - 2 * rate * 500 * 3600.0) < 4 * math.sqrt(2 * rate * 500 * 3600.0)


def test_tenants_are_zipf_like_names_recur_and_nothing_is_declared(big: list) -> None:
    tenants = Counter(j.meta.tenant for j in big)
    w = training.tenant_weights()
    assert len(tenants) == training.TENANTS
    assert tenants["u00"] / len(big) == pytest.approx(w[0], abs=0.015)
    assert tenants["u00"] > tenants["u01"] > tenants["u02"]
    assert all(j.meta.expected_s is None for j in big)
    names: dict[str, set[str]] = {}
    for j in big:
        names.setdefault(j.meta.tenant, set()).add(j.meta.name)
    assert all(len(v) <= 8 * len(training.STAGES) for v in names.values())  # sizes x stages
    runs = Counter((j.meta.tenant, j.meta.name) for j in big)
    assert runs.most_common(1)[0][1] > 100
    assert sum(c for c in runs.values() if c > 1) / len(big) > 0.95  # nearly all are reruns
    stage = {s: np.median([j.duration_s for j in big if j.meta.name.endswith("-" + s)])
             for s in training.STAGES}
    assert stage["debug"] < stage["tune"] < stage["train"]  # a name says roughly how long


def test_a_higher_load_brings_the_same_jobs_sooner_and_more_of_them() -> None:
    """Loads compare the same jobs (one random stream per quantity), not fresh draws."""
    horizon = 72 * 3600.0
    base = training.training_jobs(8, horizon, 1.0)
    for lo in (0.7, 1.3):
        other = training.training_jobs(8, horizon, lo)
        shared = min(len(base), len(other))
        assert len(other) > len(base) if lo > 1 else len(other) < len(base)
        assert [(j.job_id, j.duration_s, j.request, j.meta) for j in other[:shared]] == [
            (j.job_id, j.duration_s, j.request, j.meta) for j in base[:shared]]
        assert [j.arrival_s for j in other[:shared]] == pytest.approx(
            [j.arrival_s / lo for j in base[:shared]], rel=1e-12)
    assert max(j.arrival_s for j in base) < horizon


def test_a_jobs_file_at_load_2_arrives_twice_as_fast_with_the_same_durations(
        tmp_path: Path) -> None:
    jobs = training.training_jobs(5, 24 * 3600.0)
    path = tmp_path / "jobs.csv"
    write_jobs(path, jobs)
    recorded = read_jobs(path)
    _, _, same, horizon1 = load(_args(["--jobs", str(path)]))
    assert same == recorded and horizon1 == max(j.arrival_s for j in recorded)
    _, _, fast, horizon2 = load(_args(["--jobs", str(path), "--load", "2"]))
    assert [j.arrival_s for j in fast] == [j.arrival_s / 2 for j in recorded]
    assert [j.arrival_s * 2 for j in fast] == [j.arrival_s for j in recorded]  # exact
    assert [(j.job_id, j.duration_s, j.request, j.meta) for j in fast] == [
        (j.job_id, j.duration_s, j.request, j.meta) for j in recorded]
    assert horizon2 == horizon1 / 2
    assert scale_arrivals(recorded, 1.0) is recorded
    with pytest.raises(ValueError):
        scale_arrivals(recorded, 0.0)


def test_load_scales_the_generators_and_leaves_the_mixed_workload_as_it_was() -> None:
    _, _, mixed, horizon = load(_args(["--workload", "mixed", "--load", "1.3"]))
    assert horizon == 24 * 3600.0
    assert _key(mixed) == _key(mixed_jobs(42, 24 * 3600.0, 1.3, None))
    title, nodes, jobs, horizon = load(_args(["--workload", "training", "--hours", "48",
                                               "--load", "0.7", "--seeds", "9"]))
    assert (title, len(nodes), horizon) == ("training workload", 60, 48 * 3600.0)
    assert _key(jobs) == _key(training.training_jobs(9, 48 * 3600.0, 0.7))
    _, _, default, horizon = load(_args(["--workload", "training"]))
    assert horizon == training.DEFAULT_HOURS * 3600.0 == 14 * 86_400.0
    assert _key(default) == _key(training.training_jobs(42))


@pytest.mark.parametrize("argv", [["--workload", "training", "--load", "0"],
                                  ["--workload", "training", "--load", "-1"]])
def test_a_bad_load_is_still_refused_for_the_new_workload(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str]) -> None:
    args = _args([*argv, "--no-progress"])
    args.out = tmp_path / "o"
    assert simulate.run(args) == 2
    assert capsys.readouterr().err == f"error: --load {float(argv[-1])}: must be above 0\n"


def test_the_cli_runs_the_training_workload(tmp_path: Path) -> None:
    args = _args(["--workload", "training", "--hours", "6", "--policies", "fifo,backfill",
                  "--no-progress"])
    args.out = tmp_path / "o"
    assert simulate.run(args) == 0
    summary = json.loads((tmp_path / "o" / "summary.json").read_text())
    assert summary["title"] == "training workload" and summary["gpus"] == 480
    assert summary["jobs"] == len(training.training_jobs(42, 6 * 3600.0))
    assert set(summary["summary"]) == {"fifo", "backfill"}
