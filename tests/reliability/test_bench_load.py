"""bench/load.py's telemetry run on a small backlog, so the bench keeps working.

The telemetry figures of BENCHMARKS.md come from this script; it once broke
silently when the bench's worker handle changed (a two-process worker), so
its whole path runs here: a real worker restarted onto a backlog, the router's
appends, the scheduler's processed count and the worker's CPU per event.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.integration, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
BACKLOG = 50_000  # enough for the three 1-s samples the rate and CPU need


def test_the_telemetry_bench_measures_both_hops(kafka_bootstrap: str, tmp_path: Path) -> None:
    out = tmp_path / "load.json"
    done = subprocess.run(
        [sys.executable, str(REPO / "bench" / "load.py"), "--bootstrap", kafka_bootstrap,
         "--only", "telemetry", "--telemetry", str(BACKLOG), "--nodes", "20",
         "--window-s", "90", "--out", str(out)],
        capture_output=True, text=True, cwd=REPO, timeout=300, check=False)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    run = json.loads(out.read_text())["telemetry"]
    assert run["appended"] >= BACKLOG, run
    assert run["processed_by_scheduler"] >= BACKLOG, run  # every sample reached the scheduler
    assert run["worker_cpu_us_per_event"] is not None, run["worker_cpu_missing"]
    assert run["worker_cpu_us_per_event"] > 0, run


def test_the_cpu_figure_needs_an_append_after_the_first_sample_that_saw_one() -> None:
    sys.path.insert(0, str(REPO / "bench"))
    from load import cpu_per_event_of

    samples = [(1.0, 0), (2.0, 20_000), (3.0, 50_000)]
    cpu = [1.5, 2.0, 2.6]
    # From the first append's CPU (2.0 s) to the caught-up CPU (3.0 s), 30,000 events.
    per_event, missing = cpu_per_event_of(samples, cpu, 3.0)
    assert missing is None and abs(per_event - 1e6 / 30_000) < 1e-9
    # A fast router: everything appended between two samples (the flake of session 10).
    per_event, missing = cpu_per_event_of([(1.0, 0), (2.0, 50_000), (3.0, 50_000)],
                                          cpu, 3.0)
    assert per_event is None and "between two samples" in missing
    assert cpu_per_event_of([(1.0, 0)], [1.0], None) == (
        None, "nothing was appended within the window")
    assert "did not commit" in cpu_per_event_of(samples, cpu, None)[1]
    assert "unreadable" in cpu_per_event_of(samples, [1.5, None, 2.6], 3.0)[1]


def test_the_busy_rate_leaves_out_the_interval_in_which_the_run_ended() -> None:
    sys.path.insert(0, str(REPO / "bench"))
    from load import busy_rate_of, rate_of

    # 20,000/s from t=1 s; the backlog of 60,000 was done at t=4 s, sampled at t=4.9 s.
    samples = [(0.5, 0), (1.5, 10_000), (2.5, 30_000), (3.5, 50_000), (4.9, 60_000)]
    assert busy_rate_of(samples, 60_000) == 20_000
    assert rate_of(samples) < 16_000  # the idle tail counted in
    assert busy_rate_of(samples[:3] + samples[4:], 60_000) == 20_000
    assert busy_rate_of([(1.0, 5), (2.0, 60_000)], 60_000) is None  # one busy sample only
