"""Booked against observed, on the node: which task uses what of each GPU.

Why this exists: a GPU shared by several tasks (or by a task and a process the
scheduler never placed) reports one memory and one utilisation figure for
everyone. Attributing those to tasks from whole-GPU figures is a guess, and a
wrong guess is exactly the silent double-booking GPU-sharing schedulers are
known for. NVML lists each GPU's processes with the memory they hold (and,
on most data-centre GPUs, their SM share); this module maps those pids to the
executor's tasks and says what is left over:

* a task's **processes** are the pid its backend launched (for process tasks
  the supervising shim), every descendant of it (walked through ``/proc``) and
  every process still in its process group or session (a daemonised child is
  re-parented to init but keeps those);
* a task's **use of a GPU** is the sum over its processes on that GPU (exact);
  where the source has no per-process figures, the whole GPU's utilisation is
  split as before (``util * share / 1000``) and its memory by booked share
  among the tasks on it (approximate: over-use is then never reported);
* **foreign memory** is what processes that belong to no task booked on that
  GPU hold (a stranger, or one of our tasks on a GPU it never booked): the
  agent reports it in ``GpuTelemetry.foreign_mem_mib`` and the scheduler keeps
  it out of placement. The CUDA MPS server is not a stranger: fractional
  tasks run as its clients, and before Volta it holds their memory itself.

Pure functions plus one ``/proc`` reader, so the tests drive them with
hand-made process tables and samples.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from agents.telemetry.base import GpuSample

PROC = Path("/proc")
MPS_SERVER = "nvidia-cuda-mps-server"
"""Process name of the MPS server, whose GPU memory is its clients' (our tasks')."""

ProcessTable = Mapping[int, tuple[int, int, int]]
"""pid -> (parent pid, process group id, session id)."""


def read_process_table(proc: Path = PROC) -> dict[int, tuple[int, int, int]]:
    """Every visible process's parent, group and session (empty off Linux).

    ``/proc/<pid>/stat`` is ``pid (comm) state ppid pgrp session ...``; ``comm``
    may hold spaces and parentheses, so fields are read after the last ``)``.
    Processes that vanish while being read are skipped.
    """
    table: dict[int, tuple[int, int, int]] = {}
    try:
        entries = list(os.scandir(proc))
    except OSError:
        return table
    for entry in entries:
        if not entry.name.isdigit():
            continue
        try:
            raw = Path(entry.path, "stat").read_bytes()
        except OSError:
            continue
        fields = raw[raw.rfind(b")") + 2 :].split()
        if len(fields) < 4:
            continue
        table[int(entry.name)] = (int(fields[1]), int(fields[2]), int(fields[3]))
    return table


def process_name(pid: int, proc: Path = PROC) -> str | None:
    """The kernel's name of a process (``comm``), None if it is gone or hidden."""
    try:
        return Path(proc, str(pid), "comm").read_text().strip()
    except OSError:
        return None


def owners(roots: Mapping[str, Iterable[int]], table: ProcessTable) -> dict[int, str]:
    """pid -> task id for every process of every task (see the module docstring).

    A root pid missing from the table (a simulated task's pid, or one that just
    exited) still maps to its task, so its last figures are not called foreign.
    """
    children: dict[int, list[int]] = {}
    by_group: dict[int, list[int]] = {}
    for pid, (ppid, pgrp, sid) in table.items():
        children.setdefault(ppid, []).append(pid)
        by_group.setdefault(pgrp, []).append(pid)
        if sid != pgrp:
            by_group.setdefault(sid, []).append(pid)
    ours = {os.getpgrp(), os.getsid(0)}  # a root that shares our group: never widen by it
    out: dict[int, str] = {}
    for task_id, pids in roots.items():
        stack = list(pids)
        for root in pids:
            if root not in ours:
                stack.extend(by_group.get(root, ()))
        while stack:
            pid = stack.pop()
            if pid in out or pid <= 1:
                continue
            out[pid] = task_id
            stack.extend(children.get(pid, ()))
    return out


@dataclass(frozen=True, slots=True)
class Booking:
    """What a task booked of one GPU."""

    task_id: str
    gpu_index: int
    share_milli: int
    memory_mib: float
    """Reserved GPU memory (the decision's, or the share of the GPU's memory)."""


@dataclass(frozen=True, slots=True)
class GpuUse:
    """What a task used of one GPU in one sample."""

    util_pct: float
    """Points of the whole GPU."""
    mem_mib: float
    exact: bool
    """True when the memory comes from the task's own processes (per-process accounting)."""
    pids: tuple[int, ...] = ()


def attribute(
    samples: Mapping[int, GpuSample], bookings: Iterable[Booking], owner: Mapping[int, str]
) -> dict[tuple[str, int], GpuUse]:
    """(task id, GPU index) -> its use now, for every booking whose GPU was sampled."""
    by_gpu: dict[int, list[Booking]] = {}
    for b in bookings:
        by_gpu.setdefault(b.gpu_index, []).append(b)
    out: dict[tuple[str, int], GpuUse] = {}
    for index, booked in by_gpu.items():
        sample = samples.get(index)
        if sample is None:
            continue
        total_share = sum(b.share_milli for b in booked) or 1
        here = {b.task_id for b in booked}
        mem: dict[str, float] = {}
        sm: dict[str, float | None] = {}
        pids: dict[str, list[int]] = {}
        for proc in sample.processes or ():
            task = owner.get(proc.pid)
            if task not in here:
                continue
            assert task is not None
            mem[task] = mem.get(task, 0.0) + (proc.mem_used_mib or 0.0)
            pids.setdefault(task, []).append(proc.pid)
            old = sm.get(task, 0.0)
            sm[task] = None if old is None or proc.sm_util_pct is None else old + proc.sm_util_pct
        for b in booked:
            split_util = sample.util_pct * b.share_milli / 1000.0
            if sample.processes is None:
                out[(b.task_id, index)] = GpuUse(
                    split_util, sample.mem_used_mib * b.share_milli / total_share, exact=False
                )
                continue
            util = sm.get(b.task_id, 0.0)
            out[(b.task_id, index)] = GpuUse(
                min(100.0, util) if util is not None else split_util,
                mem.get(b.task_id, 0.0),
                exact=True,
                pids=tuple(sorted(pids.get(b.task_id, ()))),
            )
    return out


def foreign_mib(
    sample: GpuSample,
    owner: Mapping[int, str],
    booked_here: set[str],
    infrastructure: frozenset[int] = frozenset(),
) -> float | None:
    """Memory on this GPU held by processes of no task booked on it (``infrastructure``
    pids, the MPS server, excepted); None without per-process figures (the node cannot
    tell ours from theirs)."""
    if sample.processes is None:
        return None
    return sum(
        p.mem_used_mib or 0.0
        for p in sample.processes
        if owner.get(p.pid) not in booked_here and p.pid not in infrastructure
    )


def over_booking(observed_mib: float, booked_mib: float, margin_pct: float) -> bool:
    """Observed memory above the booking by more than the margin (a booking of 0 is
    unknown, never over)."""
    return booked_mib > 0 and observed_mib > booked_mib * (1.0 + margin_pct / 100.0)
