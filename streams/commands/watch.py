"""Wait for decisions on given tasks (used by ``hetsched submit --wait``)."""

from __future__ import annotations

import time
from typing import Any

from streams.settings import WorkerSettings


def describe(payload: Any) -> str:
    """One line per decision, e.g. ``job-1: TaskPlaced on node-a gpus 0,1``."""
    kind = type(payload).__name__
    if hasattr(payload, "gpus") and hasattr(payload, "node_id"):
        gpus = ",".join(f"{g.index}" + (f"@{g.share_milli}m" if g.share_milli < 1000 else "")
                        for g in payload.gpus)
        return f"{payload.task_id}: {kind} on {payload.node_id} gpus {gpus or '-'}"
    if kind == "TaskUnschedulable":
        why = "; ".join(r for v in payload.verdicts for r in v.reasons)
        state = "queued" if payload.resolvable else "refused"
        return f"{payload.task_id}: {kind} ({state}) {why}"
    return f"{payload.task_id}: {kind}"


async def wait_for_decisions(settings: WorkerSettings, tasks: set[str], timeout_s: float) -> int:
    from aiokafka import AIOKafkaConsumer

    from schemas.codec import decode
    from schemas.deadletter import DeadLetter
    from schemas.kafka import aiokafka_kwargs
    from schemas.topics import DECISIONS

    consumer = AIOKafkaConsumer(settings.topic(DECISIONS), bootstrap_servers=settings.bootstrap,
                                group_id=None, auto_offset_reset="earliest",
                                isolation_level="read_committed", enable_auto_commit=False,
                                **aiokafka_kwargs())
    await consumer.start()
    waiting = set(tasks)
    deadline = time.monotonic() + timeout_s
    try:
        while waiting and time.monotonic() < deadline:
            for records in (await consumer.getmany(timeout_ms=300)).values():
                for r in records:
                    env = decode(r.value)
                    if isinstance(env, DeadLetter):
                        continue
                    task = getattr(env.payload, "task_id", None)
                    if task in waiting:
                        print(describe(env.payload))
                        waiting.discard(task)
    finally:
        await consumer.stop()
    for task in sorted(waiting):
        print(f"{task}: no decision within {timeout_s:.0f}s")
    return 1 if waiting else 0
