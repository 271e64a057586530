"""Outputs of the core: what was decided, why, and which input caused it.

``decision_id`` is ``<cause event_id>/<n>`` (n = position among the decisions
of that event): deterministic, so replay reproduces it and executors can be
idempotent on it. ``Placement`` and ``Released`` are also facts that
``evolve`` applies; ``Unschedulable`` and ``Rejected`` change nothing.
"""

from __future__ import annotations

from dataclasses import dataclass

from streams.core.policy import Verdict
from streams.core.scheduler import Reason


@dataclass(frozen=True, slots=True)
class Placement:
    """Run ``task`` on ``node`` with ``share_milli`` of each GPU in ``gpus``.

    A gang (streams.core.gang) has ``members``: every member's node and whole GPUs
    in rank order, all placed by this one decision; ``node`` and ``gpus`` are then
    rank 0's, and ``cpu_milli``/``memory_mib`` are asked on every member's node.
    """

    decision_id: str
    cause_id: str
    task: str
    node: str
    gpus: tuple[int, ...]
    share_milli: int
    cpu_milli: int
    memory_mib: int
    fractional: bool
    reason: Reason | None
    members: tuple[tuple[str, tuple[int, ...]], ...] = ()
    why: str = ""
    """A gang's placement rule in words (streams.core.gang.GangPlan.why)."""
    predicted_s: float | None = None
    """The run time predicted for a task that declares none (streams.core.predictor)."""
    prediction: str = ""
    """That prediction and its basis in words, e.g. "predicted 12 min (p50 of 48 past
    runs of tenant t's 'resnet50')"; "" when nothing was predicted."""
    speed: str = ""
    """Why this GPU model, when the cell knew the task's class's speeds (issue 35), e.g.
    "speed: 2.3x as fast on V100M32 as on T4 for 'resnet50' (V100M32: filled from the
    catalog's figures for V100M32; T4: p50 of 1 measurement)"; "" otherwise."""
    speed_vs_fastest: float | None = None
    """The task's speed on this model against its fastest known one (1.0 there)."""


@dataclass(frozen=True, slots=True)
class Unschedulable:
    """No node can take ``task`` now; ``verdict`` says which constraints ruled nodes out."""

    decision_id: str
    cause_id: str
    task: str
    verdict: Verdict
    reason: Reason | None


@dataclass(frozen=True, slots=True)
class Released:
    """``task`` ended; its resources on ``node`` are free again."""

    decision_id: str
    cause_id: str
    task: str
    node: str
    gpus: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class Rejected:
    """An input was invalid (e.g. duplicate node, unknown task); nothing changed."""

    decision_id: str
    cause_id: str
    reason: str


Decision = Placement | Unschedulable | Released | Rejected
