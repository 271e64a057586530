"""What the dashboard shows besides the cells: decisions, telemetry, tenants, history.

Filled by a read-committed consumer of this deployment's decisions, telemetry
and tasks topics (its own, group-less, so it never joins the scheduler's
consumer group), and by a sampler of the owned cells every two seconds.
"""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from streams.core.request import MILLI_PER_GPU


def explain(payload: Any) -> str:
    """A one-line reason: the decision's code and message, or the refusing verdicts."""
    kind = type(payload).__name__
    if kind == "TaskUnschedulable":
        why = "; ".join(r for v in payload.verdicts for r in v.reasons) or payload.message
        return ("queued: " if payload.resolvable else "refused: ") + why
    reason = getattr(payload, "reason", None)
    return "" if reason is None else f"{reason.code} {reason.message}".strip()


def candidates(payload: Any) -> list[dict[str, Any]]:
    reason = getattr(payload, "reason", None)
    if reason is None:
        return []
    return [{"node": c.node_id, "gpus": c.gpu_indices, "score": round(c.score, 4),
             "terms": {k: round(v, 4) for k, v in c.terms.items()}}
            for c in reason.candidates[:3]]


@dataclass
class Feed:
    decisions: deque[dict[str, Any]] = field(default_factory=lambda: deque(maxlen=50))
    telemetry: dict[str, dict[str, float]] = field(default_factory=dict)
    tenants: dict[str, str] = field(default_factory=dict)
    history: deque[dict[str, float]] = field(default_factory=lambda: deque(maxlen=900))
    placed: int = 0

    def note(self, envelope: Any) -> None:
        p, kind = envelope.payload, envelope.type
        if kind == "GpuTelemetry":
            self.telemetry[f"{p.node_id}/{p.gpu_index}"] = {
                "util": p.gpu_util_pct, "temp": p.temperature_c}
        elif kind == "TaskSubmitted":
            self.tenants[p.task_id] = p.tenant
        elif hasattr(p, "decision_id") and kind.startswith("Task"):
            if kind == "TaskPlaced":
                self.placed += 1
            node = getattr(p, "node_id", None) or getattr(p, "to_node_id", None)
            gpus = getattr(p, "gpus", None) or getattr(p, "to_gpus", None) or []
            self.decisions.appendleft({
                "at": envelope.occurred_at.isoformat(), "type": kind, "task": p.task_id,
                "tenant": self.tenants.get(p.task_id, ""), "node": node,
                "gpus": [{"index": g.index, "share_milli": g.share_milli} for g in gpus],
                "reason": explain(p), "candidates": candidates(p)})

    def sample(self, nodes: list[dict[str, Any]], queue: int) -> None:
        used = [u for n in nodes for u in n["gpus_used_milli"]]
        share = sum(used) / (MILLI_PER_GPU * len(used)) if used else 0.0
        self.history.append({"t": time.time(), "allocation": round(share, 4), "queue": queue})
