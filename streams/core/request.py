"""A task's resource request, normalised once so every policy reads the same thing.

The packing benchmark's normalisation (docs/packing-benchmark.md §1): a task
asks for ``num_gpu`` GPUs with ``gpu_milli`` (capped at 1000) on *each*; one
GPU below 1000 milli is a fractional task that shares a GPU, anything else
with GPUs takes whole idle GPUs, and ``num_gpu == 0`` is a CPU-only task.
"""

from __future__ import annotations

from dataclasses import dataclass, field

MILLI_PER_GPU = 1000


@dataclass(frozen=True, slots=True)
class TaskRequest:
    """What one task needs; ``gpu_models`` empty means any model.

    ``key`` identifies the shape for score caching: two requests with the same
    key get the same score on the same node state.
    """

    task: str
    cpu_milli: int
    memory_mib: int
    num_gpu: int = 0
    gpu_milli: int = 0
    gpu_models: tuple[str, ...] = ()
    input_node: str | None = None
    nodes: int = 0
    """Gang shape (streams.core.gang): the number of nodes, 0 = the fewest that hold it."""
    gpus_per_node: int = 0
    """Gang shape: GPUs on each node, 0 = whole nodes first, the rest on one more node."""
    mixed_models: bool = False
    """A gang may mix GPU models (of ``gpu_models``); by default all members share one."""
    speeds: tuple[tuple[str, float], ...] = ()
    """What the scheduler is told of the task's speed per GPU model (issue 35): (model,
    speed against its fastest model, 1.0 there), sorted by model; () = nothing, every
    model alike. The ``speed`` placement term reads it; the simulator's ``--speeds
    oracle`` fills it with the truth, learned estimates will later. Part of ``key``."""
    _key: tuple = field(init=False, repr=False, compare=False, hash=False)

    def __post_init__(self) -> None:
        if self.cpu_milli < 0 or self.memory_mib < 0 or self.num_gpu < 0 or self.gpu_milli < 0:
            raise ValueError(f"task {self.task!r}: resource requests must be non-negative")
        if self.num_gpu == 0:
            object.__setattr__(self, "gpu_milli", 0)
        else:
            object.__setattr__(self, "gpu_milli", min(self.gpu_milli, MILLI_PER_GPU))
            if self.gpu_milli == 0:
                raise ValueError(f"task {self.task!r}: num_gpu > 0 needs gpu_milli > 0")
        if self.nodes or self.gpus_per_node:
            self._normalise_shape()
        object.__setattr__(self, "_key", (self.cpu_milli, self.memory_mib, self.num_gpu,
                                          self.gpu_milli, self.gpu_models, self.input_node,
                                          self.nodes, self.gpus_per_node, self.mixed_models,
                                          self.speeds))

    def _normalise_shape(self) -> None:
        """A shaped gang: both numbers set and their product is ``num_gpu``, whole GPUs."""
        nodes, per = self.nodes, self.gpus_per_node
        if nodes < 0 or per < 0:
            raise ValueError(f"task {self.task!r}: nodes and gpus_per_node must be non-negative")
        if self.num_gpu == 0 or self.gpu_milli < MILLI_PER_GPU:
            raise ValueError(f"task {self.task!r}: a shape over nodes needs whole GPUs "
                             f"(num_gpu {self.num_gpu}, gpu_milli {self.gpu_milli})")
        if nodes and not per:
            per, rest = divmod(self.num_gpu, nodes)
            if rest:
                raise ValueError(f"task {self.task!r}: {self.num_gpu} GPUs do not split evenly "
                                 f"over nodes={nodes}")
        elif per and not nodes:
            nodes, rest = divmod(self.num_gpu, per)
            if rest:
                raise ValueError(f"task {self.task!r}: {self.num_gpu} GPUs are not a multiple "
                                 f"of gpus_per_node={per}")
        if nodes * per != self.num_gpu:
            raise ValueError(f"task {self.task!r}: nodes={nodes} x gpus_per_node={per} is not "
                             f"num_gpu={self.num_gpu}")
        object.__setattr__(self, "nodes", nodes)
        object.__setattr__(self, "gpus_per_node", per)

    @property
    def fractional(self) -> bool:
        """One GPU, less than all of it: the task shares a GPU."""
        return self.num_gpu == 1 and self.gpu_milli < MILLI_PER_GPU

    @property
    def whole_gpu(self) -> bool:
        """The task takes ``num_gpu`` idle GPUs exclusively."""
        return self.num_gpu > 0 and not self.fractional

    @property
    def gpu_total_milli(self) -> int:
        """Total GPU demand ``n * m`` in milli-GPU."""
        return self.num_gpu * self.gpu_milli

    @property
    def key(self) -> tuple:
        """Shape of the request, without the task's identity (computed once)."""
        return self._key
