"""The router holds a submission while no cell is known to have a node (issue: a
submission sequenced ahead of the first registration, read from another topic, was
answered with a final TaskUnschedulable by a cell that had no node yet).

Held in the router partition's state (``held/<task>``), released at the end of a
transaction of that partition once a cell is known to have a node, after the
registration; bounded in time and count so a cluster without nodes still answers.
Also: the parked early node events are bounded per partition, not only per node.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from types import SimpleNamespace
from typing import Any

from router_fakes import RecordingTxn, offline_router, registration

from schemas.codec import decode, encode
from schemas.events import (
    GpuTelemetry,
    TaskCancelled,
    TaskSubmitted,
    make_event,
)
from schemas.topics import BY_NAME, key_for
from streams.processors.routing import Router
from streams.processors.waiting import (
    HOLD_EVENTS_LIMIT,
    HOLD_LIMIT,
    HOLD_MAX_S,
    PARKED_NODES_LIMIT,
)

AT = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
INPUT_LOG = "hetsched.input-log"


class _Txn(RecordingTxn):
    def routed(self) -> list[tuple[str, str, str]]:
        """(cell, type, id) of each appended input-log record, in order."""
        out = []
        for topic, key, raw in self.sent:
            if topic == INPUT_LOG:
                env = decode(raw)
                assert env.cell == key.decode()
                p = env.payload
                out.append((env.cell, env.type, getattr(p, "task_id", None) or p.node_id))
        return out


class _Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


def _router(summaries: dict[str, Any] | None = None, clock: _Clock | None = None,
            state: dict[str, Any] | None = None, cells: int = 2) -> Router:
    return offline_router(cells=cells, partitions=2, summaries=summaries,
                          clock=clock or _Clock(), state=state)


def _node(node_id: str, cell: str | None = None) -> Any:
    return registration(node_id, cell, AT)


def _task(task_id: str) -> Any:
    return make_event(TaskSubmitted.model_validate({
        "task_id": task_id, "tenant": "team-a", "resources": {"gpu_count": 1},
        "executor": {"kind": "process", "argv": ["true"]}}), source="cli", occurred_at=AT)


def _cancel(task_id: str) -> Any:
    return make_event(TaskCancelled(task_id=task_id, reason="changed my mind"), source="cli",
                      occurred_at=AT)


def _telemetry(node_id: str) -> Any:
    return make_event(GpuTelemetry(node_id=node_id, gpu_index=0, gpu_uuid=f"GPU-{node_id}-0",
                                   gpu_util_pct=1.0, mem_used_mib=1, temperature_c=40.0,
                                   power_w=60.0), source=f"agent/{node_id}", occurred_at=AT)


def _send(router: Router, txn: _Txn, topic: str, env: Any, partition: int = 0) -> None:
    name = f"hetsched.{topic}"
    msg = SimpleNamespace(topic=name, partition=partition, offset=0,
                          key=key_for(BY_NAME[name], env), value=encode(env), headers=(),
                          timestamp=None)
    asyncio.run(router.process(msg, txn))


def _commit(router: Router, txn: _Txn, partition: int = 0) -> None:
    """The end of a transaction of ``partition`` (what eos calls before committing)."""
    asyncio.run(router.finish(partition, txn))


def test_a_submission_read_before_any_registration_follows_the_first_one():
    router, txn = _router(), _Txn()
    _send(router, txn, "tasks", _task("t1"))
    _commit(router, txn)
    assert txn.routed() == [] and "held/t1" in txn.puts  # held, in the committed state
    _send(router, txn, "nodes", _node("n1", "cell-1"))
    _commit(router, txn)
    assert txn.routed() == [("cell-1", "NodeRegistered", "n1"),
                            ("cell-1", "TaskSubmitted", "t1")]
    assert txn.puts["held/t1"] is None and txn.puts["task/t1"] == "cell-1"
    _send(router, txn, "tasks", _task("t2"))  # now straight through
    assert txn.routed()[-1] == ("cell-1", "TaskSubmitted", "t2")


def test_what_follows_a_held_submission_waits_behind_it_in_order():
    router, txn = _router(), _Txn()
    _send(router, txn, "tasks", _task("t1"))
    _send(router, txn, "tasks", _cancel("t1"))
    _send(router, txn, "tasks", _task("t2"))
    _commit(router, txn)
    assert txn.routed() == []
    _send(router, txn, "nodes", _node("n1", "cell-0"))
    _commit(router, txn)
    assert txn.routed() == [("cell-0", "NodeRegistered", "n1"),
                            ("cell-0", "TaskSubmitted", "t1"),
                            ("cell-0", "TaskCancelled", "t1"),
                            ("cell-0", "TaskSubmitted", "t2")]


def test_a_registration_seen_elsewhere_releases_at_the_partitions_next_transaction():
    summaries: dict[str, Any] = {}
    router, txn = _router(summaries), _Txn()
    _send(router, txn, "tasks", _task("t1"))
    _commit(router, txn)
    # Another worker's router registered a node; its cell published a summary.
    summaries["cell-1"] = {"nodes": 1, "queued": 0, "models": {
        "A100": {"gpus": 1, "free": 1, "max_per_node": 1}}}
    _send(router, txn, "telemetry", _telemetry("unknown-node"))  # any record of partition 0
    _commit(router, txn)
    assert txn.routed() == [("cell-1", "TaskSubmitted", "t1")]


def test_a_registration_routed_in_another_partition_of_this_worker_releases_too():
    router, txn = _router(), _Txn()
    _send(router, txn, "tasks", _task("t1"), partition=0)
    _commit(router, txn, 0)
    _send(router, txn, "nodes", _node("n1", "cell-1"), partition=1)
    _commit(router, txn, 1)
    assert txn.routed() == [("cell-1", "NodeRegistered", "n1")]  # partition 0 read nothing
    _commit(router, txn, 0)
    assert txn.routed()[-1] == ("cell-1", "TaskSubmitted", "t1")


def test_held_submissions_survive_a_restart():
    router, txn = _router(), _Txn()
    _send(router, txn, "tasks", _task("t1"))
    _send(router, txn, "tasks", _task("t2"))
    _commit(router, txn)
    committed = {k: v for k, v in txn.puts.items() if v is not None}
    restarted, txn2 = _router(state=committed), _Txn()
    _send(restarted, txn2, "tasks", _cancel("t2"))  # still known as held after the restart
    _send(restarted, txn2, "nodes", _node("n1", "cell-0"))
    _commit(restarted, txn2)
    assert [r[1:] for r in txn2.routed()] == [
        ("NodeRegistered", "n1"), ("TaskSubmitted", "t1"), ("TaskSubmitted", "t2"),
        ("TaskCancelled", "t2")]


def test_a_restarted_router_knows_the_cells_its_state_registered_nodes_to():
    router, txn = _router(), _Txn()
    _send(router, txn, "nodes", _node("n1", "cell-1"))
    committed = {k: v for k, v in txn.puts.items() if v is not None}
    restarted, txn2 = _router(state=committed), _Txn()  # no summaries read yet
    _send(restarted, txn2, "tasks", _task("t1"))
    assert txn2.routed() == [("cell-1", "TaskSubmitted", "t1")]


def test_without_any_node_a_held_submission_is_routed_after_the_time_bound():
    clock = _Clock()
    router, txn = _router(clock=clock), _Txn()
    _send(router, txn, "tasks", _task("t1"))
    clock.now += HOLD_MAX_S - 1
    _send(router, txn, "tasks", _task("t2"))
    _commit(router, txn)
    assert txn.routed() == []
    clock.now += 1
    _commit(router, txn)
    routed = txn.routed()
    assert [r[1:] for r in routed] == [("TaskSubmitted", "t1")]  # its cell will refuse it
    assert routed[0][0] in ("cell-0", "cell-1") and txn.puts["task/t1"] == routed[0][0]
    clock.now += HOLD_MAX_S - 2
    _commit(router, txn)
    assert [r[2] for r in txn.routed()] == ["t1"]
    clock.now += 1
    _commit(router, txn)
    assert [r[2] for r in txn.routed()] == ["t1", "t2"]


def test_holding_is_bounded_in_tasks_and_in_events_per_task():
    router, txn = _router(), _Txn()
    for i in range(HOLD_LIMIT + 1):
        _send(router, txn, "tasks", _task(f"t{i}"))
    assert [r[2] for r in txn.routed()] == ["t0"]  # the oldest goes when one too many wait
    assert len(router.waiting.held_tasks(0)) == HOLD_LIMIT
    for _ in range(HOLD_EVENTS_LIMIT - 2):
        _send(router, txn, "tasks", _cancel("t1"))
    assert [r[2] for r in txn.routed()] == ["t0"]
    _send(router, txn, "tasks", _cancel("t1"))
    assert [r[1:] for r in txn.routed()[1:]] == [("TaskSubmitted", "t1")] + [
        ("TaskCancelled", "t1")] * (HOLD_EVENTS_LIMIT - 1)


def test_parked_early_events_are_bounded_per_partition_oldest_node_first():
    router, txn = _router(), _Txn()
    for i in range(PARKED_NODES_LIMIT):
        _send(router, txn, "telemetry", _telemetry(f"n{i}"))
    _send(router, txn, "telemetry", _telemetry("n0"))  # n0 parked again: now the newest
    _send(router, txn, "telemetry", _telemetry("late"))
    state = router.state[0]
    assert "early/n1" not in state and txn.puts["early/n1"] is None
    assert "early/n0" in state and len(state["early/n0"]) == 2 and "early/late" in state
    assert sum(k.startswith("early/") for k in state) == PARKED_NODES_LIMIT
    # the bound holds after a restart too (in the restored state's order)
    committed = {k: v for k, v in txn.puts.items() if v is not None}
    restarted, txn2 = _router(state=committed), _Txn()
    _send(restarted, txn2, "telemetry", _telemetry("later"))
    state = restarted.state[0]
    assert "early/later" in state and sum(k.startswith("early/") for k in state) == (
        PARKED_NODES_LIMIT)
    _send(restarted, txn2, "nodes", _node("late", "cell-0"))
    assert [r[1] for r in txn2.routed()] == ["NodeRegistered", "GpuTelemetry"]


def test_a_quiet_partition_can_release_in_a_transaction_that_consumed_nothing():
    router, txn = _router(), _Txn()
    assert not router.has_waiting(0)
    _send(router, txn, "tasks", _task("t1"), partition=0)
    _commit(router, txn, 0)
    assert router.has_waiting(0) and not router.has_waiting(1)
    _send(router, txn, "nodes", _node("n1", "cell-0"), partition=1)
    _commit(router, txn, 1)
    asyncio.run(router.idle(0, txn))  # what a processor's idle call would run
    assert txn.routed()[-1] == ("cell-0", "TaskSubmitted", "t1") and not router.has_waiting(0)
