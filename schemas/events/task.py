"""Task submissions and cancellations: what users and other teams produce.

A submission states resources, constraints and what it knows about the task;
unknown features (``features`` fields left None) make the scheduler probe the
task on a small allocation first.
"""

from __future__ import annotations

from typing import ClassVar, Literal, Self

from pydantic import Field, field_validator, model_validator

from schemas.events.base import (
    Event,
    Name,
    NonNegInt,
    Pct,
    PosFloat,
    PosInt,
    ShareMilli,
    StrictModel,
    TaskId,
)
from schemas.gpu_catalog import unknown_model_problem

QosClass = Literal["guaranteed", "burstable", "best_effort"]
"""guaranteed: never preempted; burstable: preemptible above its request;
best_effort: preemptible at any time."""


class ResourceRequest(StrictModel):
    """What the task needs. Fractional tasks ask for one GPU with a share < 1000."""

    gpu_count: NonNegInt
    """Whole GPUs wanted (0 for CPU-only tasks, 1 for a fractional task)."""
    gpu_share_milli: ShareMilli = 1000
    """Share of each GPU; below 1000 only with ``gpu_count`` == 1."""
    gpu_memory_mib: PosInt | None = None
    """GPU memory needed on each GPU; None means the whole GPU's (or the share's)."""
    cpu_milli: NonNegInt = 0
    memory_mib: NonNegInt = 0
    gpu_models: list[Name] = Field(default_factory=list)
    """Allowed GPU models, names from the GPU catalog (``schemas/gpu_models.json``, as in
    ``GpuSpec.model``); empty allows any. A name the catalog does not know is refused."""

    @field_validator("gpu_models")
    @classmethod
    def _catalog_models(cls, names: list[str]) -> list[str]:
        problem = unknown_model_problem(names)
        if problem is not None:
            raise ValueError(problem)
        return names

    @model_validator(mode="after")
    def _fractional_is_single_gpu(self) -> Self:
        if self.gpu_share_milli < 1000 and self.gpu_count != 1:
            raise ValueError("gpu_share_milli < 1000 requires gpu_count == 1")
        return self


class ElasticRange(StrictModel):
    """GPU count bounds within which the scheduler may resize the task."""

    min_gpus: PosInt
    max_gpus: PosInt

    @model_validator(mode="after")
    def _ordered(self) -> Self:
        if self.min_gpus > self.max_gpus:
            raise ValueError("min_gpus must be <= max_gpus")
        return self


class TaskFeatures(StrictModel):
    """What the submitter knows of the task's behaviour; None = unknown."""

    profile: Literal["compute", "data", "mixed"] | None = None
    """compute-intensive, data-intensive (memory/IO bound), or mixed."""
    expected_duration_s: PosFloat | None = None
    bursty: bool | None = None


class DataInput(StrictModel):
    """An input dataset and where it lives, for data-locality scoring."""

    uri: Name
    size_mib: NonNegInt
    location: Name | None = None
    """Node id, rack id or storage endpoint holding the data; None if remote/unknown."""


class SimulatedWork(StrictModel):
    """What a simulated executor pretends the task does (tests, sim, benchmarks)."""

    duration_s: PosFloat
    gpu_util_pct: Pct
    gpu_mem_used_mib: NonNegInt
    exit_code: int = 0


class ExecutorSpec(StrictModel):
    """What the node executor runs for the task."""

    kind: Literal["process", "container", "simulated"]
    argv: list[str] = Field(default_factory=list)
    """Command line; required for ``process`` and ``container``."""
    image: str | None = None
    """Container image; required for ``container``."""
    env: dict[str, str] = Field(default_factory=dict)
    workdir: str | None = None
    simulated: SimulatedWork | None = None
    """Required for ``simulated``."""

    @model_validator(mode="after")
    def _complete_for_kind(self) -> Self:
        if self.kind in ("process", "container") and not self.argv:
            raise ValueError(f"argv is required for kind={self.kind!r}")
        if self.kind == "container" and not self.image:
            raise ValueError("image is required for kind='container'")
        if self.kind == "simulated" and self.simulated is None:
            raise ValueError("simulated is required for kind='simulated'")
        return self


class TaskSubmitted(Event):
    """A user or upstream system asks for a task to be scheduled."""

    EVENT_TYPE: ClassVar[str] = "TaskSubmitted"
    task_id: TaskId
    tenant: Name
    priority: int = Field(default=0, ge=0, le=1000)
    """Higher runs first and may preempt lower (within QoS rules)."""
    qos: QosClass = "burstable"
    resources: ResourceRequest
    elastic: ElasticRange | None = None
    features: TaskFeatures = Field(default_factory=TaskFeatures)
    workflow_id: Name | None = None
    depends_on: list[TaskId] = Field(default_factory=list)
    """Tasks that must finish successfully before this one starts."""
    inputs: list[DataInput] = Field(default_factory=list)
    executor: ExecutorSpec

    @model_validator(mode="after")
    def _elastic_contains_request(self) -> Self:
        e = self.elastic
        if e is not None and not e.min_gpus <= self.resources.gpu_count <= e.max_gpus:
            raise ValueError("resources.gpu_count must lie within elastic min_gpus..max_gpus")
        return self


class TaskCancelled(Event):
    """Stop the task (if running) and forget it."""

    EVENT_TYPE: ClassVar[str] = "TaskCancelled"
    task_id: TaskId
    reason: str = ""
    requested_by: Name | None = None
