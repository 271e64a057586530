"""Task status reported by node executors after acting on a decision."""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field

from schemas.events.base import (
    Event,
    EventId,
    NodeId,
    NonNegFloat,
    NonNegInt,
    Pct,
    PosFloat,
    StrictModel,
    TaskId,
)


class TaskStarted(Event):
    """The executor started the task as decided by ``decision_id``."""

    EVENT_TYPE: ClassVar[str] = "TaskStarted"
    task_id: TaskId
    node_id: NodeId
    decision_id: EventId
    gpu_indices: list[NonNegInt] = Field(default_factory=list)


class GpuUsage(StrictModel):
    """What the task used of one GPU over the window."""

    gpu_index: NonNegInt
    gpu_util_pct: Pct
    mem_used_mib: NonNegInt


class TaskUsage(Event):
    """Observed utilisation of a running task, for probing and resizing."""

    EVENT_TYPE: ClassVar[str] = "TaskUsage"
    task_id: TaskId
    node_id: NodeId
    window_s: PosFloat
    """Length of the observation window ending at ``occurred_at``."""
    gpus: list[GpuUsage]
    cpu_milli: NonNegInt | None = None
    memory_mib: NonNegInt | None = None


class TaskProgress(StrictModel):
    """What a task said it has done, in its own unit of work (steps, samples).

    Only ratios of rates mean anything to the scheduler (the same class of task on
    two GPU models), so the unit is the task's; it must be the same unit for every
    run of the task, as docs/node.md's progress file says."""

    units: NonNegFloat
    """Work done since the task first started (a restarted task continues its count)."""
    rate_per_s: NonNegFloat | None = None
    """Units per second between the last two counts the node saw change, the later
    one in this window; absent when the node has seen only one count of this run."""


class TaskUsageV2(TaskUsage):
    """Version 2: the task's progress, when it reports any (issue 35).

    The executor hands every task a file to append its progress count to
    (``HETSCHED_PROGRESS_FILE``; a simulated task counts its simulated work); a
    window in which the count changed carries it here. Usage without progress
    stays version 1."""

    EVENT_VERSION: ClassVar[int] = 2
    progress: TaskProgress | None = None


class TaskOverUse(Event):
    """A running task uses more GPU memory than it booked (node-observed).

    The executor attributes GPU memory to the task's own processes (NVML
    per-process accounting of the pids it launched and their descendants) and
    sends this when the peak over a usage window exceeds the booking by more
    than the node's margin. It makes silent double-booking visible on the bus;
    what to do about it (warn, re-book, move, stop) is the scheduler's policy,
    applied to the ``TaskUsage`` figures of the same window.
    """

    EVENT_TYPE: ClassVar[str] = "TaskOverUse"
    task_id: TaskId
    node_id: NodeId
    decision_id: EventId
    """The run (decision) that booked the memory."""
    gpu_index: NonNegInt
    observed_mib: NonNegInt
    """Peak GPU memory of the task's processes on this GPU over the window."""
    booked_mib: NonNegInt
    """GPU memory the placement reserved on this GPU (share of the GPU's memory
    when the decision gave no explicit reservation)."""
    margin_pct: NonNegFloat
    """Tolerance above the booking the node applied before reporting."""
    pids: list[NonNegInt] = Field(default_factory=list)
    """The task's processes seen on this GPU (host pid namespace)."""


class TaskFinished(Event):
    """The task exited successfully."""

    EVENT_TYPE: ClassVar[str] = "TaskFinished"
    task_id: TaskId
    node_id: NodeId
    decision_id: EventId
    runtime_s: NonNegFloat
    exit_code: int = 0


class TaskFailed(Event):
    """The task could not run or ended in error."""

    EVENT_TYPE: ClassVar[str] = "TaskFailed"
    task_id: TaskId
    node_id: NodeId | None = None
    decision_id: EventId | None = None
    reason: Literal[
        "exit_nonzero", "oom", "gpu_failed", "node_failed", "launch_error", "killed", "lost"
    ]
    exit_code: int | None = None
    message: str = ""
    retryable: bool = False
    runtime_s: NonNegFloat | None = None
