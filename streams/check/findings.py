"""What the invariant checker reports: violations by invariant, and task accounting.

Kept apart from the fold so the CLI, the chaos harness and the tests share one
report shape (and its JSON form) without importing the checking logic.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

OVER_COMMIT = "gpu_over_commit"
DOUBLE_PLACEMENT = "task_placed_twice"
LOST_TASK = "task_lost"
DUPLICATE_APPLY = "decision_applied_twice"
MEMBERSHIP = "decision_to_absent_node"
DUPLICATE_DECISION = "duplicate_decision"
PHANTOM_START = "start_without_decision"
ENDED_BY_OTHER_NODE = "task_ended_by_other_node"
GANG_MALFORMED = "gang_malformed"

INVARIANTS = (OVER_COMMIT, DOUBLE_PLACEMENT, LOST_TASK, DUPLICATE_APPLY, MEMBERSHIP,
              DUPLICATE_DECISION, PHANTOM_START, ENDED_BY_OTHER_NODE, GANG_MALFORMED)
"""Every invariant the checker enforces; a report lists each, even when it holds."""

TERMINAL = ("finished", "failed", "cancelled", "unschedulable", "refused")
STATES = ("queued", "running", *TERMINAL, "in_flight", "lost")
"""A submitted task's final state. ``refused``: its submission was dead-lettered (a
forged tenant, a bad signature, a body that does not validate...), never lost.
``in_flight``: submitted but not yet in a cell's log or not yet decided on a live
cluster; a settled run turns it into ``lost``."""


@dataclass(frozen=True)
class Violation:
    invariant: str
    message: str
    cell: str | None = None
    task_id: str | None = None

    def __str__(self) -> str:
        where = f"[{self.cell}] " if self.cell else ""
        return f"{self.invariant}: {where}{self.message}"


@dataclass
class Report:
    violations: list[Violation] = field(default_factory=list)
    task_states: dict[str, str] = field(default_factory=dict)
    """task id -> one of ``STATES``."""
    failure_reasons: Counter[str] = field(default_factory=Counter)
    refused_reasons: Counter[str] = field(default_factory=Counter)
    """Why the ``refused`` tasks' submissions were dead-lettered, by reason."""
    counts: Counter[str] = field(default_factory=Counter)
    """What was read: records per kind, decisions, starts, undecodable records."""
    max_share_milli: int = 0
    """The highest booking of any one GPU seen at any point (<= 1000 when sound)."""

    @property
    def ok(self) -> bool:
        return not self.violations

    def add(self, invariant: str, message: str, cell: str | None = None,
            task_id: str | None = None) -> None:
        self.violations.append(Violation(invariant, message, cell, task_id))

    def by_invariant(self) -> dict[str, int]:
        found = Counter(v.invariant for v in self.violations)
        return {name: found.get(name, 0) for name in INVARIANTS}

    def states(self) -> dict[str, int]:
        found = Counter(self.task_states.values())
        return {name: found.get(name, 0) for name in STATES}

    def to_json(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "invariants": self.by_invariant(),
            "tasks": {"submitted": len(self.task_states), **self.states()},
            "failure_reasons": dict(sorted(self.failure_reasons.items())),
            "refused_reasons": dict(sorted(self.refused_reasons.items())),
            "max_share_milli": self.max_share_milli,
            "counts": dict(sorted(self.counts.items())),
            "violations": [{"invariant": v.invariant, "cell": v.cell, "task_id": v.task_id,
                            "message": v.message} for v in self.violations[:200]],
        }

    def render(self, limit: int = 20) -> str:
        lines = [f"invariants: {'all hold' if self.ok else 'VIOLATED'}"]
        for name, n in self.by_invariant().items():
            lines.append(f"  {name:<26} {'ok' if n == 0 else f'{n} violation(s)'}")
        states = self.states()
        lines.append(f"tasks: {len(self.task_states)} submitted: "
                     + ", ".join(f"{k} {v}" for k, v in states.items() if v))
        if self.failure_reasons:
            lines.append("  failed by reason: " + ", ".join(
                f"{k} {v}" for k, v in sorted(self.failure_reasons.items())))
        if self.refused_reasons:
            lines.append("  refused by reason: " + ", ".join(
                f"{k} {v}" for k, v in sorted(self.refused_reasons.items())))
        lines.append(f"max GPU booking seen: {self.max_share_milli} milli")
        for v in self.violations[:limit]:
            lines.append(f"  - {v}")
        if len(self.violations) > limit:
            lines.append(f"  ... {len(self.violations) - limit} more")
        return "\n".join(lines)
