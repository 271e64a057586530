"""A sound recorded run and small doctoring helpers for the invariant-checker tests."""

from __future__ import annotations

from typing import Any

from schemas.codec import decode, encode
from schemas.events import Envelope, Event, make_event
from streams.audit.records import Record
from streams.audit.workload import T0, Recording, node_event, record_run
from streams.core.request import TaskRequest
from streams.profiles.service import service_scheduler

PREFIX = "t."
NODES = (
    ("node-a100-0", 64000, 524288, 8, "A100"),
    ("node-t4-0", 16000, 131072, 2, "T4"),
)


def recorded(n: int = 30) -> Recording:
    shapes = ((1, 250, ()), (1, 500, ()), (1, 1000, ()), (2, 1000, ()), (8, 1000, ("H100",)))
    tasks = [TaskRequest(f"task-{i:03d}", 2000, 8192, *shapes[i % len(shapes)])
             for i in range(n)]
    return record_run(NODES, tasks, service_scheduler("hetsched"), running_limit=6,
                      tick_every=10, prefix=PREFIX)


def envelopes(records: list[Record], type_: str) -> list[Envelope[Any]]:
    out = []
    for r in records:
        env = decode(r.value or b"")
        if isinstance(env, Envelope) and env.type == type_:
            out.append(env)
    return out


def append(records: list[Record], topic: str, env: Envelope[Any], partition: int = 0) -> None:
    """Append ``env`` at the end of ``topic`` (catalog name), keyed by its cell."""
    name = PREFIX + topic
    offset = 1 + max((r.offset for r in records if r.topic == name and r.partition == partition),
                     default=-1)
    records.append(Record(name, partition, offset, None, (env.cell or "cell-0").encode(),
                          encode(env)))


def event(payload: Event, seed: str, *, cell: str | None = "cell-0",
          causation_id: str | None = None, event_id: str | None = None) -> Envelope[Any]:
    return make_event(payload, source="test", occurred_at=T0, cell=cell,
                      causation_id=causation_id, id_seed=seed, event_id=event_id)


__all__ = ["NODES", "PREFIX", "append", "envelopes", "event", "node_event", "recorded"]
