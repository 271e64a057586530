"""Gavel's round-based baselines in ``simulate --mode time``: gavel-las, gavel-fifo, las.

Why a runner of its own: these policies schedule in 360 s rounds from an LP
allocation over GPU *types* (``streams.sim.time.rounds``), not task by task
through the cell, so they run that simulator, unchanged, on the jobs and nodes
the command already read, and their outcome goes into the same ``Recorder``
as the other policies' (summary.json, summary.md, classes, tenants, job rows).

What the conversion does (``workload``): the GPU types are the node list's
models in their order of first appearance in the node file (``--nodes``; the
order the aware policies walk them in, as the module command does), with their
GPU counts summed (node
boundaries do not matter to a round simulator: a job of ``num_gpus`` GPUs takes
that many GPUs of one type, Gavel's scale factor); a job's run time on a type
is its ``duration_s@MODEL`` (``inf``: blank cell or a model outside its
``gpu_models``), or its ``duration_s`` on every model when the file has no such
column, as ``python -m streams.sim.time.rounds`` reads it; ``in_window`` as
given. So the JCT figures are those of the module command with ``--all-jobs``
(the run goes on until every job finished, as the other policies drain theirs;
the window jobs' figures do not depend on that).

What each job records: arrival, first start, end, wait = JCT - the time it
held GPUs (waiting for a round's end, and rounds it did not run), and its
preemptions (it ran in a round, was not finished, and did not run the next;
``type_moves`` in the summary counts the rounds it ran next on another type).
A job that runs again after a round off, or on another type, loses its
``restart_s`` (``job_restart_s``: the column, else the simulator's default) of that
round, as the other policies charge it; Gavel charges nothing, and its files say 0.

Not recorded, so absent from their summary rather than wrong (``ABSENT``): the
figures sampled over time or per GPU (allocation, used and requested %,
energy, work throughput, Jain's index of tenants' work share): the round
simulator keeps no per-round history.

Refused (``workload_problem``): fractional GPUs (``gpu_milli`` below 1000),
jobs without a GPU and workflows (``depends_on``): Gavel's rounds model none of
them. An elastic range (``min_gpus``/``max_gpus``) is not refused but unused: Gavel's
policies give a job its scale factor (``num_gpus``) or nothing, every round, as its
simulator does.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from schemas.gpu_catalog import resolve_model
from streams.core.queue import QueueConfig
from streams.core.request import MILLI_PER_GPU
from streams.core.scheduler import Scheduler
from streams.sim.time.cell_options import cell_only_flags
from streams.sim.time.engine import SimPolicy, Simulator
from streams.sim.time.jobs import Job, job_restart_s
from streams.sim.time.metrics import Recorder
from streams.sim.time.rounds import simulator as rounds
from streams.sim.traces import NodeSpec, resolve

NAMES = rounds.POLICIES
ABSENT = ("alloc_pct", "used_pct", "req_pct", "alloc_pct_steady", "req_pct_steady",
          "work_gpu_h_per_h", "jain", "energy_kwh")
"""Summary keys the round simulator cannot give (module docstring): left out."""
NOTE = ("gavel-las, gavel-fifo, las: Gavel's round-based policies (360 s rounds over GPU "
        "types, preemption at round ends at the restart cost below, streams.sim.time.rounds; "
        "an elastic range unused: a job gets its num_gpus or nothing), told every job's "
        "run time per model (the aware ones use it); no samples over time, so allocation, "
        "used %, energy, work throughput and Jain are not given for them.")


@dataclass(frozen=True)
class RoundsPolicy(SimPolicy):
    """A ``SimPolicy`` run by the round simulator (``RoundsSim``), not the cell."""

    seed: int = 0
    """Seed of the agnostic policy's per-round shuffle of the type order (``las``)."""
    type_order: tuple[str, ...] = ()
    """The order the aware policies walk the GPU types in (``gpu_types``)."""


def make_rounds(name: str, scheduler: Scheduler, jobs: Sequence[Job], seed: int = 0,
                type_order: Sequence[str] = ()) -> RoundsPolicy:
    """``gavel-las``, ``gavel-fifo`` or ``las``; ``scheduler`` only builds the recorder's
    cluster state. Raises ``ValueError`` for a workload the rounds cannot run."""
    problem = workload_problem(name, jobs)
    if problem is not None:
        raise ValueError(problem)
    return RoundsPolicy(name, scheduler, QueueConfig(), runner=RoundsSim, seed=seed,
                        type_order=tuple(type_order))


def unsupported(names: Sequence[str], args: Any) -> str | None:
    """Why these options cannot run with the round-based policies asked for (None: they
    can): the adaptation and fault layer and ``--model-speed`` act on the cell's runs."""
    asked = [n for n in names if n in NAMES]
    flags = cell_only_flags(args)
    if asked and flags:
        return (f"{', '.join(flags)} need the cell; {', '.join(asked)} run Gavel's round "
                "simulator (drop the option or the policy)")
    return None


def workload_problem(name: str, jobs: Sequence[Job]) -> str | None:
    """Why ``name`` cannot run these jobs (None: it can); names the first such job."""
    for j in jobs:
        r = j.request
        why = None
        if r.num_gpu == 0:
            why = "asks for no GPU (num_gpus 0)"
        elif r.gpu_milli < MILLI_PER_GPU:
            why = f"asks for a fraction of a GPU (gpu_milli {r.gpu_milli})"
        elif j.meta.depends_on:
            why = "is a workflow stage (depends_on)"
        if why is not None:
            return (f"{name}: job {j.job_id} {why}: Gavel's round-based policies run whole-GPU "
                    "jobs without dependencies (drop the policy or "
                    "those jobs)")
    return None


