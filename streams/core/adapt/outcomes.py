"""Outcomes of adaptation; the adapter turns each into one schema decision.

``Probed`` -> ``TaskProbe``; ``Resized`` -> ``TaskResized``; ``Migrated`` ->
``TaskMigrating``; ``Evicted`` -> ``TaskPreempted`` (``requeue`` says whether
the cell placed it back in its queue).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from streams.core.decisions import Placement


@dataclass(frozen=True, slots=True)
class Probed:
    placement: Placement
    duration_s: float

    @property
    def task(self) -> str:
        return self.placement.task


@dataclass(frozen=True, slots=True)
class Resized:
    task: str
    node: str
    gpus: tuple[int, ...]
    share_milli: int
    direction: str
    code: str
    metrics: Mapping[str, float] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Migrated:
    task: str
    from_node: str
    from_gpus: tuple[int, ...]
    to_node: str
    to_gpus: tuple[int, ...]
    share_milli: int
    code: str
    message: str = ""
    metrics: Mapping[str, float] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Evicted:
    task: str
    node: str
    code: str
    message: str
    requeue: bool


AdaptOutcome = Probed | Resized | Migrated | Evicted
