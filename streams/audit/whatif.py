"""What-if: replay the same input log with another profile and compare the outcomes.

Both runs (the recorded profile and the alternative) go through
:func:`streams.replay.replay` with a :class:`Metrics` observer. Decisions are
compared by what an executor would do (kind, task, node, GPUs and shares), not
by bytes, since the reasons differ by construction. Metrics:

* placements and unschedulable decisions (and tasks that were never placed);
* mean queueing delay: submission ``occurred_at`` to placement ``occurred_at``
  (event time: the only clock the core has), over tasks placed;
* GPU allocation ratio over time: allocated GPU share / all GPUs of the cells,
  sampled after every input, averaged over event time (time-weighted) and as
  a few points across the run.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from schemas.events import Envelope, Event, TaskPlaced, TaskSubmitted, TaskUnschedulable
from streams.core.cell import Cell

SERIES_POINTS = 10


@dataclass
class Metrics:
    """Observer of a replay (see the module docstring)."""

    placements: int = 0
    unschedulable: int = 0
    submitted_at: dict[str, datetime] = field(default_factory=dict)
    delays_s: list[float] = field(default_factory=list)
    placed_tasks: set[str] = field(default_factory=set)
    actions: list[tuple[str, ...]] = field(default_factory=list)
    samples: list[tuple[float, float]] = field(default_factory=list)
    _alloc: dict[str, tuple[int, int]] = field(default_factory=dict)

    def __call__(self, env: Envelope[Any], cell: Cell, decisions: list[Envelope[Event]]) -> None:
        p = env.payload
        if isinstance(p, TaskSubmitted):
            self.submitted_at.setdefault(p.task_id, env.occurred_at)
        for d in decisions:
            dp = d.payload
            self.actions.append(action(d))
            if isinstance(dp, TaskPlaced):
                self.placements += 1
                self.placed_tasks.add(dp.task_id)
                sub = self.submitted_at.get(dp.task_id)
                if sub is not None:
                    self.delays_s.append((d.occurred_at - sub).total_seconds())
            elif isinstance(dp, TaskUnschedulable):
                self.unschedulable += 1
        s = cell.state
        self._alloc[cell.name] = (s.allocated_gpu_milli, s.total_gpus * 1000)
        used = sum(a for a, _ in self._alloc.values())
        total = sum(t for _, t in self._alloc.values())
        self.samples.append((env.occurred_at.timestamp(), used / total if total else 0.0))

    def summary(self) -> dict[str, Any]:
        return {
            "decisions": len(self.actions),
            "placements": self.placements,
            "unschedulable_decisions": self.unschedulable,
            "never_placed": len(set(self.submitted_at) - self.placed_tasks),
            "mean_queueing_delay_s": round(sum(self.delays_s) / len(self.delays_s), 3)
            if self.delays_s else 0.0,
            "mean_allocation_ratio": round(self.mean_allocation(), 4),
            "allocation_ratio_series": [round(v, 4) for v in self.series()],
        }

    def mean_allocation(self) -> float:
        """Time-weighted mean (event time), over samples in log order."""
        pts = sorted(self.samples)
        if len(pts) < 2 or pts[-1][0] == pts[0][0]:
            return pts[-1][1] if pts else 0.0
        area = sum((b[0] - a[0]) * a[1] for a, b in itertools.pairwise(pts))
        return area / (pts[-1][0] - pts[0][0])

    def series(self) -> list[float]:
        pts = sorted(self.samples)
        if not pts:
            return []
        step = max(1, len(pts) // SERIES_POINTS)
        return [v for _, v in pts[step - 1::step]][:SERIES_POINTS]


def action(d: Envelope[Event]) -> tuple[str, ...]:
    """What an executor would do with a decision: kind, task, node, GPUs/shares."""
    p: Any = d.payload
    gpus = ",".join(f"{g.index}:{g.share_milli}" for g in getattr(p, "gpus", []))
    return (d.type, p.task_id, str(getattr(p, "node_id", "")), gpus)


def compare(base: Metrics, alt: Metrics) -> dict[str, Any]:
    """How many decisions differ (by position), and each metric side by side."""
    a, b = base.actions, alt.actions
    differ = sum(1 for x, y in zip(a, b, strict=False) if x != y) + abs(len(a) - len(b))
    s1, s2 = base.summary(), alt.summary()
    return {"decisions_differ": differ, "baseline": s1, "what_if": s2,
            "delta": {k: round(s2[k] - s1[k], 4) for k in s1
                      if isinstance(s1[k], int | float) and not isinstance(s1[k], bool)}}
