"""Operator journeys on a default cluster: submit, watch, cancel, then audit every task.

Each journey is what a user does first with the README and docs/service.md:
submit tasks that succeed, fail, are refused, are duplicated and are cancelled,
on ``sim-cluster`` nodes with the process backend and the simulated one; then
``status``, ``nodes``, ``export``, ``replay``, ``check`` and ``explain`` for
every task in the export. The processes are real and their settings are the
defaults (see conftest.py); the assertions read what the operator reads: exit
codes and output, plus the executors' reports on ``hetsched.task-status``.
"""

from __future__ import annotations

import gzip
from typing import Any

import orjson
import pytest
from operator_tools import Operator, final_report, reports_of, wait_until

pytestmark = pytest.mark.integration

TENANT = "team-a"


def process_task(task_id: str, *argv: str, tenant: str = TENANT) -> dict[str, Any]:
    return {"task_id": task_id, "tenant": tenant, "resources": {"gpu_count": 1},
            "executor": {"kind": "process", "argv": list(argv)}}


def submit(cluster: Operator, spec: dict[str, Any], *flags: str) -> Any:
    name = cluster.write_spec(f"{spec['task_id']}.yaml", spec)
    return cluster.run("submit", name, *flags)


def test_a_process_task_runs_to_its_end(cluster: Operator) -> None:
    placed = submit(cluster, process_task("j-sleep", "sleep", "2"), "--wait")
    assert placed.returncode == 0, placed.stdout + placed.stderr
    assert "j-sleep: TaskPlaced on " in placed.stdout
    end = final_report(cluster.bootstrap, "j-sleep")
    assert end["type"] == "TaskFinished", (end, cluster.log("nodes")[-3000:])


def test_a_failing_process_task_says_why(cluster: Operator) -> None:
    spec = process_task("j-fail", "sh", "-c", "echo out of memory >&2; exit 3")
    assert submit(cluster, spec, "--wait").returncode == 0
    end = final_report(cluster.bootstrap, "j-fail")
    assert end["type"] == "TaskFailed"
    assert end["payload"]["reason"] == "exit_nonzero"
    assert "3" in str(end["payload"].get("exit_code", "")) + end["payload"].get("message", "")


def test_a_simulated_task_runs_to_its_end(cluster: Operator) -> None:
    spec = {"task_id": "j-sim", "tenant": TENANT,
            "resources": {"gpu_count": 1, "gpu_share_milli": 500},
            "executor": {"kind": "simulated", "simulated": {
                "duration_s": 2, "gpu_util_pct": 60, "gpu_mem_used_mib": 2000}}}
    placed = submit(cluster, spec, "--wait")
    assert placed.returncode == 0, placed.stdout + placed.stderr
    assert final_report(cluster.bootstrap, "j-sim")["type"] == "TaskFinished"


def test_an_unknown_gpu_model_is_refused_naming_the_known_ones(cluster: Operator) -> None:
    spec = process_task("j-h999", "sleep", "1")
    spec["resources"]["gpu_models"] = ["H999"]
    refused = submit(cluster, spec, "--wait")
    said = refused.stdout + refused.stderr
    assert refused.returncode == 2, said  # refused before anything is sent
    assert "H999" in said and "unknown GPU model" in said, said
    assert "A100" in said and "V100" in said, said  # the known models are listed


def test_a_task_no_node_can_ever_hold_is_refused_and_the_exit_code_says_so(
        cluster: Operator) -> None:
    spec = process_task("j-huge", "sleep", "1")
    spec["resources"]["cpu_milli"] = 10_000_000  # more CPU than any node of the cluster has
    refused = submit(cluster, spec, "--wait")
    said = refused.stdout + refused.stderr
    assert refused.returncode == 1, said
    assert "j-huge: TaskUnschedulable (refused)" in said and "insufficient cpu" in said, said


