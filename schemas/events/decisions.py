"""Scheduler decisions: what the pure core emits and executors act on.

Every decision carries ``decision_id`` (deterministic, so replay reproduces it
bit for bit and executors can apply it at most once) and ``cause_event_id``
(the input event that led to it), plus a reason an operator can audit.
"""

from __future__ import annotations

from typing import ClassVar, Literal, Self

from pydantic import Field, model_validator

from schemas.events.base import (
    Event,
    EventId,
    Name,
    NodeId,
    NonNegFloat,
    NonNegInt,
    ShareMilli,
    StrictModel,
    TaskId,
)
from schemas.events.task import ExecutorSpec


class GpuAssignment(StrictModel):
    """One GPU (or a share of it) given to a task."""

    index: NonNegInt
    uuid: Name | None = None
    share_milli: ShareMilli = 1000
    memory_mib: NonNegInt | None = None
    """GPU memory reserved on this GPU; None for the whole GPU."""


class Candidate(StrictModel):
    """One scored placement option, kept so the choice can be explained."""

    node_id: NodeId
    gpu_indices: list[NonNegInt]
    score: float
    """Weighted total."""
    terms: dict[str, float]
    """Each policy's weighted score term, by policy name; they sum to ``score``."""


class DecisionReason(StrictModel):
    """Why the decision was taken: a code, a sentence, and the evidence."""

    code: Name
    """Machine-readable reason, e.g. ``best_score``, ``util_high``, ``gpu_failed``."""
    message: str = ""
    candidates: list[Candidate] = Field(default_factory=list)
    """Top candidates, best first; the first is the one chosen when placing."""
    metrics: dict[str, float] = Field(default_factory=dict)
    """Observed values behind the decision (e.g. ``gpu_util_pct``: 97.0)."""


class Decision(Event):
    """Fields every decision has."""

    decision_id: EventId
    cause_event_id: EventId
    task_id: TaskId


class TaskPlaced(Decision):
    """Run the task on these GPUs of this node."""

    EVENT_TYPE: ClassVar[str] = "TaskPlaced"
    node_id: NodeId
    gpus: list[GpuAssignment]
    cpu_milli: NonNegInt = 0
    memory_mib: NonNegInt = 0
    executor: ExecutorSpec
    """Copied from the submission so the executor needs no other topic."""
    reason: DecisionReason


class GangMember(StrictModel):
    """One member of a gang: its rank, its node and its whole GPUs."""

    rank: NonNegInt
    """0 is the first member: frameworks take its node as the rendezvous address."""
    node_id: NodeId
    gpus: list[GpuAssignment]


class TaskPlacedV2(TaskPlaced):
    """Version 2: a gang's placement, every member in one decision (rank order).

    ``node_id`` and ``gpus`` are rank 0's, so a reader of version 1's fields sees
    the first member. One-node placements stay version 1.
    """

    EVENT_VERSION: ClassVar[int] = 2
    members: list[GangMember] = Field(default_factory=list)
    """Every member, rank order; empty (or absent) reads as a one-node placement."""

    @model_validator(mode="after")
    def _members_are_a_gang(self) -> Self:
        if len(self.members) == 1:
            raise ValueError("members: a gang has at least 2 (leave it empty for one node)")
        return self


class TaskProbe(Decision):
    """Run a task of unknown features on a small allocation to classify it."""

    EVENT_TYPE: ClassVar[str] = "TaskProbe"
    node_id: NodeId
    gpus: list[GpuAssignment]
    cpu_milli: NonNegInt = 0
    memory_mib: NonNegInt = 0
    probe_duration_s: NonNegFloat
    """How long to observe before the scheduler re-decides."""
    executor: ExecutorSpec
    reason: DecisionReason


class TaskResized(Decision):
    """Change an elastic task's GPUs in place (scale up or down)."""

    EVENT_TYPE: ClassVar[str] = "TaskResized"
    node_id: NodeId
    gpus: list[GpuAssignment]
    """The full new assignment (not a delta)."""
    direction: Literal["up", "down"]
    reason: DecisionReason


class TaskMigrating(Decision):
    """Stop the task on one node and start it on another."""

    EVENT_TYPE: ClassVar[str] = "TaskMigrating"
    from_node_id: NodeId
    from_gpus: list[GpuAssignment]
    to_node_id: NodeId
    to_gpus: list[GpuAssignment]
    executor: ExecutorSpec
    reason: DecisionReason


class TaskPreempted(Decision):
    """Stop the task to make room; it goes back to the queue if ``requeue``."""

    EVENT_TYPE: ClassVar[str] = "TaskPreempted"
    node_id: NodeId
    by_task_id: TaskId | None = None
    requeue: bool = True
    grace_s: NonNegFloat = 0.0
    reason: DecisionReason


class PolicyVerdict(StrictModel):
    """One policy's refusal (Kubernetes-style status: code, reasons, plugin)."""

    policy: Name
    code: Literal["unschedulable", "unschedulable_and_unresolvable", "error"]
    reasons: list[str] = Field(default_factory=list)
    nodes: NonNegInt = 0
    """How many nodes this policy filtered out."""


class TaskUnschedulable(Decision):
    """No feasible placement now; says why, policy by policy."""

    EVENT_TYPE: ClassVar[str] = "TaskUnschedulable"
    resolvable: bool
    """False when no change of cluster state (e.g. preemption) could help."""
    verdicts: list[PolicyVerdict]
    nodes_considered: NonNegInt = 0
    message: str = ""


TASK_ID_IN_USE = "task_id_in_use"
"""``TaskRejected.reason.code`` of a submission whose task id is taken."""
NOT_PLACED_HERE = "not_placed_here"
"""``TaskRejected.reason.code`` of a status report from a node the task is not placed on."""


class TaskRejected(Decision):
    """An input refused before it changed anything: a submission whose task id is
    already taken, or a node's status report about a task not placed on that node.

    ``reason.code`` says which. ``task_id_in_use``: ``task_id`` is the id the
    submission asked for; the task that holds that id goes on untouched.
    ``reason.message`` names the task holding the id and its state only when the
    submission comes from that task's own tenant; any other tenant is told only that
    the id is in use, nothing of a task that is not its own. ``cause_event_id`` is the
    rejected submission's event id (a submitter recognises the answer to its own
    submission by it). ``not_placed_here``: a ``TaskFinished`` or ``TaskFailed``
    (``cause_event_id``) from a node the task is not placed on, or naming no decision
    of its placement; the task goes on untouched. The message names the task and the
    reporting node, not where the task runs (the dead letter of the report tells the
    operators).
    """

    EVENT_TYPE: ClassVar[str] = "TaskRejected"
    reason: DecisionReason
