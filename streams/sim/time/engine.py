"""The time simulator's event loop: a virtual clock, an event heap, the cell.

Why this shape: the same ``Cell`` the service runs decides everything, so a
simulated day exercises the queue, fair share, backfill, preemption and
workflows exactly as deployed. The loop only turns job arrivals, ends and
clock ticks into cell inputs and schedules the end of each placed job.

Pluggable (issue 8 extends it with failures, resizes, thermal events):
``Simulator.handlers`` maps an event kind to a function ``(sim, time_s,
payload)``; ``push(time_s, kind, payload)`` schedules one; ``observers`` are
called with every cell outcome. Events at one time run in push order
(sequence number tie-break), so runs are deterministic.
"""

from __future__ import annotations

import dataclasses
import heapq
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from streams.core.cell import Cell, Outcome, Preempted
from streams.core.decisions import Placement
from streams.core.events import NodeAdded, TaskArrived, TaskEnded
from streams.core.objectives import WeightSchedule
from streams.core.queue import QueueConfig
from streams.core.request import TaskRequest
from streams.core.scheduler import Scheduler
from streams.sim.time.jobs import Job, job_restart_s, restart_s
from streams.sim.time.metrics import Recorder
from streams.sim.time.speeds import BLIND, LEARNED, told
from streams.sim.traces import NodeSpec

TICK_S = 60.0
SAMPLE_S = 300.0
MAX_DRAIN_S = 30 * 86_400.0  # give up on jobs still queued this long after the last arrival
PROGRESS_EVENTS = 1024  # events between two calls of ``Simulator.progress``
LIVE_KINDS = frozenset({"arrive", "finish"})

Handler = Callable[["Simulator", float, Any], None]
Observer = Callable[["Simulator", float, Outcome], None]


@dataclass(frozen=True)
class SimPolicy:
    """What differs between compared schedulers: placement, queue, request transform.

    ``estimate``: the runtime the cell is told for a job (its meta's ``expected_s``,
    which reservations read), from the job; None: the job's own ``expected_s``, as
    a submitter declares it (what hetsched sees). The backfill baseline gives the
    true duration where a job declares nothing (``streams.policies.backfill``).
    """

    name: str
    scheduler: Scheduler
    queue: QueueConfig
    transform: Callable[[TaskRequest], TaskRequest] | None = None
    objectives: WeightSchedule | None = None
    estimate: Callable[[Job], float | None] | None = None
    runner: type[Simulator] | None = None
    """A simulator class of its own (the whole-GPU research baselines of
    ``streams.sim.time.baselines``); None: this one, with the cell. Build runs with
    ``make_simulator``."""
    speeds: str = BLIND
    """What the cell is told of each job's per-model speeds (``speeds.told``): blind
    (nothing), oracle (the truth, in ``TaskRequest.speeds``) or learned (what the
    cell's speed book learned from the runs' progress reports)."""
    elastic: bool = False
    """The cell is told each job's elastic range (``TaskMeta.elastic``) and sizes it
    (hetsched's queue); False: jobs run at their ``num_gpus``, as the baselines'
    sources do (Slurm's backfill does not resize a job)."""


def make_simulator(policy: SimPolicy, nodes: Sequence[NodeSpec], jobs: Sequence[Job],
                   horizon_s: float | None = None, **kw: Any) -> Simulator:
    """The simulator that runs ``policy``: its ``runner``, else the cell's ``Simulator``."""
    return (policy.runner or Simulator)(policy, nodes, jobs, horizon_s, **kw)


