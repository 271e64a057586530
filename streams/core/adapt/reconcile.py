"""Booked against observed: GPU memory a task or a stranger uses beyond its booking.

Silent double-booking (a process using more GPU memory than it booked, or a
process the scheduler never placed) is the most common failure of GPU sharing.
Two checks make it visible or impossible:

* **per task** (from ``TaskUsage``, which the executor attributes to the
  task's processes): observed memory above the booking by more than the
  tolerance is an *over-use*, handled by policy: ``warn`` (count and report),
  ``rebook`` (grow the booking so nothing else lands in the memory it uses),
  ``move`` (migrate it to a GPU with room) or ``stop`` (preempt it);
* **per GPU** (from ``GpuTelemetry``): memory in use beyond what the tasks
  there booked is *unaccounted*, and memory the node attributes to processes
  of no task (``foreign_mem_mib``, from NVML's per-process accounting) is
  *foreign*; the larger of the two is reserved as a phantom booking, so
  placement never books memory NVML shows in use. Foreign memory matters
  where the whole-GPU figure hides it: a task using less than it booked
  leaves room that a stranger's memory fills without raising the total.

The GPU's own reserve is not a stranger: NVML's ``used`` (the ``v1`` memory info the
node agent reads) includes what the driver and firmware hold, about 0.9 GiB of an
idle 80 GB A100, and even the ``v2`` figure shows a few MiB on an idle GPU. Any
positive amount rounds up to at least 1 milli, so reserving it left no idle GPU
whole: tasks asking for whole GPUs waited for ever beside idle GPUs (the short chaos
run, session 6: every task still queued at the end). Unexplained memory up to
``AdaptConfig.gpu_reserved_pct`` of the GPU's memory is therefore taken as that
reserve and not booked; above it, all of it is. Memory the node attributes to
processes of no task (``foreign``) is always reserved: it is a process.

Memory maps to the GPU share the core books in (milli of a GPU) by the GPU's
total memory: ``share = ceil(1000 * mib / gpu_memory_mib)``.
"""

from __future__ import annotations

import math

from streams.core.request import MILLI_PER_GPU


def share_of(mib: float, gpu_memory_mib: int) -> int:
    """GPU share (milli) that ``mib`` of memory occupies."""
    if gpu_memory_mib <= 0 or mib <= 0:
        return 0
    return min(MILLI_PER_GPU, math.ceil(MILLI_PER_GPU * mib / gpu_memory_mib))


def overuse_mib(observed_mib: float, booked_mib: float, tolerance: float) -> float:
    """How much above its booking (plus tolerance) a task is; 0 when within."""
    excess = observed_mib - booked_mib * (1.0 + tolerance)
    return excess if excess > 0 else 0.0


def unaccounted_mib(observed_mib: float, booked_mib: float, tolerance: float,
                    reserve_mib: float = 0.0) -> float:
    """Memory on a GPU that no booking explains (a stranger or an unreported over-use);
    0 when it is no more than ``reserve_mib``, the GPU's own reserve (see the module
    docstring)."""
    excess = overuse_mib(observed_mib, booked_mib, tolerance)
    return excess if excess > reserve_mib else 0.0


def driver_reserve_mib(gpu_memory_mib: int, reserved_pct: float) -> float:
    """What a GPU with nothing on it may show in use: ``reserved_pct`` of its memory."""
    return gpu_memory_mib * reserved_pct / 100.0 if reserved_pct > 0 else 0.0


def to_reserve(unaccounted: float, foreign_mib: float | None) -> float:
    """Memory to keep out of placement on a GPU: what no booking explains, or what the
    node saw processes of no task hold, whichever is larger (None: the node cannot say)."""
    return max(unaccounted, float(foreign_mib or 0))