def file_type_order(path: str | Path) -> tuple[str, ...]:
    """The GPU models of a node list file in order of first appearance (catalog names, as
    ``traces.read_nodes`` reads them; that reader sorts the nodes by name, which would lose
    this order, the order the aware policies walk the types in: ``workload.read_nodes``)."""
    order: dict[str, None] = {}
    with open(resolve(path), newline="") as f:
        for row in csv.DictReader(f):
            model = (row.get("model") or "").strip()
            if model and int(float(row.get("gpu") or 0)) > 0:
                order[resolve_model(model) or model] = None
    return tuple(order)


def gpu_types(nodes: Sequence[NodeSpec],
              order: Sequence[str] = ()) -> tuple[list[str], np.ndarray]:
    """GPU models and their GPU counts: in ``order`` (a node file's, ``file_type_order``),
    models it does not name after them in order of first appearance in ``nodes``."""
    counts: dict[str, int] = {}
    for n in nodes:
        if n.gpu_count > 0 and n.gpu_model:
            counts[n.gpu_model] = counts.get(n.gpu_model, 0) + n.gpu_count
    if not counts:
        raise ValueError("Gavel's round-based policies: the node list has no GPU")
    names = [m for m in order if m in counts] + [m for m in counts if m not in order]
    return names, np.array([counts[m] for m in names], dtype=float)


def run_time_on(job: Job, model: str) -> float:
    """The job's run time alone on ``num_gpus`` GPUs of ``model``; ``inf``: cannot run there."""
    allowed = job.request.gpu_models
    if allowed and model not in allowed:
        return math.inf
    if job.speeds is None:
        return job.duration_s
    got = job.speeds.by_model.get(model)
    if got is not None:
        return float(got)
    return job.speeds.default_s if job.speeds.default_s is not None else math.inf


def workload(jobs: Sequence[Job], types: list[str]) -> tuple[rounds.Workload, list[Job]]:
    """The round simulator's workload of ``jobs`` (sorted by arrival, stable) and the jobs
    in its order."""
    order = sorted(jobs, key=lambda j: j.arrival_s)
    wl = rounds.Workload(
        job_ids=[j.job_id for j in order],
        arrival=np.array([j.arrival_s for j in order], dtype=float),
        duration=np.array([[run_time_on(j, t) for t in types] for j in order],
                          dtype=float).reshape(len(order), len(types)),
        scale_factor=np.array([float(j.request.num_gpu) for j in order]),
        in_window=np.array([bool(j.in_window) for j in order], dtype=bool),
        type_names=list(types),
        restart_s=np.array([job_restart_s(j) for j in order], dtype=float),
    )
    return wl, order


class RoundsRecorder(Recorder):
    """The ``Recorder`` of a round-simulator run: filled at the end, no samples."""

    result: rounds.Result | None = None

    def summary(self) -> dict[str, float]:
        out = {k: v for k, v in super().summary().items() if k not in ABSENT}
        if self.result is not None:
            out.update(rounds=float(self.result.rounds),
                       allocations=float(self.result.allocations),
                       type_moves=float(self.result.moves.sum()))
        return out

    def per_tenant(self) -> dict[str, dict[str, float]]:
        """As ``Recorder.per_tenant``, with ``work_share`` unknown (nan): no work over time."""
        return {t: {**row, "work_share": math.nan} for t, row in super().per_tenant().items()}


class RoundsSim(Simulator):
    """Runs ``streams.sim.time.rounds.simulate`` and records its outcome per job."""

    def __init__(self, policy: SimPolicy, nodes: Sequence[NodeSpec], jobs: Sequence[Job],
                 horizon_s: float | None = None, **kw: Any) -> None:
        super().__init__(policy, nodes, jobs, horizon_s, **kw)
        self._heap.clear()  # no events: the round simulator runs the whole workload at once
        self._nodes, self._jobs = list(nodes), list(jobs)
        self.recorder = RoundsRecorder(self)

    def run(self) -> Recorder:
        policy = self.policy
        seed, walk = (policy.seed, policy.type_order) if isinstance(policy, RoundsPolicy) \
            else (0, ())
        types, counts = gpu_types(self._nodes, walk)
        wl, order = workload(self._jobs, types)
        res = rounds.simulate(wl, counts, self.policy.name, seed=seed, until_window=False)
        rec = self.recorder
        assert isinstance(rec, RoundsRecorder)
        rec.result = res
        nowhere = ~np.isfinite(wl.duration).any(axis=1)
        for i, job in enumerate(order):
            rec.arrived(job.arrival_s, job)
            st = rec.jobs[job.job_id]
            start = float(res.first_start[i])
            st.first_start_s = start if math.isfinite(start) else -1.0
            st.preemptions = int(res.preemptions[i])
            end = float(res.completion[i])
            if nowhere[i]:  # as the cell refuses it for good: out of the figures
                st.status = "unschedulable"
                continue
            if math.isfinite(end):
                st.end_s, st.status = end, "finished"
                rec.done += 1
            else:  # left when the run stopped (it can run nowhere): censored wait
                end = res.end_s
            st.wait_s = max(end - job.arrival_s - float(res.run_s[i]), 0.0)
        self.now_s = res.end_s
        rec.end_s = res.end_s
        self.events = res.rounds
        if self.progress is not None:
            self.progress(self)
        return rec