def test_a_duplicate_task_id_is_rejected_naming_the_running_task(cluster: Operator) -> None:
    first = submit(cluster, process_task("j-dup", "sleep", "600"), "--wait")
    assert first.returncode == 0, first.stdout + first.stderr
    try:
        node = first.stdout.split(" on ")[1].split()[0]
        again = submit(cluster, process_task("j-dup", "sleep", "1"), "--wait")
        said = again.stdout + again.stderr
        assert again.returncode == 1, said
        assert "j-dup: TaskRejected" in said and f"already exists (running on {node})" in said, \
            said
        other = submit(cluster, process_task("j-dup", "sleep", "1", tenant="team-b"), "--wait")
        said = other.stdout + other.stderr
        assert other.returncode == 1, said
        assert "already in use" in said, said
        assert node not in said and "running" not in said, said  # nothing of team-a's task
    finally:
        assert cluster.run("cancel", "j-dup").returncode == 0


def test_a_cancelled_task_is_stopped_on_its_node(cluster: Operator) -> None:
    placed = submit(cluster, process_task("j-cancel", "sleep", "600"), "--wait")
    assert placed.returncode == 0, placed.stdout + placed.stderr
    wait_until("j-cancel started", lambda: any(
        r["type"] == "TaskStarted" for r in reports_of(cluster.bootstrap, "j-cancel")))
    cancelled = cluster.run("cancel", "j-cancel")
    assert cancelled.returncode == 0, cancelled.stderr
    assert "cancel sent for j-cancel" in cancelled.stdout
    end = final_report(cluster.bootstrap, "j-cancel")
    assert end["type"] == "TaskFailed" and end["payload"]["reason"] == "killed", end

    def gone_from_status() -> bool:
        status = cluster.run("status")
        return status.returncode == 0 and "j-cancel" not in status.stdout
    wait_until("j-cancel gone from `hetsched status`", gone_from_status)


def test_status_and_nodes_read_the_cluster_and_a_closed_pipe_is_not_a_broker_error(
        cluster: Operator) -> None:
    status = cluster.run("status")
    assert status.returncode == 0, status.stderr
    assert "queue (" in status.stdout and "running (" in status.stdout
    nodes = cluster.run("nodes")
    assert nodes.returncode == 0 and nodes.stdout.startswith("NODE "), nodes.stderr
    piped = cluster.shell("hetsched status | head -1")
    assert piped.stdout.strip().startswith("queue ("), piped.stdout
    assert "Kafka" not in piped.stderr and "Traceback" not in piped.stderr, piped.stderr


def test_export_replay_check_and_explain_answer_for_every_task(cluster: Operator) -> None:
    def quiet() -> bool:
        status = cluster.run("status")
        return status.returncode == 0 and "running (0)" in status.stdout and \
            "queue (0)" in status.stdout
    wait_until("no task running or queued", quiet, timeout_s=120, every_s=1)

    exported = cluster.run("export", "-o", "audit.jsonl.gz")
    assert exported.returncode == 0, exported.stderr
    replayed = cluster.run("replay", "audit.jsonl.gz")
    assert replayed.returncode == 0, replayed.stdout + replayed.stderr
    assert "every recorded decision was reproduced" in replayed.stdout
    checked = cluster.run("check", "--settled")
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "task_lost                  ok" in checked.stdout, checked.stdout

    task_ids = exported_task_ids(cluster.home / "audit.jsonl.gz")
    assert {"j-sleep", "j-fail", "j-sim", "j-dup", "j-cancel"} <= task_ids
    for task_id in sorted(task_ids):
        explained = cluster.run("explain", task_id, "audit.jsonl.gz")
        assert explained.returncode == 0, f"{task_id}:\n{explained.stderr}"
        assert "Traceback" not in explained.stderr
        assert "submitted" in explained.stdout, f"{task_id}:\n{explained.stdout}"


def exported_task_ids(path: Any) -> set[str]:
    """The ids of every task an export's records name."""
    ids: set[str] = set()
    with gzip.open(path, "rb") as lines:
        for line in lines:
            record = orjson.loads(line)
            value = record.get("value") if isinstance(record, dict) else None
            payload = value.get("payload") if isinstance(value, dict) else None
            if isinstance(payload, dict) and isinstance(payload.get("task_id"), str):
                ids.add(payload["task_id"])
    return ids
