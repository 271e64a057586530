"""Small event builders shared by the security tests."""

from __future__ import annotations

from datetime import UTC, datetime

from schemas import make_event
from schemas.events import (
    Envelope,
    Event,
    ExecutorSpec,
    NodeHeartbeat,
    ResourceRequest,
    TaskCancelled,
    TaskSubmitted,
)

NOW = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)


def submission(task_id: str, tenant: str, share_milli: int = 500) -> Envelope[Event]:
    payload = TaskSubmitted(
        task_id=task_id,
        tenant=tenant,
        resources=ResourceRequest(gpu_count=1, gpu_share_milli=share_milli),
        executor=ExecutorSpec(kind="process", argv=["python", "train.py"]),
    )
    return make_event(payload, source="cli/test", occurred_at=NOW)


def cancellation(task_id: str) -> Envelope[Event]:
    return make_event(TaskCancelled(task_id=task_id), source="cli/test", occurred_at=NOW)


def heartbeat(node_id: str) -> Envelope[Event]:
    payload = NodeHeartbeat(node_id=node_id, seq=1)
    return make_event(payload, source=f"agent/{node_id}", occurred_at=NOW)
