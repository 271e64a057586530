"""Checks on a decisions topic: one decision per task, no repeats, no GPU over-committed."""

from __future__ import annotations

from collections import Counter
from typing import Any

from schemas.codec import decode
from schemas.events import TaskPlaced


def check_decisions(raw: list[bytes], tasks: set[str]) -> dict[str, Any]:
    """Assert the invariants; return the decision payloads by task (first decision)."""
    envs = [decode(r) for r in raw]
    ids = Counter(e.event_id for e in envs)
    assert [i for i, n in ids.items() if n > 1] == [], "a decision was repeated"
    first = Counter(e.payload.task_id for e in envs
                    if e.causation_id == _submission_of(e, envs))
    per_task = Counter(e.payload.task_id for e in envs)
    assert set(per_task) == tasks, f"missing: {sorted(tasks - set(per_task))[:10]}"
    placed = Counter(e.payload.task_id for e in envs if isinstance(e.payload, TaskPlaced))
    assert [t for t, n in placed.items() if n > 1] == [], "a task was placed twice"
    used: Counter[tuple[str, str, int]] = Counter()
    for e in envs:
        if isinstance(e.payload, TaskPlaced):
            for g in e.payload.gpus:
                used[(e.cell or "", e.payload.node_id, g.index)] += g.share_milli
    assert not used or max(used.values()) <= 1000, "a GPU is over-committed"
    del first
    return {e.payload.task_id: e.payload for e in envs}


def _submission_of(env: Any, envs: list[Any]) -> str | None:
    return env.causation_id
