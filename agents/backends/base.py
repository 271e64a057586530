"""The contract between the executor and a backend.

The executor owns decisions, the journal and status events; a backend owns
only "make this task run on these GPUs / stop it". It calls ``on_exit`` once
per run when the task ends on its own or was stopped, with what it knows of
the exit; the executor turns that into ``TaskFinished`` or ``TaskFailed``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from agents.progress import ProgressReading
from schemas.events import ExecutorSpec, GpuAssignment

FailReason = Literal[
    "exit_nonzero", "oom", "gpu_failed", "node_failed", "launch_error", "killed", "lost"
]


@dataclass(frozen=True, slots=True)
class TaskRun:
    """One start of a task on this node (a resize or migration makes a new one)."""

    task_id: str
    decision_id: str
    spec: ExecutorSpec
    gpus: tuple[GpuAssignment, ...]
    cpu_milli: int = 0
    memory_mib: int = 0
    baseline_share_milli: int = 0
    """Total GPU share of the task's first placement: the share its nominal speed
    refers to (a resize up runs faster, down slower). 0 = this run's own share."""
    progress_s: float = 0.0
    """Work already done (simulated seconds), carried over a resize."""
    gang_env: dict[str, str] = field(default_factory=dict)
    """A gang member's rendezvous variables (``agents.executor.gang_environment``):
    ``WORLD_SIZE``, ``RANK``, ``MASTER_ADDR``...; empty for a one-node task."""

    @property
    def gpu_indices(self) -> list[int]:
        return [g.index for g in self.gpus]

    @property
    def share_milli(self) -> int:
        return sum(g.share_milli for g in self.gpus)


@dataclass(frozen=True, slots=True)
class ExitInfo:
    """How a run ended."""

    exit_code: int | None
    """Process convention: 0 ok, 1-127 the task's own code, 128+N killed by signal N."""
    runtime_s: float
    fail_reason: FailReason | None = None
    """Set when the backend knows why (launch error, GPU failure); else inferred."""
    message: str = ""
    extra: dict[str, Any] = field(default_factory=dict)


OnExit = Callable[[TaskRun, ExitInfo], Awaitable[None]]


class LaunchError(Exception):
    """The task cannot be started here (bad command, unsupported kind); say why."""


class Backend(Protocol):
    """Runs tasks of one ``ExecutorSpec.kind``. Every method is idempotent per task id."""

    kind: str

    async def start(self, run: TaskRun) -> None:
        """Start the run; raise :class:`LaunchError` if it cannot start."""
        ...

    async def stop(self, task_id: str, *, grace_s: float, checkpoint: bool) -> ExitInfo | None:
        """Stop the task (checkpoint signal first if asked); return how it ended,
        or None if it was not running. ``on_exit`` is *not* called for it."""
        ...

    def running(self) -> list[str]:
        """Task ids running now."""
        ...

    def usage(self, task_id: str) -> dict[int, tuple[float, float]] | None:
        """GPU index -> (utilisation %, memory MiB) of the task now, if known."""
        ...

    def progress_reading(self, task_id: str) -> ProgressReading | None:
        """The task's own count of its work now (:mod:`agents.progress`), if it has
        reported one."""
        ...

    async def close(self, *, stop_tasks: bool) -> None:
        """Stop watching (and, if asked, stop every task)."""
        ...
