"""Which executor reports end a task: the cell's rule, folded from the decisions alone.

A task's life has several runs: each placement, probe, resize or migration starts
one under its decision id, and a preemption, a requeue or a newer run stops it.
The executor reports on a run by that id, and its reports arrive after the fact:
the ``TaskFailed(killed)`` that confirms a preemption lands after the task was
placed again, a finish of a moved run after the move. The cell ignores a report
about a run it already stopped or replaced, takes a kill report answering its
preemption as a confirmation, and queues a task whose run was lost to its GPU or
node again instead of failing it. A fold that took every report as the end of the
task counted a preempted task failed that went on to finish, and released the
booking of its new run with the old run's report. A report about the current run
counts only from the node that run is on and when it names the run: the cell refuses
any other (``TaskRejected`` ``not_placed_here``), since a node could otherwise end a
task running on another node and free a booking still in use.

Kept apart from the invariant fold so the rule is in one place; independent of
``streams.core`` like the rest of the checker (the test of this module holds the
requeued failures equal to the core's).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Literal

REQUEUED_FAILURES = frozenset({"gpu_failed", "node_failed", "lost"})
"""Failures that are the node's fault, not the task's: the task is queued again."""

Outcome = Literal["ends", "requeues", "confirms_preemption", "stale", "not_placed_here"]
"""What one finish or failure report does to its task."""

KEPT = 4
"""How many stopped runs and preemptions a task remembers (the cell keeps as many:
reports arrive soon after a stop)."""


@dataclass
class TaskRuns:
    """The run each task is on, and the runs and preemptions that stopped earlier ones."""

    current: dict[str, str] = field(default_factory=dict)
    """task -> the decision id of the run it is on."""
    nodes: dict[str, tuple[str, ...]] = field(default_factory=dict)
    """task -> the nodes its current run is on (a gang's members', rank 0 first)."""
    stopped: dict[str, list[str]] = field(default_factory=lambda: defaultdict(list))
    """task -> the runs the cell stopped (preempted, lost), most recent last."""
    kills: dict[str, list[str]] = field(default_factory=lambda: defaultdict(list))
    """task -> the preemptions that stopped it, whose kill reports confirm them."""

    def started(self, task: str, decision_id: str, *nodes: str) -> None:
        """A placement, probe, resize or migration: the task's run is now ``decision_id``
        on ``nodes`` (one, or each member's of a gang: any of them may report it)."""
        self.current[task] = decision_id
        self.nodes[task] = nodes

    def stop(self, task: str) -> None:
        """The cell stopped the task's run (requeued it): that run's reports are stale."""
        run = self.current.pop(task, None)
        self.nodes.pop(task, None)
        if run is not None:
            _remember(self.stopped[task], run)

    def preempted(self, task: str, decision_id: str) -> None:
        """A preemption stopped the run; its kill report names ``decision_id``."""
        self.stop(task)
        _remember(self.kills[task], decision_id)

    def outcome(self, task: str, decision_id: str | None, failure: str | None,
                node: str | None = None) -> Outcome:
        """What a report from ``node`` on run ``decision_id`` does: a finish (``failure``
        None) or a failure with that reason code. ``not_placed_here``: the task's current
        run is on another node, or the report names no run; the cell refuses it."""
        if failure == "killed" and decision_id in self.kills.get(task, ()):
            return "confirms_preemption"
        run = self.current.get(task)
        if decision_id is not None and (decision_id in self.stopped.get(task, ())
                                        or (run is not None and run != decision_id)):
            return "stale"
        if run is not None and (decision_id is None or node not in self.nodes.get(task, ())):
            return "not_placed_here"
        return "requeues" if failure in REQUEUED_FAILURES else "ends"


def _remember(ids: list[str], decision_id: str) -> None:
    ids.append(decision_id)
    del ids[:-KEPT]
