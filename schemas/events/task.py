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


class GangResourceRequest(ResourceRequest):
    """``ResourceRequest`` with a shape over nodes (version 2 of ``TaskSubmitted``).

    A request for more GPUs than one node has is a *gang*: whole GPUs on several
    nodes, started all at once or not at all. Without a shape it takes the fewest
    nodes (whole nodes first); ``nodes`` and/or ``gpus_per_node`` fix the shape.
    ``cpu_milli`` and ``memory_mib`` are asked on every node of the gang.
    """

    nodes: PosInt | None = None
    """Number of nodes the gang spans (with ``gpu_count`` = nodes x gpus_per_node)."""
    gpus_per_node: PosInt | None = None
    """GPUs on each node of the gang."""
    mixed_models: bool = False
    """May the members run on different GPU models (of ``gpu_models``)? By default
    all share one: data-parallel ranks run at the pace of the slowest GPU."""

    @model_validator(mode="after")
    def _shape_is_whole_gpus(self) -> Self:
        nodes, per = self.nodes, self.gpus_per_node
        if nodes is None and per is None:
            return self
        if self.gpu_count == 0 or self.gpu_share_milli < 1000:
            raise ValueError("nodes/gpus_per_node need whole GPUs (gpu_count > 0, "
                             "gpu_share_milli 1000)")
        if nodes is not None and per is not None and nodes * per != self.gpu_count:
            raise ValueError(f"nodes {nodes} x gpus_per_node {per} != gpu_count "
                             f"{self.gpu_count}")
        if nodes is not None and self.gpu_count % nodes:
            raise ValueError(f"gpu_count {self.gpu_count} does not split evenly over "
                             f"nodes {nodes}")
        if per is not None and self.gpu_count % per:
            raise ValueError(f"gpu_count {self.gpu_count} is not a multiple of "
                             f"gpus_per_node {per}")
        return self


class TaskSubmittedV2(TaskSubmitted):
    """Version 2: ``resources`` may give a gang's shape (``GangResourceRequest``).

    Version 1 stays readable and valid: a v1 request for more GPUs than a node
    has is a gang of the fewest nodes, one model.
    """

    EVENT_VERSION: ClassVar[int] = 2
    resources: GangResourceRequest


class TaskSubmittedV3(TaskSubmittedV2):
    """Version 3: ``job_name``, what the task is (issue 31).

    Many submissions run the same job: a nightly ``resnet50`` fine-tune, a ``render``
    step of a pipeline. Past runs of a tenant's job of the same name are the best
    guide to how long the next one runs, so the scheduler predicts the run time of a
    task that declares none from them (``HETSCHED_PREDICT_RUNTIMES``), and its
    placement says so: "predicted 12 min (p50 of 48 past runs of tenant t's
    'resnet50')". Versions 1 and 2 stay valid: without a name the prediction falls
    back to the tenant's tasks of the same class, then of the same GPU count.
    """

    EVENT_VERSION: ClassVar[int] = 3
    job_name: Name | None = None
    """The job this task is a run of, e.g. ``resnet50-finetune``; None: not named."""


class TaskCancelled(Event):
    """Stop the task (if running) and forget it."""

    EVENT_TYPE: ClassVar[str] = "TaskCancelled"
    task_id: TaskId
    reason: str = ""
    requested_by: Name | None = None
