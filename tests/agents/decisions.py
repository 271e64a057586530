"""Builders of decision events for the executor tests (the schemas' real models)."""

from __future__ import annotations

import sys
from datetime import UTC, datetime
from typing import Any

from schemas.events import (
    DecisionReason,
    Envelope,
    Event,
    ExecutorSpec,
    GangMember,
    GpuAssignment,
    SimulatedWork,
    TaskMigrating,
    TaskPlaced,
    TaskPlacedV2,
    TaskPreempted,
    TaskResized,
    make_event,
)
from schemas.ids import new_event_id

CELL = "cell-a"
REASON = DecisionReason(code="test", message="placed by a test")


def _ids() -> dict[str, Any]:
    now = datetime.now(UTC)
    return {"decision_id": new_event_id(now), "cause_event_id": new_event_id(now)}


def wrap(payload: Event, cell: str = CELL) -> Envelope[Event]:
    return make_event(payload, source="scheduler/test", occurred_at=datetime.now(UTC), cell=cell)


def python(code: str) -> ExecutorSpec:
    """A process task running a Python snippet with this interpreter."""
    return ExecutorSpec(kind="process", argv=[sys.executable, "-c", code])


def simulated(
    duration_s: float, util: float = 60.0, mem: int = 1000, code: int = 0
) -> ExecutorSpec:
    work = SimulatedWork(
        duration_s=duration_s, gpu_util_pct=util, gpu_mem_used_mib=mem, exit_code=code
    )
    return ExecutorSpec(kind="simulated", simulated=work)


def gpus(*indices: int, share: int = 1000, memory_mib: int | None = None) -> list[GpuAssignment]:
    return [GpuAssignment(index=i, share_milli=share, memory_mib=memory_mib) for i in indices]


def placed(
    task_id: str, node_id: str, executor: ExecutorSpec, assignment: list[GpuAssignment], **kw: Any
) -> Envelope[Event]:
    return wrap(
        TaskPlaced(
            task_id=task_id,
            node_id=node_id,
            gpus=assignment,
            executor=executor,
            reason=REASON,
            **_ids(),
            **kw,
        )
    )


def gang(
    task_id: str, executor: ExecutorSpec, members: list[tuple[str, list[GpuAssignment]]]
) -> Envelope[Event]:
    """A gang's one placement: ``members`` in rank order; ``node_id``/``gpus`` are rank 0's."""
    return wrap(
        TaskPlacedV2(
            task_id=task_id,
            node_id=members[0][0],
            gpus=members[0][1],
            members=[GangMember(rank=r, node_id=n, gpus=g) for r, (n, g) in enumerate(members)],
            executor=executor,
            reason=REASON,
            **_ids(),
        )
    )


def preempted(task_id: str, node_id: str, grace_s: float = 5.0) -> Envelope[Event]:
    return wrap(
        TaskPreempted(
            task_id=task_id,
            node_id=node_id,
            grace_s=grace_s,
            by_task_id="urgent",
            reason=REASON,
            **_ids(),
        )
    )


def resized(task_id: str, node_id: str, assignment: list[GpuAssignment]) -> Envelope[Event]:
    return wrap(
        TaskResized(
            task_id=task_id,
            node_id=node_id,
            gpus=assignment,
            direction="up",
            reason=REASON,
            **_ids(),
        )
    )


def migrating(
    task_id: str,
    from_node: str,
    to_node: str,
    executor: ExecutorSpec,
    from_gpus: list[GpuAssignment],
    to_gpus: list[GpuAssignment],
) -> Envelope[Event]:
    return wrap(
        TaskMigrating(
            task_id=task_id,
            from_node_id=from_node,
            to_node_id=to_node,
            from_gpus=from_gpus,
            to_gpus=to_gpus,
            executor=executor,
            reason=REASON,
            **_ids(),
        )
    )
