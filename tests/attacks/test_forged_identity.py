"""Identity attacks on the live secured cluster: a principal claiming a tenant or a node
that is not its own, or cancelling another tenant's task.

Kafka lets each of these through (the principal may write the topic); the scheduler's
router binds the claim to the signing principal and dead-letters the forgery with its
code and the field at fault. Each attack is followed by an honest event of the same
kind, which must still work, and by ``hetsched check`` over the whole cluster.
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from attack_cluster import NODE, AttackCluster, cancellation, run_id, simulated, submission

from schemas import make_event
from schemas.events import GpuSpec, NodeFailed, NodeRegistered, TaskFailed, TaskPlaced
from schemas.topics import DECISIONS, NODES, TASK_STATUS, TASKS

pytestmark = pytest.mark.integration


def _placed(task_id: str):
    def done(events) -> bool:
        return any(isinstance(e.payload, TaskPlaced) and e.payload.task_id == task_id
                   for e in events)
    return done


def _decisions_for(events, task_id: str) -> list[str]:
    return [e.type for e in events if getattr(e.payload, "task_id", None) == task_id]


async def test_alice_submitting_for_bobs_tenant_is_dead_lettered_tenant_forged(
    attack_cluster: AttackCluster,
) -> None:
    cluster, run = attack_cluster, run_id()
    forged = submission(f"forged-tenant-{run}", "nlp")
    honest = submission(f"honest-tenant-{run}", "vision")
    await cluster.produce("alice", TASKS, forged, honest)

    letter = await cluster.dead_letter(forged.event_id)
    assert letter.reason == "validation_failed"
    assert letter.message.startswith("tenant_forged:"), letter.message
    assert letter.errors[0].field == "payload.tenant"
    assert letter.errors[0].value == "nlp"
    decisions = await cluster.events(DECISIONS, _placed(honest.payload.task_id))
    assert _decisions_for(decisions, forged.payload.task_id) == []  # never decided
    assert forged.payload.task_id not in cluster.running()
    await cluster.assert_nothing_lost()


async def test_node_a_speaking_as_node_b_is_dead_lettered_node_forged(
    attack_cluster: AttackCluster,
) -> None:
    """node-a (its own credentials and key) tells the scheduler that node-b failed, then
    registers a phantom node-b with eight A100s: both are refused, node-b keeps its
    place and its running task, and nothing is placed on the phantom."""
    cluster, run = attack_cluster, run_id()
    victim = submission(f"on-node-b-{run}", "vision", simulated(30.0))
    await cluster.produce("alice", TASKS, victim)
    await cluster.events(DECISIONS, _placed(victim.payload.task_id))
    cluster.wait(lambda: victim.payload.task_id in cluster.running(), "the task to run")

    now = datetime.now(UTC)
    failed = make_event(NodeFailed(node_id=NODE, reason="agent_reported", detail="forged"),
                        source="agent/node-a", occurred_at=now)
    phantom = make_event(
        NodeRegistered(node_id=NODE, cpu_milli=64000, memory_mib=524288, pool="training",
                       gpus=[GpuSpec(index=i, uuid=f"GPU-phantom-{i}", model="A100",
                                     memory_mib=81920, fp32_tflops=19.5, fp16_tflops=312.0,
                                     mem_bandwidth_gbps=2039.0, power_limit_w=400.0)
                             for i in range(8)]),
        source="agent/node-a", occurred_at=now)
    await cluster.produce("node-a", NODES, failed, phantom)

    for forged in (failed, phantom):
        letter = await cluster.dead_letter(forged.event_id)
        assert letter.reason == "validation_failed"
        assert letter.message.startswith("node_forged:"), letter.message
        assert "'node-a'" in letter.message and NODE in letter.message
        assert letter.errors[0].field == "payload.node_id"
    assert victim.payload.task_id in cluster.running()
    nodes = [n for c in cluster.state()["cells"].values() for n in c["nodes"]
             if n["node"] == NODE]
    assert len(nodes) == 1 and nodes[0]["healthy"], nodes  # not failed by node-a
    assert nodes[0]["model"] == "T4" and len(nodes[0]["gpus_used_milli"]) == 2, nodes
    await cluster.produce("alice", TASKS, cancellation(victim.payload.task_id))
    cluster.wait(lambda: victim.payload.task_id not in cluster.running(), "the cancellation")
    await cluster.assert_nothing_lost()


async def test_bob_cancelling_alices_task_is_dead_lettered_and_the_task_runs_on(
    attack_cluster: AttackCluster,
) -> None:
    cluster, run = attack_cluster, run_id()
    task = submission(f"alices-{run}", "vision", simulated(30.0))
    await cluster.produce("alice", TASKS, task)
    await cluster.events(DECISIONS, _placed(task.payload.task_id))
    cluster.wait(lambda: task.payload.task_id in cluster.running(), "alice's task to run")

    attack = cancellation(task.payload.task_id)
    await cluster.produce("bob", TASKS, attack)
    letter = await cluster.dead_letter(attack.event_id)
    assert letter.reason == "validation_failed"
    assert letter.message.startswith("tenant_forged:"), letter.message
    assert letter.errors[0].field == "payload.task_id"
    assert task.payload.task_id in cluster.running()
    statuses = await cluster.events(TASK_STATUS, lambda es: True, 10)
    assert not [e for e in statuses if isinstance(e.payload, TaskFailed)
                and e.payload.task_id == task.payload.task_id]  # the node was not told

    own = cancellation(task.payload.task_id)  # alice herself may
    await cluster.produce("alice", TASKS, own)
    cluster.wait(lambda: task.payload.task_id not in cluster.running(), "alice's cancellation")
    await cluster.assert_nothing_lost()
