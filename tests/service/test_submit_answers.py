"""``hetsched submit --wait`` tells the truth about its own submission, through a real worker.

A real worker process on the real broker, and the real ``hetsched submit`` command:
a placed task exits 0; the same task id submitted again is answered with a
``TaskRejected`` on the decisions topic (before, the second submission vanished
and ``--wait`` printed the first one's placement as its answer, exit 0), which
``--wait`` prints, exiting 1; another tenant's submission of the id learns only
that it is in use; a task no node can ever host exits 1 with the reason; a GPU
model the catalog lacks, sent by a client that skips our validation, is
dead-lettered naming the field and the known models.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest
import yaml
from service_builders import node
from service_kafka import Deployment, free_port, wait_for_nodes, wait_healthy

from schemas.codec import decode_deadletter

pytestmark = pytest.mark.integration
EXIT_PLACED, EXIT_REFUSED, EXIT_NOT_PLACED = 0, 1, 3  # as submit --help documents them
REPO = Path(__file__).resolve().parents[2]


def _spec(task_id: str, tenant: str, gpus: int = 1) -> dict[str, Any]:
    return {"task_id": task_id, "tenant": tenant,
            "resources": {"gpu_count": gpus, "cpu_milli": 1000, "memory_mib": 1024,
                          "gpu_models": ["T4"]},
            "executor": {"kind": "simulated", "simulated": {
                "duration_s": 3600.0, "gpu_util_pct": 50.0, "gpu_mem_used_mib": 1024}}}


def _submit(dep: Deployment, tmp: Path, spec: dict[str, Any],
            timeout_s: float = 60) -> tuple[subprocess.CompletedProcess[str], str]:
    """Run ``hetsched submit --wait``; the result and the submission's event id."""
    path = tmp / f"{spec['task_id']}-{spec['tenant']}.yaml"
    path.write_text(yaml.safe_dump(spec))
    run = subprocess.run([sys.executable, "-m", "streams.cli", "submit", str(path), "--wait",
                          "--timeout", str(timeout_s)], capture_output=True, text=True,
                         env=dep.env(free_port()), cwd=REPO, timeout=timeout_s + 60)
    found = re.search(r"submitted \S+ \(event (\w+)\)", run.stdout)
    assert found, run.stdout + run.stderr
    return run, found.group(1)


async def test_a_duplicate_task_id_is_rejected_and_submit_wait_says_so(
        kafka_bootstrap: str, project_env: dict[str, str], processes: Any,
        tmp_path: Path) -> None:
    dep = Deployment(kafka_bootstrap, project_env, tmp_path)
    worker = dep.start_worker(processes, "worker")
    wait_healthy(worker, processes)
    await dep.produce("hetsched.nodes", [node("node-0", "T4", 2, seed=dep.prefix)])
    wait_for_nodes([worker.web_port], 1)

    first, first_event = _submit(dep, tmp_path, _spec("dup-1", "team-a"))
    assert first.returncode == EXIT_PLACED, first.stdout + first.stderr
    assert "dup-1: TaskPlaced on node-0" in first.stdout

    again, again_event = _submit(dep, tmp_path, _spec("dup-1", "team-a"))
    assert again.returncode == EXIT_REFUSED, again.stdout + again.stderr
    assert (f"dup-1: TaskRejected (refused) task dup-1 already exists (running on node-0), "
            f"submitted in event {first_event}; this submission is ignored: submit it under a "
            "new task id") in again.stdout
    assert "TaskPlaced" not in again.stdout  # not the first submission's answer
    assert "1 refused" in again.stderr

    squat, squat_event = _submit(dep, tmp_path, _spec("dup-1", "team-b"))
    assert squat.returncode == EXIT_REFUSED, squat.stdout + squat.stderr
    assert "dup-1: TaskRejected (refused) task id already in use" in squat.stdout
    for secret in ("node-0", "running", first_event, "team-a"):
        assert secret not in squat.stdout + squat.stderr

    never, _ = _submit(dep, tmp_path, _spec("too-big", "team-a", gpus=4))
    assert never.returncode == EXIT_REFUSED, never.stdout + never.stderr
    assert "too-big: TaskUnschedulable (refused)" in never.stdout

    decisions = await dep.read(
        "hetsched.decisions", lambda ds: sum(d.type == "TaskRejected" for d in ds) >= 2, 60)
    rejected = {d.payload.cause_event_id: d for d in decisions if d.type == "TaskRejected"}
    assert set(rejected) == {again_event, squat_event}
    assert rejected[squat_event].payload.reason.message == "task id already in use"
    assert rejected[squat_event].correlation_id == squat_event
    placed = [d for d in decisions if d.type == "TaskPlaced"]
    assert [d.payload.task_id for d in placed] == ["dup-1"]  # placed once, still running
    assert worker.poll() is None


async def test_a_queued_task_not_placed_in_time_exits_3_and_an_unknown_model_is_dead_lettered(
        kafka_bootstrap: str, project_env: dict[str, str], processes: Any,
        tmp_path: Path) -> None:
    dep = Deployment(kafka_bootstrap, project_env, tmp_path)
    worker = dep.start_worker(processes, "worker")
    wait_healthy(worker, processes)
    await dep.produce("hetsched.nodes", [node("node-0", "T4", 1, seed=dep.prefix)])
    wait_for_nodes([worker.web_port], 1)
    busy, _ = _submit(dep, tmp_path, _spec("holds-the-gpu", "team-a"))
    assert busy.returncode == EXIT_PLACED, busy.stdout + busy.stderr
    queued, _ = _submit(dep, tmp_path, _spec("waits", "team-a"), timeout_s=8)
    assert queued.returncode == EXIT_NOT_PLACED, queued.stdout + queued.stderr
    assert "waits: TaskUnschedulable (queued)" in queued.stdout
    assert "waits: not placed within 8s: still queued" in queued.stdout

    # A client in another language skips our validation: the router refuses the model.
    doc = {"event_id": "01JN8S818G4FGGJ0Z50KYR7FXT", "type": "TaskSubmitted", "version": 1,
           "source": "cli/go", "occurred_at": "2026-12-04T12:00:00Z",
           "payload": {**_spec("h999", "team-a"),
                       "resources": {"gpu_count": 1, "gpu_models": ["H999"]}}}
    await dep.produce_raw("hetsched.tasks", b"h999", orjson.dumps(doc))
    letters = await dep.read("hetsched.deadletter", lambda r: len(r) >= 1, 60, raw=True)
    (letter,) = [decode_deadletter(r) for r in letters]
    assert letter.reason == "validation_failed"
    assert letter.event_id == "01JN8S818G4FGGJ0Z50KYR7FXT"
    (error,) = letter.errors
    assert (error.field, error.value) == ("payload.resources.gpu_models", ["H999"])
    assert "unknown GPU model 'H999' (known: A10, A100, " in error.error
