"""End to end on the real broker: a gang of two process tasks on two nodes.

A real ``hetsched worker`` places a 2-node gang (``TaskSubmitted`` v2) on a
``hetsched-node sim-cluster`` of two T4x2 nodes running the process backend.
Each node starts its member with the rendezvous variables (the task writes its
environment to a file in its own directory); then the test kills rank 0's
member: its node reports it failed, the scheduler ends the gang and sends one
stop naming rank 0's node, and the other node stops its member on it. The gang
is placed once, stopped once, and not queued again.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from service_kafka import Deployment, free_port, wait_for_nodes, wait_healthy

from agents.executor import master_port
from schemas.events import (
    Envelope,
    Event,
    TaskFailed,
    TaskPlacedV2,
    TaskPreempted,
    TaskStarted,
    TaskSubmittedV2,
    make_event,
)

pytestmark = pytest.mark.integration

MEMBER = "env > env.txt; echo $$ > pid; exec sleep 300"
"""A member: its environment and pid in its own directory, then it waits (``sh``: a
task may run as ``nobody``, who cannot reach the test's Python)."""
RENDEZVOUS = ("WORLD_SIZE", "RANK", "NODE_RANK", "LOCAL_WORLD_SIZE", "NNODES", "MASTER_ADDR",
              "MASTER_PORT", "CUDA_VISIBLE_DEVICES")


def _gang(dep: Deployment, task_id: str) -> Envelope[Event]:
    payload = TaskSubmittedV2.model_validate({
        "task_id": task_id, "tenant": "team-a",
        "resources": {"gpu_count": 4, "nodes": 2, "gpus_per_node": 2, "cpu_milli": 1000,
                      "memory_mib": 1024, "gpu_models": ["T4"]},
        "features": {"profile": "compute", "expected_duration_s": 300.0},
        "executor": {"kind": "process", "argv": ["sh", "-c", MEMBER]},
    })
    return make_event(payload, source="cli/test", occurred_at=datetime.now(UTC),
                      id_seed=f"{dep.prefix}gang/{task_id}")


def _env_of(path: Path, timeout_s: float = 30.0) -> dict[str, str]:
    deadline = time.monotonic() + timeout_s
    while not (path.is_file() and path.with_name("pid").is_file()
               and path.with_name("pid").read_text().strip()):
        assert time.monotonic() < deadline, f"the member never wrote {path}"
        time.sleep(0.1)
    lines = path.read_text().splitlines()
    return {k: v for k, _, v in (line.partition("=") for line in lines) if k in RENDEZVOUS}


def _of(records: list[Envelope[Event]], kind: type, task: str) -> list[Any]:
    return [r.payload for r in records if isinstance(r.payload, kind)
            and r.payload.task_id == task]


def _cluster(dep: Deployment, processes: Any, tmp_path: Path,
             **worker_env: str) -> tuple[Any, Any, Path]:
    """A healthy worker and a sim-cluster of two T4x2 process-backend nodes it knows."""
    port = free_port()
    worker = dep.start_worker(processes, "worker", port, **worker_env)
    wait_healthy(worker, processes)
    state = tmp_path / "nodes"
    argv = [sys.executable, "-m", "agents.cli", "sim-cluster", "--nodes", "2",
            "--simulate", "T4x2", "--id-prefix", dep.prefix, "--topic-prefix", dep.prefix,
            "--bootstrap", dep.bootstrap, "--heartbeat-s", "0.5", "--start-at", "beginning",
            "--state-dir", str(state), "--set", "executor.grace_s=2", "--log-level", "WARNING"]
    nodes = processes.start("nodes", argv, dict(dep.base_env, HETSCHED_TOPIC_PREFIX=dep.prefix))
    wait_for_nodes([port], 2)
    return worker, nodes, state


async def test_a_gang_runs_one_member_per_node_and_one_members_end_stops_the_other(
        kafka_bootstrap: str, project_env: dict[str, str], processes: Any,
        tmp_path: Path) -> None:
    dep = Deployment(kafka_bootstrap, project_env, tmp_path)
    worker, _, state = _cluster(dep, processes, tmp_path)

    await dep.produce("hetsched.tasks", [_gang(dep, "gang-1")])
    decisions = await dep.read("hetsched.decisions",
                               lambda r: bool(_of(r, TaskPlacedV2, "gang-1")), 60)
    (placed,) = _of(decisions, TaskPlacedV2, "gang-1")
    assert [m.rank for m in placed.members] == [0, 1]
    first, second = (m.node_id for m in placed.members)
    assert first != second and {first, second} == {f"{dep.prefix}sim-node-{i:04d}"
                                                     for i in range(2)}

    envs = [_env_of(state / m.node_id / "tasks" / "gang-1" / "env.txt") for m in placed.members]
    shared = {"WORLD_SIZE": "4", "NNODES": "2", "LOCAL_WORLD_SIZE": "2",
              "MASTER_ADDR": first, "MASTER_PORT": str(master_port("gang-1"))}
    for rank, env in enumerate(envs):
        assert env == {**shared, "RANK": str(rank), "NODE_RANK": str(rank),
                       "CUDA_VISIBLE_DEVICES": "0,1"}, env
    status = await dep.read("hetsched.task-status",
                            lambda r: len(_of(r, TaskStarted, "gang-1")) == 2, 30)
    assert {s.node_id for s in _of(status, TaskStarted, "gang-1")} == {first, second}

    # Rank 0's member dies: the stop names rank 0's node; rank 1's node obeys it too.
    pid = int((state / first / "tasks" / "gang-1" / "pid").read_text())
    os.kill(pid, signal.SIGKILL)
    status = await dep.read("hetsched.task-status",
                            lambda r: len(_of(r, TaskFailed, "gang-1")) == 2, 60)
    failed = {f.node_id: f for f in _of(status, TaskFailed, "gang-1")}
    assert set(failed) == {first, second}, failed
    assert (failed[first].reason, failed[first].exit_code) == ("killed", 137)
    assert failed[second].reason == "killed" and "preempted" in failed[second].message

    decisions = await dep.read("hetsched.decisions",
                               lambda r: bool(_of(r, TaskPreempted, "gang-1")), 30)
    (stop,) = _of(decisions, TaskPreempted, "gang-1")
    assert stop.node_id == first and stop.requeue is False
    assert failed[second].decision_id == stop.decision_id
    assert len(_of(decisions, TaskPlacedV2, "gang-1")) == 1  # failed once, not queued again
    assert worker.poll() is None
    check = subprocess.run(
        [sys.executable, "-m", "streams.cli", "check", "--settled", "--topic-prefix",
         dep.prefix], env=dep.env(free_port()), capture_output=True, text=True, timeout=120)
    assert check.returncode == 0, check.stdout + check.stderr


async def test_a_worker_killed_after_the_gang_decision_leaves_one_whole_gang(
        kafka_bootstrap: str, project_env: dict[str, str], processes: Any,
        tmp_path: Path) -> None:
    """kill -9 of the worker between the gang's decision and its members' start: the nodes
    are paused (SIGSTOP) before the submission, so no member can start until a new
    worker has taken over; then both members start, from the one decision, and the new
    worker places the gang neither again nor in part."""
    dep = Deployment(kafka_bootstrap, project_env, tmp_path)
    calm = {"HETSCHED_HEARTBEAT_TIMEOUT_S": "600"}  # paused nodes are not taken for lost
    worker, nodes, state = _cluster(dep, processes, tmp_path, **calm)
    os.killpg(nodes.pid, signal.SIGSTOP)
    try:
        await dep.produce("hetsched.tasks", [_gang(dep, "gang-k")])
        await dep.read("hetsched.decisions", lambda r: bool(_of(r, TaskPlacedV2, "gang-k")), 60)
        os.killpg(worker.pid, signal.SIGKILL)
        worker.wait(10)
        second = dep.start_worker(processes, "worker-2", **calm)
        wait_healthy(second, processes)
    finally:
        os.killpg(nodes.pid, signal.SIGCONT)
    status = await dep.read("hetsched.task-status",
                            lambda r: len(_of(r, TaskStarted, "gang-k")) == 2, 60)
    started = _of(status, TaskStarted, "gang-k")
    time.sleep(3.0)  # a few ticks of the new worker: time to (wrongly) place it again
    decisions = await dep.read("hetsched.decisions",
                               lambda r: bool(_of(r, TaskPlacedV2, "gang-k")), 30)
    (placed,) = _of(decisions, TaskPlacedV2, "gang-k")  # placed once, whole
    assert {s.node_id for s in started} == {m.node_id for m in placed.members}
    assert {s.decision_id for s in started} == {placed.decision_id}
    for m in placed.members:
        assert _env_of(state / m.node_id / "tasks" / "gang-k" / "env.txt")["RANK"] == str(m.rank)
    assert second.poll() is None
    check = subprocess.run(
        [sys.executable, "-m", "streams.cli", "check", "--topic-prefix", dep.prefix],
        env=dep.env(free_port()), capture_output=True, text=True, timeout=120)
    assert check.returncode == 0, check.stdout + check.stderr
