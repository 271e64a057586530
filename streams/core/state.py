"""Cluster state as numpy arrays: the data every policy scores in one vectorized pass.

Why arrays and not objects: a placement scores every node at once, so per-node
and per-GPU quantities live in contiguous arrays indexed by node slot (the
order nodes were added, which is deterministic because it is the log order).
Tasks and their allocations are arrays too, with a name -> slot map, so that
100,000 GPUs and their tasks fit in a few tens of MB.

Ownership: ``step`` mutates the state it is given and returns it (arrays are
too large to copy per event). Take ``copy()`` first for a snapshot.
Every change to a node bumps ``version[node]``; caches of per-node scores
compare versions to know which nodes to re-score.
"""

from __future__ import annotations

import copy as _copy
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from schemas.gpu_catalog import GpuModelSpec, load_catalog
from streams.core.request import MILLI_PER_GPU, TaskRequest
from streams.core.topology import Topology

DEFAULT_MAX_GPUS_PER_NODE = 8
_FLAT = frozenset({"node_names", "node_index", "model_names", "model_ids", "task_slot",
                   "_free_slots"})
"""The state's maps and lists of immutable items (names, ids, slots): ``copy`` copies
them one level deep."""
TAG_SHARED = 0  # column of ``tag_count`` counting fractional tasks; column k counts k-GPU tasks


@dataclass(frozen=True, slots=True)
class Allocation:
    """Where a task runs: node slot, GPU indices and the share taken on each."""

    task: str
    node: int
    gpus: tuple[int, ...]
    share_milli: int
    cpu_milli: int
    memory_mib: int


def _grow(arr: np.ndarray, rows: int, fill: float | int) -> np.ndarray:
    out = np.full((rows, *arr.shape[1:]), fill, dtype=arr.dtype)
    out[: arr.shape[0]] = arr
    return out


