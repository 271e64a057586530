"""Every event of the integration API, registered by (type, version).

Import models from here (or from ``schemas``). Adding an event: define it in
the right module, add it to ``EVENT_MODELS``, run ``python -m schemas.generate``
and add a fixture under ``tests/schemas/fixtures/``.
"""

from __future__ import annotations

from schemas.events.base import Event, StrictModel, UtcDatetime
from schemas.events.clock import Tick
from schemas.events.decisions import (
    Candidate,
    Decision,
    DecisionReason,
    GangMember,
    GpuAssignment,
    PolicyVerdict,
    TaskMigrating,
    TaskPlaced,
    TaskPlacedV2,
    TaskPreempted,
    TaskProbe,
    TaskRejected,
    TaskResized,
    TaskUnschedulable,
)
from schemas.events.envelope import (
    Envelope,
    known_versions,
    make_event,
    message_model,
    register,
    registered,
)
from schemas.events.node import (
    GpuFailed,
    GpuSpec,
    GpuTelemetry,
    LinkMetrics,
    NodeDraining,
    NodeFailed,
    NodeHeartbeat,
    NodeLeft,
    NodeRegistered,
    ThresholdCrossing,
)
from schemas.events.status import (
    GpuUsage,
    TaskFailed,
    TaskFinished,
    TaskOverUse,
    TaskStarted,
    TaskUsage,
)
from schemas.events.task import (
    DataInput,
    ElasticRange,
    ExecutorSpec,
    GangResourceRequest,
    ResourceRequest,
    SimulatedWork,
    TaskCancelled,
    TaskFeatures,
    TaskSubmitted,
    TaskSubmittedV2,
    TaskSubmittedV3,
)

EVENT_MODELS: tuple[type[Event], ...] = (
    NodeRegistered,
    NodeHeartbeat,
    NodeDraining,
    NodeFailed,
    NodeLeft,
    GpuTelemetry,
    GpuFailed,
    LinkMetrics,
    TaskSubmitted,
    TaskSubmittedV2,
    TaskSubmittedV3,
    TaskCancelled,
    TaskPlaced,
    TaskPlacedV2,
    TaskResized,
    TaskMigrating,
    TaskPreempted,
    TaskProbe,
    TaskUnschedulable,
    TaskRejected,
    TaskStarted,
    TaskUsage,
    TaskOverUse,
    TaskFinished,
    TaskFailed,
    Tick,
)
"""Every payload model, every version; the registry is built from this."""

for _model in EVENT_MODELS:
    register(_model)

__all__ = [
    "EVENT_MODELS",
    "Candidate",
    "DataInput",
    "Decision",
    "DecisionReason",
    "ElasticRange",
    "Envelope",
    "Event",
    "ExecutorSpec",
    "GangMember",
    "GangResourceRequest",
    "GpuAssignment",
    "GpuFailed",
    "GpuSpec",
    "GpuTelemetry",
    "GpuUsage",
    "LinkMetrics",
    "NodeDraining",
    "NodeFailed",
    "NodeHeartbeat",
    "NodeLeft",
    "NodeRegistered",
    "PolicyVerdict",
    "ResourceRequest",
    "SimulatedWork",
    "StrictModel",
    "TaskCancelled",
    "TaskFailed",
    "TaskFeatures",
    "TaskFinished",
    "TaskMigrating",
    "TaskOverUse",
    "TaskPlaced",
    "TaskPlacedV2",
    "TaskPreempted",
    "TaskProbe",
    "TaskRejected",
    "TaskResized",
    "TaskStarted",
    "TaskSubmitted",
    "TaskSubmittedV2",
    "TaskSubmittedV3",
    "TaskUnschedulable",
    "TaskUsage",
    "ThresholdCrossing",
    "Tick",
    "UtcDatetime",
    "known_versions",
    "make_event",
    "message_model",
    "register",
    "registered",
]