class Simulator:
    """One run: a policy, a cluster and jobs; see the module docstring."""

    def __init__(self, policy: SimPolicy, nodes: Sequence[NodeSpec], jobs: Sequence[Job],
                 horizon_s: float | None = None, tick_s: float = TICK_S,
                 sample_s: float = SAMPLE_S, max_drain_s: float = MAX_DRAIN_S) -> None:
        if policy.runner is not None and not isinstance(self, policy.runner):
            raise TypeError(f"policy {policy.name} runs on {policy.runner.__name__}: "
                            "use make_simulator")
        self.policy = policy
        self.cell = Cell("sim", policy.scheduler, policy.queue, policy.objectives, explain=False)
        for i, n in enumerate(nodes):
            self.cell.add_node(NodeAdded(f"node-{i}", n.name, n.cpu_milli, n.memory_mib,
                                         n.gpu_count, n.gpu_model or None), now_s=0.0)
        self.jobs = {j.job_id: j for j in jobs}
        self.horizon_s = horizon_s if horizon_s is not None else max(
            (j.arrival_s for j in jobs), default=0.0)
        self.tick_s, self.sample_s = tick_s, sample_s
        self.now_s = 0.0
        self._heap: list[tuple[float, int, str, Any]] = []
        self._seq = 0
        self._gen: dict[str, int] = {}
        self._tick = 0
        self._live = 0
        self.events = 0
        """Events handled so far (speed figures; the progress callback's count)."""
        self.progress: Callable[[Simulator], None] | None = None
        """Called every ``PROGRESS_EVENTS`` events and at the end (the command line's
        progress bar); it must not change the run."""
        self.max_drain_s = max_drain_s
        self.handlers: dict[str, Handler] = {
            "arrive": Simulator._arrive, "finish": Simulator._finish,
            "tick": Simulator._on_tick, "sample": Simulator._on_sample,
        }
        self.observers: list[Observer] = []
        self._runs: dict[str, tuple[float, float, float]] = {}
        """Running jobs with speeds or a restart cost: (started, restart paid first, share
        of the work per second)."""
        self._done: dict[str, float] = {}
        """Share of its work each such job has done in its past runs."""
        self.recorder = Recorder(self)
        for j in jobs:
            self.push(j.arrival_s, "arrive", j)
        self.push(tick_s, "tick", None)
        self.push(0.0, "sample", None)

    def push(self, time_s: float, kind: str, payload: Any) -> None:
        if kind in LIVE_KINDS:
            self._live += 1
        heapq.heappush(self._heap, (time_s, self._seq, kind, payload))
        self._seq += 1

    def run(self) -> Recorder:
        """Run until every job ended (or can never run); ticks stop once nothing is left."""
        heap, handlers = self._heap, self.handlers
        while heap:
            t, _, kind, payload = heapq.heappop(heap)
            self.now_s = t
            if kind in LIVE_KINDS:
                self._live -= 1
            handlers[kind](self, t, payload)
            self.events += 1
            if self.progress is not None and not self.events % PROGRESS_EVENTS:
                self.progress(self)
        if self.progress is not None:
            self.progress(self)
        self.recorder.close(self.now_s)
        return self.recorder

    @property
    def active(self) -> bool:
        """Jobs are still to arrive or end, or wait (within the drain limit)."""
        if self.now_s > self.horizon_s + self.max_drain_s:
            return False
        return self._live > 0 or bool(self.cell.queue)

    # ---- handlers ----------------------------------------------------------------------

    def _apply(self, outcomes: list[Outcome]) -> None:
        for o in outcomes:
            if isinstance(o, Placement):
                job = self.jobs[o.task]
                rec = self.cell.tasks[o.task]
                gen = self._gen.get(o.task, 0) + 1
                self._gen[o.task] = gen
                if job.speeds is None and job.restart_s is None:
                    # A run after a preemption pays the restart first (the same cost as the
                    # research baselines'; see jobs.restart_s).
                    restart = restart_s(job.request.num_gpu) if rec.preemptions else 0.0
                    end = self.now_s + restart + max(job.duration_s - rec.progress_s, 0.0)
                else:
                    end = self._start_run(job, o, rec.preemptions > 0)
                self.push(end, "finish", (o.task, gen))
            elif isinstance(o, Preempted):
                self._stop_run(o.task)
                self._gen[o.task] = self._gen.get(o.task, 0) + 1  # its finish no longer holds
                self.cell.ack_preempted(o.task)  # the simulated executor stops it at once
            self.recorder.outcome(self.now_s, o)
            for obs in self.observers:
                obs(self, self.now_s, o)

    # ---- true speeds (issue 35) --------------------------------------------------------

    def model_of(self, node: str) -> str:
        """The GPU model of a node ('' for none)."""
        s = self.cell.state
        m = int(s.model[s.node_index[node]])
        return s.model_names[m] if m >= 0 else ""

    def true_rate(self, job: Job, node: str, gpus: int | None = None) -> float:
        """Share of ``job``'s work done per second on ``gpus`` GPUs (its own count when
        None) of ``node``'s model: its ``speeds`` where the file gives them, else
        ``1 / duration_s`` on every model."""
        if job.speeds is None:
            return 1.0 / job.duration_s
        model = self.model_of(node)
        if not job.speeds.runs_on(model):  # gpu_models keep every policy off such models
            raise AssertionError(f"{job.job_id} placed on {model or 'no GPU'} ({node}), where "
                                 "its row gives no run time")
        return job.speeds.rate(model, gpus)

    def _start_run(self, job: Job, p: Placement, after_preemption: bool) -> float:
        """Start a run at the job's true speed where it was placed; its end time. A run
        after a preemption first pays the job's restart cost (``jobs.job_restart_s``),
        and work counts from then on."""
        restart = job_restart_s(job) if after_preemption else 0.0
        elastic = job.speeds is not None and job.speeds.elastic
        held = (sum(len(g) for _, g in p.members) if p.members else len(p.gpus)) \
            if elastic else None  # the cell may size an elastic job within its range
        rate = self.true_rate(job, p.node, held)
        self._runs[job.job_id] = (self.now_s, restart, rate)
        if self.policy.speeds == LEARNED:
            # The run's progress as its executor would report it (docs/node.md,
            # "Progress"): in the job's reference seconds of work per second, a unit
            # every job of a class shares (for an elastic job, whose count changes, a
            # second of one GPU of its fastest model); the cell learns it when the run
            # ends.
            unit = job.speeds.one_gpu_s() if elastic and job.speeds else job.duration_s
            self.cell.report_progress(job.job_id, p.node, rate * unit, now_s=self.now_s)
        left = max(1.0 - self._done.get(job.job_id, 0.0), 0.0)
        return self.now_s + restart + left / rate

    def _stop_run(self, task: str) -> None:
        """A run stopped early: the work it did counts (progress is checkpointed)."""
        run = self._runs.pop(task, None)
        if run is not None:
            since, restart, rate = run
            worked = max(self.now_s - since - restart, 0.0)
            self._done[task] = min(self._done.get(task, 0.0) + worked * rate, 1.0)

    def request(self, job: Job) -> TaskRequest:
        """What the cell is asked for: the job's request through the policy's transform,
        with what the policy is told of the job's speeds."""
        req = job.request
        if self.policy.transform is not None:
            req = self.policy.transform(req)
        if self.policy.speeds != BLIND:
            seen = told(job.speeds, self.policy.speeds)
            if seen:
                req = dataclasses.replace(req, speeds=seen)
        return req

    def _arrive(self, t: float, job: Job) -> None:
        req = self.request(job)
        meta = job.meta
        if meta.elastic and not self.policy.elastic:
            meta = dataclasses.replace(meta, elastic=())
        if self.policy.estimate is not None:
            expected = self.policy.estimate(job)
            if expected != meta.expected_s:
                meta = dataclasses.replace(meta, expected_s=expected)
        self.recorder.arrived(t, job)
        self._apply(self.cell.submit(TaskArrived(f"a/{job.job_id}", req), None, meta,
                                     now_s=t))

    def _finish(self, t: float, payload: tuple[str, int]) -> None:
        task, gen = payload
        if self._gen.get(task) != gen:
            return
        self._runs.pop(task, None)
        self.recorder.finished(t, task)
        self._apply(self.cell.end(TaskEnded(f"f/{task}/{gen}", task), now_s=t))

    def _on_tick(self, t: float, _: Any) -> None:
        self._tick += 1
        self._apply(self.cell.tick(f"t/{self._tick}", self._tick, now_s=t))
        if self.active:
            self.push(t + self.tick_s, "tick", None)

    def _on_sample(self, t: float, _: Any) -> None:
        self.recorder.sample(t)
        if self.active:
            self.push(t + self.sample_s, "sample", None)
