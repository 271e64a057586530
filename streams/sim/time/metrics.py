"""Metrics of one time-simulation run, recorded as the run goes (no second pass).

Definitions (also in docs/simulation.md):

* allocation %: GPU milli allocated / GPU milli of the cluster, sampled every
  ``sample_s``; used %: GPU milli the jobs actually keep busy (their own
  request x their ``util``; a fractional job given a whole GPU by static
  allocation still uses only its share) / capacity. Averages are over the
  horizon (the arrival window), where both policies face the same offered load.
  requested %: the jobs' own requests while they run (a 0.3-GPU job counts 0.3
  under both policies): allocation without static allocation's rounding up.
  The ``_steady`` variants average from a quarter of the window on, because the
  cluster starts empty and hours-long training takes that long to fill it.
* queueing delay (wait): total time a job spent queued (from submission, or
  from its predecessors' end, until placed; again after each preemption).
  Mean, p50, p95, p99 and the share of jobs waiting over one hour.
* completion time (JCT): end - arrival; mean, p50, p95, p99, and per task class
  mean and standard deviation.
* bounded slowdown (Feitelson's, with the usual threshold of 10 s):
  ``max(1, (wait + run) / max(run, 10 s))``, run = the job's own duration. The
  threshold keeps jobs of a few seconds from dominating it; the ``max(1, .)``
  keeps a short job that waited less than 10 s - run at 1. Mean and p99.
  The wait, not end - arrival, so a workflow stage is not charged its
  predecessors' run time (for any other job wait + run = JCT: a preempted job
  resumes with its progress kept).
* percentiles: ``numpy.percentile`` with ``method="linear"`` (numpy's default:
  linear interpolation between the closest ranks); 0 over an empty set.
* who counts (population): every job that arrived except the unschedulable
  ones (the cell refused them for good: no policy can run them; reported as
  ``unschedulable``). The run does not stop at the horizon: it drains (up to
  ``engine.MAX_DRAIN_S`` after it), so a job still queued or running at the
  horizon counts in full when it ends later (dropping it would favour a policy
  that leaves long jobs behind). A job not finished when the run stopped is
  ``unfinished``: it counts in wait, with its wait censored at the run's end
  (its queued time so far, the interval still open included), and not in JCT
  or slowdown, which need an end.
* throughput: jobs finished within the horizon per hour; work throughput:
  requested GPU-hours run within the horizon per hour (a job counts as it runs,
  finished or not, so long jobs are not missed at the window's end).
* Jain's index (``jain``) over tenants (not jobs) of x = work done within the
  horizon / work submitted within the horizon (work = requested GPU milli x
  seconds, x capped at 1): (sum x)^2 / (n sum x^2), 1 when every tenant got the
  same share of what it asked. ``worst_tenant_slowdown``: the highest of the
  tenants' mean bounded slowdowns (``per_tenant`` has each tenant's).
* preemptions per job: preemptions / jobs (every arrived job).
* energy: per GPU, ``IDLE_FRACTION`` x TDP when idle plus (TDP - idle) x used
  share, from the catalog's TDP per model, integrated over the horizon.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Final, Protocol

import numpy as np

from streams.core.cell import QUEUED, Cell, Outcome, Preempted, Refused
from streams.core.decisions import Placement
from streams.core.request import MILLI_PER_GPU
from streams.sim.time.jobs import Job

IDLE_FRACTION = 0.25  # ASSUMPTION: an idle, powered GPU draws a quarter of its TDP
LONG_WAIT_S = 3600.0
SLOWDOWN_BOUND_S = 10.0  # Feitelson's usual threshold: below it a job counts as 10 s long
PERCENTILE_METHOD: Final = "linear"  # numpy's default, named so that it stays the one documented


def pct(values: np.ndarray | list[float], q: float) -> float:
    """The q-th percentile (``PERCENTILE_METHOD``), 0.0 for no values."""
    arr = np.asarray(values, dtype=np.float64)
    if arr.size == 0:
        return 0.0
    return float(np.percentile(arr, q, method=PERCENTILE_METHOD))


def _mean(values: list[float]) -> float:
    """Their mean, 0.0 for none (a recorder without samples: no NaN, no warning)."""
    return float(np.mean(values)) if values else 0.0


def bounded_slowdown(wait_s: float, run_s: float, bound_s: float = SLOWDOWN_BOUND_S) -> float:
    """Feitelson's bounded slowdown: ``max(1, (wait + run) / max(run, bound))``.

    ``run`` is the job's own run time (its duration, not counting waits), ``bound``
    the threshold below which a job counts as that long (10 s, the usual choice), so
    that a 1-s job that waited 5 s is not a slowdown of 6 but of 1. The result is at
    least 1 (no slowdown).
    """
    return max(1.0, (wait_s + run_s) / max(run_s, bound_s))


@dataclass(slots=True)
class JobStats:
    job: Job
    first_start_s: float = -1.0
    end_s: float = -1.0
    wait_s: float = 0.0
    preemptions: int = 0
    run_since_s: float = -1.0
    done_work: float = 0.0  # requested milli x seconds run within the horizon
    status: str = "queued"
    alloc_milli: int = 0
    used_milli: float = 0.0
    dyn_w: float = 0.0
    req_milli: int = 0
    predicted_s: float | None = None  # what the cell predicted at its first start, if anything


@dataclass
class Sample:
    time_s: float
    alloc_pct: float
    used_pct: float
    req_pct: float
    queued: int
    running: int
    power_w: float


class Simulated(Protocol):
    """What the recorder reads of the run it records (``engine.Simulator`` and the
    round simulator): its cell and its horizon. A protocol, so that this module does
    not import the engine, which imports it."""

    cell: Cell
    horizon_s: float


@dataclass
class Recorder:
    """Collects per-job stats and samples; see the module docstring."""

    sim: Simulated
    jobs: dict[str, JobStats] = field(default_factory=dict)
    samples: list[Sample] = field(default_factory=list)
    alloc_milli: int = 0
    used_milli: float = 0.0
    dyn_w: float = 0.0
    req_milli: int = 0
    end_s: float = 0.0
    done: int = 0
    """Jobs finished so far (the progress bar's count)."""

    def __post_init__(self) -> None:
        s = self.sim.cell.state
        self.capacity_milli = max(s.total_gpus * MILLI_PER_GPU, 1)
        tdp = s.model_tdp_w
        models = s.model[: s.n]
        counts = s.gpu_count[: s.n]
        self.idle_w = float(sum(IDLE_FRACTION * tdp[m] * c for m, c in zip(models, counts,
                                                                           strict=True)
                                if m >= 0))

    # ---- events --------------------------------------------------------------------------

    def arrived(self, t: float, job: Job) -> None:
        self.jobs[job.job_id] = JobStats(job)

    def outcome(self, t: float, o: Outcome) -> None:
        if isinstance(o, Placement):
            st = self.jobs[o.task]
            rec = self.sim.cell.tasks[o.task]
            st.wait_s += max(t - rec.enqueued_s, 0.0)
            if st.first_start_s < 0:
                st.first_start_s = t
                st.predicted_s = o.predicted_s
            st.run_since_s, st.status = t, "running"
            gpus = sum(len(g) for _, g in o.members) if o.members else len(o.gpus)
            st.alloc_milli = o.share_milli * gpus
            req = st.job.request
            st.used_milli = req.gpu_total_milli * st.job.util
            st.req_milli = req.gpu_total_milli
            model = int(self.sim.cell.state.model[self.sim.cell.state.node_index[o.node]])
            tdp = float(self.sim.cell.state.model_tdp_w[model]) if model >= 0 else 0.0
            st.dyn_w = (1 - IDLE_FRACTION) * tdp * st.used_milli / MILLI_PER_GPU
            self._add(st, +1)
        elif isinstance(o, Preempted):
            st = self.jobs[o.task]
            self._stop(st, t)
            st.preemptions += 1
            st.status = "queued"
        elif isinstance(o, Refused) and not o.resolvable:
            self.jobs[o.unschedulable.task].status = "unschedulable"

    def finished(self, t: float, task: str) -> None:
        st = self.jobs[task]
        self._stop(st, t)
        st.end_s, st.status = t, "finished"
        self.done += 1

    def _stop(self, st: JobStats, t: float) -> None:
        ran_until = min(t, self.sim.horizon_s)
        if ran_until > st.run_since_s:
            st.done_work += st.job.request.gpu_total_milli * (ran_until - st.run_since_s)
        self._add(st, -1)

    def _add(self, st: JobStats, sign: int) -> None:
        self.alloc_milli += sign * st.alloc_milli
        self.used_milli += sign * st.used_milli
        self.dyn_w += sign * st.dyn_w
        self.req_milli += sign * st.req_milli

    def sample(self, t: float) -> None:
        cell = self.sim.cell
        self.samples.append(Sample(
            t, 100.0 * self.alloc_milli / self.capacity_milli,
            100.0 * self.used_milli / self.capacity_milli,
            100.0 * self.req_milli / self.capacity_milli, len(cell.queue),
            sum(len(v) for v in cell.on_node.values()), self.idle_w + self.dyn_w))

    def close(self, t: float) -> None:
        """The run stopped at ``t``: a job still queued has its open wait counted up to ``t``
        (censored: it is ``unfinished``, see the module docstring)."""
        self.end_s = t
        for task, st in self.jobs.items():
            if st.status != "queued":
                continue
            rec = self.sim.cell.tasks.get(task)
            if rec is not None and rec.status == QUEUED:  # not held for a predecessor
                st.wait_s += max(t - rec.enqueued_s, 0.0)

    # ---- summary ---------------------------------------------------------------------------

    def counted(self) -> list[JobStats]:
        """The jobs the wait, JCT and slowdown figures are over: all but the unschedulable."""
        return [s for s in self.jobs.values() if s.status != "unschedulable"]

    def summary(self) -> dict[str, float]:
        """The run's headline metrics (see the module docstring for each definition)."""
        h = max(self.sim.horizon_s, 1.0)
        win = [s for s in self.samples if s.time_s <= h] or self.samples
        pool = self.counted()
        fin = [s for s in pool if s.status == "finished"]
        waits = np.array([s.wait_s for s in pool], dtype=np.float64)
        jct = np.array([s.end_s - s.job.arrival_s for s in fin], dtype=np.float64)
        slow = np.array([bounded_slowdown(s.wait_s, s.job.duration_s) for s in fin],
                        dtype=np.float64)
        tenants = self.per_tenant()
        finished_in = sum(1 for s in self.jobs.values() if 0 <= s.end_s <= h)
        steady = [s for s in win if s.time_s >= h / 4] or win
        work = 0.0
        for s in self.jobs.values():
            work += s.done_work
            if s.status == "running" and s.run_since_s < h:
                work += s.job.request.gpu_total_milli * (h - s.run_since_s)
        out = {
            "jobs": float(len(self.jobs)),
            "finished": float(sum(1 for s in self.jobs.values() if s.status == "finished")),
            "unschedulable": float(sum(1 for s in self.jobs.values()
                                       if s.status == "unschedulable")),
            "alloc_pct": _mean([s.alloc_pct for s in win]),
            "used_pct": _mean([s.used_pct for s in win]),
            "req_pct": _mean([s.req_pct for s in win]),
            "alloc_pct_steady": _mean([s.alloc_pct for s in steady]),
            "req_pct_steady": _mean([s.req_pct for s in steady]),
            "unfinished": float(len(pool) - len(fin)),
            "wait_mean_s": float(waits.mean()) if waits.size else 0.0,
            "wait_p50_s": pct(waits, 50),
            "wait_p95_s": pct(waits, 95),
            "wait_p99_s": pct(waits, 99),
            "wait_over_1h_pct": 100.0 * float((waits > LONG_WAIT_S).mean()) if waits.size
            else 0.0,
            "jct_mean_s": float(jct.mean()) if jct.size else 0.0,
            "jct_p50_s": pct(jct, 50),
            "jct_p95_s": pct(jct, 95),
            "jct_p99_s": pct(jct, 99),
            "slowdown_mean": float(slow.mean()) if slow.size else 0.0,
            "slowdown_p99": pct(slow, 99),
            "worst_tenant_slowdown": max((t["slowdown_mean"] for t in tenants.values()),
                                         default=0.0),
            "throughput_per_h": finished_in / (h / 3600.0),
            "work_gpu_h_per_h": work / MILLI_PER_GPU / h,
            "jain": self.jain(),
            "preemptions": float(sum(s.preemptions for s in self.jobs.values())),
            "preemptions_per_job": float(sum(s.preemptions for s in self.jobs.values()))
            / max(len(self.jobs), 1),
            "energy_kwh": self.energy_kwh(),
            "makespan_h": self.end_s / 3600.0,
        }
        out.update(self.window())
        return out

    def window(self) -> dict[str, float]:
        """The measured window's figures (issue 35), when the workload marks one
        (``in_window`` column), else nothing: ``window_jobs`` (window jobs that arrived,
        unschedulable ones included), ``window_jct_mean_s`` (mean JCT of those that
        finished) and ``window_unfinished`` (those that did not, so a mean over fewer
        jobs is never read as a better one)."""
        marked = [s for s in self.jobs.values() if s.job.in_window is not None]
        if not marked:
            return {}
        win = [s for s in marked if s.job.in_window]
        fin = [s.end_s - s.job.arrival_s for s in win if s.status == "finished"]
        return {"window_jobs": float(len(win)),
                "window_jct_mean_s": float(np.mean(fin)) if fin else 0.0,
                "window_unfinished": float(len(win) - len(fin))}

    def per_class(self) -> dict[str, dict[str, float]]:
        """Per task class: jobs, mean/p95 wait, share waiting > 1 h, completion mean/std."""
        out: dict[str, dict[str, float]] = {}
        classes = sorted({s.job.task_class for s in self.jobs.values()})
        for c in classes:
            sts = [s for s in self.jobs.values() if s.job.task_class == c]
            waits = np.array([s.wait_s for s in sts if s.first_start_s >= 0] or [0.0])
            jct = np.array([s.end_s - s.job.arrival_s for s in sts if s.end_s >= 0] or [0.0])
            out[c] = {"jobs": float(len(sts)), "wait_mean_s": float(waits.mean()),
                      "wait_p95_s": float(np.percentile(waits, 95)),
                      "wait_over_1h_pct": 100.0 * float((waits > LONG_WAIT_S).mean()),
                      "jct_mean_s": float(jct.mean()), "jct_std_s": float(jct.std())}
        return out

    def per_tenant(self) -> dict[str, dict[str, float]]:
        """Per tenant: jobs, unfinished, wait mean, JCT mean, mean bounded slowdown (of its
        finished jobs) and ``work_share``, the x of Jain's index (``tenant_shares``).

        Same population as ``summary``: all but the unschedulable jobs."""
        shares = self.tenant_shares()
        by: dict[str, list[JobStats]] = {}
        for s in self.counted():
            by.setdefault(s.job.meta.tenant, []).append(s)
        out: dict[str, dict[str, float]] = {}
        for tenant in sorted(by):
            sts = by[tenant]
            fin = [s for s in sts if s.status == "finished"]
            out[tenant] = {
                "jobs": float(len(sts)), "unfinished": float(len(sts) - len(fin)),
                "wait_mean_s": float(np.mean([s.wait_s for s in sts])),
                "jct_mean_s": float(np.mean([s.end_s - s.job.arrival_s for s in fin]))
                if fin else 0.0,
                "slowdown_mean": float(np.mean([bounded_slowdown(s.wait_s, s.job.duration_s)
                                                for s in fin])) if fin else 0.0,
                "work_share": shares.get(tenant, 1.0)}
        return out

    def jain(self) -> float:
        """Jain's index over tenants (not jobs) of ``tenant_shares``: (sum x)^2 / (n sum x^2).

        1 when every tenant got the same share of the work it submitted, 1/n when one
        tenant got everything; 1 also when no tenant got anything yet."""
        x = np.array([v for _, v in sorted(self.tenant_shares().items())])
        if x.size == 0 or not x.any():
            return 1.0
        return float(x.sum() ** 2 / (x.size * (x ** 2).sum()))

    def tenant_shares(self) -> dict[str, float]:
        """Per tenant that submitted work within the horizon: work done within the horizon /
        work submitted within it (requested GPU milli x seconds; a job's asked work is its
        duration cut at the horizon), capped at 1."""
        h = self.sim.horizon_s
        done: dict[str, float] = {}
        asked: dict[str, float] = {}
        for s in self.jobs.values():
            t = s.job.meta.tenant
            if s.job.arrival_s > h:
                continue
            req = s.job.request.gpu_total_milli
            work = s.done_work
            if s.status == "running" and s.run_since_s < h:
                work += req * (h - s.run_since_s)
            done[t] = done.get(t, 0.0) + work
            asked[t] = asked.get(t, 0.0) + req * min(s.job.duration_s, h - s.job.arrival_s)
        return {t: min(done[t] / asked[t], 1.0) for t in sorted(asked) if asked[t] > 0}

    def energy_kwh(self) -> float:
        h = self.sim.horizon_s
        pts = [s for s in self.samples if s.time_s <= h]
        if len(pts) < 2:
            return 0.0
        t = np.array([s.time_s for s in pts])
        p = np.array([s.power_w for s in pts])
        return float((p[:-1] * np.diff(t)).sum() / 3.6e6)