class ClusterState:
    """Nodes, GPUs, tasks and their allocations; see the module docstring."""

    def __init__(
        self,
        capacity: int = 64,
        max_gpus: int = DEFAULT_MAX_GPUS_PER_NODE,
        catalog: dict[str, GpuModelSpec] | None = None,
    ) -> None:
        self.catalog = catalog if catalog is not None else load_catalog()
        self.max_gpus = max_gpus
        self.n = 0
        self.node_names: list[str] = []
        self.node_index: dict[str, int] = {}
        cap = max(capacity, 1)
        self.cpu_cap = np.zeros(cap, np.int64)
        self.cpu_free = np.zeros(cap, np.int64)
        self.mem_cap = np.zeros(cap, np.int64)
        self.mem_free = np.zeros(cap, np.int64)
        self.gpu_count = np.zeros(cap, np.int64)
        # Free share per GPU slot; slots beyond gpu_count stay 0, so they never fit
        # a request and add nothing to sums of free share.
        self.gpu_free = np.zeros((cap, max_gpus), np.int64)
        self.model = np.full(cap, -1, np.int64)
        self.healthy = np.zeros(cap, bool)
        self.rank = np.zeros(cap, np.int64)
        self.pods = np.zeros(cap, np.int64)
        self.tag_count = np.zeros((cap, max_gpus + 1), np.int64)
        self.version = np.zeros(cap, np.int64)
        self.clock = 0
        self.free_version = 0
        """Bumped with ``clock`` by every change of a node (capacity, free figures,
        health, links), but a caller may put it back after a change it undoes itself (the
        cell's reservation masks): memos of answers computed from the whole state
        (``Cell._place``, ``Cell._reserve_gang``) are keyed on it."""
        # GPU models seen so far, in first-seen order; figures per model id.
        self.model_names: list[str] = []
        self.model_ids: dict[str, int] = {}
        self.model_fp32_tflops = np.zeros(0)
        self.model_bandwidth_gbps = np.zeros(0)
        self.model_tdp_w = np.zeros(0)
        # Tasks: slot arrays plus a name -> slot map and a free list.
        self.task_slot: dict[str, int] = {}
        # A gang's members after the first (rank 0 is in task_slot): task -> their slots.
        self.member_slots: dict[str, list[int]] = {}
        self._free_slots: list[int] = []
        tcap = max(capacity, 1)
        self.t_node = np.full(tcap, -1, np.int64)
        self.t_cpu = np.zeros(tcap, np.int64)
        self.t_mem = np.zeros(tcap, np.int64)
        self.t_share = np.zeros(tcap, np.int64)
        self.t_gpus = np.full((tcap, max_gpus), -1, np.int64)
        self.t_n = 0
        self.arrivals = 0
        # Racks and measured links (locality); changed by evolve like the arrays above.
        self.topology = Topology()
        # Derived, rebuildable caches (per-node scores); never part of the logical state.
        self.cache: dict[object, object] = {}

    # ---- nodes -------------------------------------------------------------------

    def _ensure_node_capacity(self, rows: int) -> None:
        if rows <= self.cpu_cap.shape[0]:
            return
        new = max(rows, 2 * self.cpu_cap.shape[0])
        for name, fill in (
            ("cpu_cap", 0), ("cpu_free", 0), ("mem_cap", 0), ("mem_free", 0),
            ("gpu_count", 0), ("gpu_free", 0), ("model", -1), ("healthy", False),
            ("rank", 0), ("pods", 0), ("tag_count", 0), ("version", 0),
        ):
            setattr(self, name, _grow(getattr(self, name), new, fill))

    def _ensure_gpu_width(self, gpus: int) -> None:
        if gpus <= self.max_gpus:
            return
        rows = self.gpu_free.shape[0]
        wide = np.zeros((rows, gpus), np.int64)
        wide[:, : self.max_gpus] = self.gpu_free
        self.gpu_free = wide
        tags = np.zeros((rows, gpus + 1), np.int64)
        tags[:, : self.max_gpus + 1] = self.tag_count
        self.tag_count = tags
        tg = np.full((self.t_gpus.shape[0], gpus), -1, np.int64)
        tg[:, : self.max_gpus] = self.t_gpus
        self.t_gpus = tg
        self.max_gpus = gpus
        self.cache.clear()

    def model_id(self, name: str) -> int:
        """Id of a GPU model, registering it (with catalog figures) on first use."""
        mid = self.model_ids.get(name)
        if mid is not None:
            return mid
        spec = self.catalog.get(name)
        mid = len(self.model_names)
        self.model_names.append(name)
        self.model_ids[name] = mid
        fp32 = spec.fp32_tflops if spec else 0.0
        self.model_fp32_tflops = np.append(self.model_fp32_tflops, fp32)
        self.model_bandwidth_gbps = np.append(
            self.model_bandwidth_gbps, spec.mem_bandwidth_gbps if spec else 0.0
        )
        self.model_tdp_w = np.append(self.model_tdp_w, spec.tdp_w if spec else 0.0)
        self.cache.clear()
        return mid

    def add_node(
        self,
        name: str,
        cpu_milli: int,
        memory_mib: int,
        gpu_count: int,
        gpu_model: str | None,
        rank: int | None = None,
    ) -> int:
        """Append a node (evolve only: validation happens in ``decide``)."""
        self._ensure_node_capacity(self.n + 1)
        self._ensure_gpu_width(gpu_count)
        i = self.n
        self.n += 1
        self.node_names.append(name)
        self.node_index[name] = i
        self.cpu_cap[i] = self.cpu_free[i] = cpu_milli
        self.mem_cap[i] = self.mem_free[i] = memory_mib
        self.gpu_count[i] = gpu_count
        self.gpu_free[i, :gpu_count] = MILLI_PER_GPU
        self.model[i] = self.model_id(gpu_model) if gpu_count and gpu_model else -1
        self.healthy[i] = True
        self.rank[i] = i if rank is None else rank
        # Cluster-wide derived figures (e.g. per-model capacity) change with the node set.
        self.cache.clear()
        self._touch(i)
        return i

    def set_health(self, node: int, healthy: bool) -> None:
        self.healthy[node] = healthy
        self._touch(node)

    def touch_all(self) -> None:
        """Mark every node changed (a cluster-wide input such as a link measurement)."""
        self.clock += 1
        self.free_version += 1
        self.version[: self.n] = self.clock

    def _touch(self, node: int) -> None:
        self.clock += 1
        self.free_version += 1
        self.version[node] = self.clock

    # ---- tasks ---------------------------------------------------------------------

    def _new_task_slot(self) -> int:
        if self._free_slots:
            return self._free_slots.pop()
        if self.t_n == self.t_node.shape[0]:
            new = 2 * self.t_n
            self.t_node = _grow(self.t_node, new, -1)
            self.t_cpu = _grow(self.t_cpu, new, 0)
            self.t_mem = _grow(self.t_mem, new, 0)
            self.t_share = _grow(self.t_share, new, 0)
            self.t_gpus = _grow(self.t_gpus, new, -1)
        self.t_n += 1
        return self.t_n - 1

    def allocate(
        self, request: TaskRequest, node: int, gpus: tuple[int, ...], task_id: str | None = None
    ) -> None:
        """Bind a task to a node and GPUs (evolve only: the caller checked feasibility).

        ``task_id`` overrides ``request.task`` as the key (the simulator's arrivals
        repeat task names).
        """
        slot = self._new_task_slot()
        self.task_slot[request.task if task_id is None else task_id] = slot
        share = request.gpu_milli if gpus else 0
        self.t_node[slot] = node
        self.t_cpu[slot] = request.cpu_milli
        self.t_mem[slot] = request.memory_mib
        self.t_share[slot] = share
        trow = self.t_gpus[slot]
        trow[:] = -1
        for j, g in enumerate(gpus):
            trow[j] = g
        self.cpu_free[node] -= request.cpu_milli
        self.mem_free[node] -= request.memory_mib
        self.pods[node] += 1
        if gpus:
            row = self.gpu_free[node]
            for g in gpus:
                row[g] -= share
            self.tag_count[node, TAG_SHARED if request.fractional else request.num_gpu] += 1
        self._touch(node)

    def allocate_gang(self, task: str, cpu_milli: int, memory_mib: int,
                      members: Sequence[tuple[int, tuple[int, ...]]]) -> None:
        """Bind a gang: whole GPUs on each member's node, ``cpu_milli`` and ``memory_mib``
        on every member's node (evolve only: the caller checked feasibility). Rank 0 is
        the task's own slot, so ``allocation(task)`` is the first member's."""
        extra: list[int] = []
        for node, gpus in members:
            self.allocate(TaskRequest(task, cpu_milli, memory_mib, len(gpus), MILLI_PER_GPU),
                          node, gpus)
            extra.append(self.task_slot[task])
        self.task_slot[task] = extra.pop(0)  # rank 0; the others are its members
        if extra:
            self.member_slots[task] = extra

    def members(self, task: str) -> list[Allocation]:
        """Every allocation of a task: one for a single-node task, one per member of a
        gang (rank order), none when it holds nothing."""
        slot = self.task_slot.get(task)
        if slot is None:
            return []
        return [self.allocation_of_slot(task, s)
                for s in (slot, *self.member_slots.get(task, ()))]

    def slot_on(self, task: str, node: int) -> int:
        """The slot of ``task``'s allocation on ``node`` (a gang has one per member)."""
        slot = self.task_slot[task]
        for s in self.member_slots.get(task, ()):
            if int(self.t_node[s]) == node:
                return s
        return slot

    def release(self, task: str) -> Allocation | None:
        """Give a task's resources back (every member of a gang); ``None`` when the task
        holds nothing, else its (first member's) allocation."""
        slot = self.task_slot.pop(task, None)
        if slot is None:
            return None
        for extra in self.member_slots.pop(task, ()):
            self._release_slot(task, extra)
        return self._release_slot(task, slot)

    def return_resources(self, slot: int) -> None:
        """Add one allocation slot's CPU, memory and GPU shares back to the free figures,
        and nothing else: a trial copy that shares the task tables (a gang's
        reservation asking "what is free once this task ends?") must not touch them."""
        node = int(self.t_node[slot])
        self.cpu_free[node] += int(self.t_cpu[slot])
        self.mem_free[node] += int(self.t_mem[slot])
        share = int(self.t_share[slot])
        row = self.gpu_free[node]
        for g in self.t_gpus[slot].tolist():  # a few GPUs: item updates beat an index array
            if g >= 0:
                row[g] += share

    def _release_slot(self, task: str, slot: int) -> Allocation:
        alloc = self.allocation_of_slot(task, slot)
        node = alloc.node
        self.return_resources(slot)
        self.pods[node] -= 1
        if alloc.gpus:
            fractional = len(alloc.gpus) == 1 and alloc.share_milli < MILLI_PER_GPU
            self.tag_count[node, TAG_SHARED if fractional else len(alloc.gpus)] -= 1
        self.t_node[slot] = -1
        self._free_slots.append(slot)
        self._touch(node)
        return alloc

    def allocation_of_slot(self, task: str, slot: int) -> Allocation:
        gpus = tuple(g for g in self.t_gpus[slot].tolist() if g >= 0)  # one conversion
        return Allocation(
            task=task,
            node=int(self.t_node[slot]),
            gpus=gpus,
            share_milli=int(self.t_share[slot]),
            cpu_milli=int(self.t_cpu[slot]),
            memory_mib=int(self.t_mem[slot]),
        )

    def allocation(self, task: str) -> Allocation | None:
        slot = self.task_slot.get(task)
        return None if slot is None else self.allocation_of_slot(task, slot)

    # ---- whole-cluster figures --------------------------------------------------------

    @property
    def total_gpus(self) -> int:
        return int(self.gpu_count[: self.n].sum())

    @property
    def allocated_gpu_milli(self) -> int:
        n = self.n
        return int(self.gpu_count[:n].sum()) * MILLI_PER_GPU - int(self.gpu_free[:n].sum())

    def nbytes(self) -> int:
        """Bytes held by the numpy arrays of the state (caches excluded)."""
        return sum(
            v.nbytes for k, v in vars(self).items() if isinstance(v, np.ndarray) and k != "cache"
        )

    def copy(self) -> ClusterState:
        """A deep snapshot (the score cache is not copied: it is rebuilt on demand).

        Built field by field rather than by ``copy.deepcopy`` of the whole object: the
        cell takes one per swap it weighs (``Cell._swap_places``), and a generic deep
        copy walked the (shared, immutable) GPU catalog and every dict entry one object
        at a time, a fifth of a time-simulator run. Arrays are copied, the name maps
        and lists copied one level (their keys and items are immutable, bar the lists
        of ``member_slots``), the catalog shared, the topology by its own ``copy``, anything
        else deep-copied as before."""
        dup = object.__new__(type(self))
        fields = dup.__dict__
        for name, value in vars(self).items():
            if name == "cache":
                fields[name] = {}
            elif name == "catalog":
                fields[name] = value
            elif name == "topology":
                fields[name] = value.copy()
            elif name == "member_slots":
                fields[name] = {task: list(slots) for task, slots in value.items()}
            elif isinstance(value, np.ndarray):
                fields[name] = value.copy()
            elif isinstance(value, (int, float, str, bool)):
                fields[name] = value
            elif name in _FLAT and isinstance(value, (dict, list)):
                fields[name] = value.copy()
            else:
                fields[name] = _copy.deepcopy(value)
        return dup
