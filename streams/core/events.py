"""Inputs of the core: small frozen records, one per kind of fact the scheduler sees.

They mirror the schema events (``schemas``: NodeRegistered, TaskSubmitted,
TaskFinished, TaskCancelled, ...) with only the fields decisions depend on,
so the service's adapter is a field-for-field mapping. ``event_id`` is the
input log's id of the event; decision ids derive from it.
"""

from __future__ import annotations

from dataclasses import dataclass

from streams.core.request import TaskRequest


@dataclass(frozen=True, slots=True)
class NodeAdded:
    """A node registered: its capacity and GPU model (``tiebreak_rank``: see scheduler)."""

    event_id: str
    node: str
    cpu_milli: int
    memory_mib: int
    gpu_count: int = 0
    gpu_model: str | None = None
    tiebreak_rank: int | None = None
    rack: str | None = None
    """Rack id from registration (locality); None: derived by ``topology.default_rack``."""


@dataclass(frozen=True, slots=True)
class NodeHealthChanged:
    """A node became unhealthy (no new placements) or healthy again."""

    event_id: str
    node: str
    healthy: bool


@dataclass(frozen=True, slots=True)
class TaskArrived:
    """A task was submitted and needs a placement."""

    event_id: str
    request: TaskRequest


@dataclass(frozen=True, slots=True)
class TaskEnded:
    """A task finished or was cancelled: its resources return to the node."""

    event_id: str
    task: str
    cancelled: bool = False


@dataclass(frozen=True, slots=True)
class LinkMeasured:
    """Bandwidth and latency measured from ``node`` to ``peer`` (a node, or a rack if
    ``scope`` is ``rack``): the ``LinkMetrics`` event. Prices data transfers (locality)."""

    event_id: str
    node: str
    peer: str
    scope: str
    bandwidth_gbps: float
    latency_us: float


Event = NodeAdded | NodeHealthChanged | TaskArrived | TaskEnded | LinkMeasured
