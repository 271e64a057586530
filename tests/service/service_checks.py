"""Checks on a decisions topic: at most one decision per submission, one placement per
task, no repeats, no GPU over-committed."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

from schemas.codec import decode
from schemas.events import TaskPlaced


def check_decisions(raw: list[bytes], submissions: Sequence[Any]) -> dict[str, Any]:
    """Assert the invariants over the decisions ``raw`` for the ``submissions`` (their
    envelopes); return the decision payloads by task (the last decision of each).

    A submission is decided once: the decisions it caused (``causation_id`` = its
    event id) name its task at most once, however often a worker restarted while
    it was in flight; later decisions of the task (a placement when capacity
    frees) have other causes.
    """
    envs = [decode(r) for r in raw]
    tasks = {s.payload.task_id for s in submissions}
    submitted_as = {s.payload.task_id: s.event_id for s in submissions}
    ids = Counter(e.event_id for e in envs)
    assert [i for i, n in ids.items() if n > 1] == [], "a decision was repeated"
    on_submission = Counter(e.payload.task_id for e in envs
                            if e.causation_id == submitted_as.get(e.payload.task_id))
    assert on_submission, "no decision names its task's submission as its cause"
    assert [t for t, n in on_submission.items() if n > 1] == [], \
        "a submission was decided more than once"
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
    return {e.payload.task_id: e.payload for e in envs}
