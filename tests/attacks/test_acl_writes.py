"""Every role writing a topic its ACLs do not grant, on the live secured cluster.

The record each principal tries is one that would do harm if it landed (a placement
of the writer's choosing on the decisions topic, a submission written straight into a
cell's input log, a phantom node, ...), signed with the writer's own key: the broker
must refuse it with ``TopicAuthorizationFailed`` naming the topic, the record must not
be on the topic, and the cluster must be sound afterwards (``hetsched check``). The
full allow/deny matrix of reads and writes is tests/security/test_acl_roles.py; this
module is the attack view of its writes, with the aftermath checked.
"""

from __future__ import annotations

import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml
from aiokafka.errors import ClusterAuthorizationFailedError, TopicAuthorizationFailedError
from attack_cluster import NODE, REPO_ROOT, AttackCluster, run_id, submission

from schemas import encode, make_event
from schemas.events import (
    DecisionReason,
    GpuAssignment,
    GpuSpec,
    NodeRegistered,
    TaskFinished,
)
from schemas.events import TaskPlaced as Placed
from schemas.ids import new_event_id
from schemas.topics import (
    BY_NAME,
    CATALOG,
    DECISIONS,
    INPUT_LOG,
    NODE_INVENTORY,
    NODES,
    TASK_STATUS,
    TASKS,
    key_for,
)

pytestmark = pytest.mark.integration
CELL = "cell-0"


def _harmful(topic: str, run: str) -> tuple[bytes, bytes]:
    """(value, key) of a record that would do harm on ``topic``; ``run`` marks it."""
    now = datetime.now(UTC)
    task = submission(f"acl-{run}", "vision")
    if topic == DECISIONS:  # a placement the scheduler never made
        env: Any = make_event(Placed(
            task_id=task.payload.task_id, node_id=NODE, decision_id=new_event_id(now),
            cause_event_id=new_event_id(now), executor=task.payload.executor,
            gpus=[GpuAssignment(index=0, share_milli=1000)],
            reason=DecisionReason(code="forged", message=run)),
            source="scheduler/forged", occurred_at=now, cell=CELL)
    elif topic == INPUT_LOG:  # a submission past the router (no tenant binding)
        env = task.model_copy(update={"cell": CELL})
    elif topic in (NODES, NODE_INVENTORY):  # a phantom node
        env = make_event(NodeRegistered(
            node_id=f"phantom-{run}", cpu_milli=64000, memory_mib=524288,
            gpus=[GpuSpec(index=0, uuid=f"GPU-{run}", model="T4", memory_mib=15360,
                          fp32_tflops=8.1, fp16_tflops=65.0, mem_bandwidth_gbps=320.0,
                          power_limit_w=70.0)]),
            source="agent/forged", occurred_at=now)
    elif topic == TASK_STATUS:  # a task's end, reported by a non-node
        env = make_event(TaskFinished(task_id=task.payload.task_id, node_id=NODE,
                                      decision_id=new_event_id(now), runtime_s=1.0),
                         source="agent/forged", occurred_at=now)
    else:  # tasks, and telemetry and dead letters: the submission's bytes
        env = task
    value = encode(env)
    key = key_for(BY_NAME[topic], env) if topic in (DECISIONS, INPUT_LOG, NODES,
                                                    NODE_INVENTORY, TASK_STATUS, TASKS) else b"k"
    return value, key


ATTACKS = [
    ("alice", DECISIONS), ("alice", INPUT_LOG), ("alice", NODES),
    ("node-a", TASKS), ("node-a", DECISIONS),
    *(("grafana", spec.name) for spec in CATALOG),
]
ROLE = {"alice": "submitter", "node-a": "node", "grafana": "dashboard"}


@pytest.mark.parametrize(("user", "topic"), ATTACKS,
                         ids=[f"{ROLE[u]} writes {t}" for u, t in ATTACKS])
async def test_a_role_writing_a_topic_it_has_no_acl_for_is_refused_by_the_broker(
    attack_cluster: AttackCluster, user: str, topic: str,
) -> None:
    cluster, run = attack_cluster, run_id()
    value, key = _harmful(topic, run)
    # A dashboard has no IDEMPOTENT_WRITE either: its producer may be refused its
    # producer id before the topic is asked (the broker names the cluster then).
    refused = (TopicAuthorizationFailedError, ClusterAuthorizationFailedError)
    with pytest.raises(refused) as info:
        await cluster.produce_raw(user, topic, value, key)
    if isinstance(info.value, TopicAuthorizationFailedError):
        assert topic in str(info.value), f"the error should name the topic: {info.value}"
    cluster.secure.outputs.append(f"{info.value!r}")
    landed = [r for r in await cluster.read_to_end(topic) if r.value == value]
    assert landed == []
    await cluster.assert_nothing_lost()


def _spec_file(path: Path, task_id: str) -> Path:
    path.write_text(yaml.safe_dump({
        "task_id": task_id, "tenant": "vision",
        "resources": {"gpu_count": 1, "gpu_share_milli": 100, "gpu_models": ["T4"]},
        "executor": {"kind": "simulated", "simulated": {"duration_s": 1, "gpu_util_pct": 50,
                                                        "gpu_mem_used_mib": 100}},
    }))
    return path


@pytest.mark.parametrize("user", ["grafana", "node-a"],
                         ids=["a dashboard runs hetsched submit", "a node runs hetsched submit"])
async def test_hetsched_submit_by_a_role_without_the_tasks_acl_says_it_was_refused(
    attack_cluster: AttackCluster, tmp_path: Path, user: str,
) -> None:
    """The project's own client: a last line naming the principal and the topic, exit 1,
    no traceback, and nothing submitted."""
    cluster, task_id = attack_cluster, f"cli-{run_id()}"
    env = cluster.secure.env_for(user)
    env["HETSCHED_TOPIC_PREFIX"] = ""
    done = subprocess.run(
        [sys.executable, "-m", "streams.cli", "submit", str(_spec_file(tmp_path / "t.yaml",
                                                                         task_id))],
        env=env, cwd=REPO_ROOT, capture_output=True, text=True, check=False, timeout=120,
    )
    cluster.secure.outputs.append(done.stdout + done.stderr)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    line = done.stderr.strip().splitlines()[-1]  # after aiokafka's own log lines
    assert line.startswith("hetsched submit: "), line
    assert f"User:{user}" in line and TASKS in line and "not authorized" in line, line
    submitted = [r for r in await cluster.read_to_end(TASKS) if task_id.encode() in r.value]
    assert submitted == []
    await cluster.assert_nothing_lost()

