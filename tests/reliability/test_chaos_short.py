"""The short chaos run (``bench/chaos.py --short``) against the test broker, as CI runs it.

About two minutes: two workers and two simulated node clusters under a steady
load of tasks and telemetry, with one worker ``kill -9``, one node-cluster
``kill -9``, one burst of malformed records and a worker ``SIGSTOP`` past its
session timeout; then the invariant checker over the whole log. The long run
(30 minutes, broker restarts too) is in BENCHMARKS.md.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytestmark = [pytest.mark.integration, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def summary(kafka_bootstrap: str, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    tmp = tmp_path_factory.mktemp("chaos")
    out = tmp / "summary.json"
    done = subprocess.run(
        [sys.executable, str(REPO / "bench" / "chaos.py"), "--short", "--bootstrap",
         kafka_bootstrap, "--workdir", str(tmp / "run"), "--out", str(out),
         "--export", str(tmp / "export.jsonl.gz")],
        capture_output=True, text=True, cwd=REPO, timeout=420, check=False)
    assert out.exists(), done.stdout[-4000:] + done.stderr[-4000:]
    result: dict[str, Any] = json.loads(out.read_text())
    result["_output"] = done.stdout[-3000:]
    result["_export"] = str(tmp / "export.jsonl.gz")
    return result


def test_every_fault_kind_of_the_short_run_was_injected_and_recovered(summary: dict[str, Any]):
    kinds = summary["faults_by_kind"]
    assert set(kinds) >= {"worker_kill", "nodes_kill", "malformed", "worker_pause"}, summary
    assert all(row["not_recovered"] == 0 for row in kinds.values()), summary["_output"]
    assert summary["deadletters"] > 0, "the malformed records must be dead-lettered"


def test_under_faults_no_gpu_is_over_committed_and_nothing_is_duplicated(
        summary: dict[str, Any]):
    inv = summary["invariants"]
    assert inv["gpu_over_commit"] == 0 and summary["max_share_milli"] <= 1000, summary["_output"]
    assert inv["task_placed_twice"] == inv["duplicate_decision"] == 0, summary["_output"]
    assert inv["decision_applied_twice"] == inv["start_without_decision"] == 0, \
        summary["_output"]
    assert inv["decision_to_absent_node"] == 0, summary["_output"]
    assert summary["duplicates"] == 0


def test_under_faults_no_submitted_task_is_lost(summary: dict[str, Any]):
    assert summary["lost"] == 0 and summary["invariants"]["task_lost"] == 0, \
        summary["_output"]


def test_after_the_load_stops_no_task_waits_beside_free_capacity(summary: dict[str, Any]):
    """Every task of the run fits an idle node (1 or 2 GPUs of an A100x4), so none may
    still be queued when the quiet phase ends. Before session 6, 4 to 20 were: the load's
    telemetry shows 1 GiB in use on idle GPUs (as NVML does on real ones), which the
    cells reserved, so no idle GPU was whole for the whole-GPU tasks."""
    assert summary["task_states"]["queued"] == 0, summary["_output"]


def test_the_faulted_run_replays_to_every_recorded_decision(summary: dict[str, Any]):
    """Workers killed, paused and restarted rebuild their cells from the table records
    while replay folds the log from the start: the two must decide alike. Session 6
    found a case where they did not (a node registering again after its cluster was
    killed kept capacity out in the running cell only): the run's export then replayed
    6 to 42 decisions differently."""
    done = subprocess.run(
        [sys.executable, "-m", "streams.cli", "replay", summary["_export"], "--no-progress"],
        capture_output=True, text=True, cwd=REPO, timeout=300, check=False)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert "every recorded decision was reproduced" in done.stdout


def test_the_faulted_run_replays_alike_with_a_restart_after_every_five_inputs(
        summary: dict[str, Any]):
    """A worker may restart at any input: rebuilt from its records after every five
    inputs, each cell must still reproduce every recorded decision. Session 7 found the
    records losing the queue's order (a task queued again after its node failed came back
    ahead of the tasks waiting before it): the run's export then replayed 18-29 decisions
    differently in 2 of 4 runs, and this check failed on any run with a requeue."""
    done = subprocess.run(
        [sys.executable, "-m", "streams.cli", "replay", summary["_export"], "--no-progress",
         "--restore-every", "5"],
        capture_output=True, text=True, cwd=REPO, timeout=300, check=False)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert "every recorded decision was reproduced" in done.stdout
