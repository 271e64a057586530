"""The service and the time simulator take the same decisions for the same inputs (issue 31).

Both run the one ``Cell``, but through different doors: the simulator
(``streams.sim.time.engine``) calls the cell's methods with core events, while
the service folds schema envelopes through ``streams.adapter.apply`` (what its
Faust processor runs, adaptation layer included), hears back decision
envelopes, and learns that a run ended from the executor's ``TaskFinished`` and
that a preempted run stopped from its ``TaskFailed(killed)``. A difference in
either door (a field of a submission the adapter drops, a tick or a finish the
service treats otherwise, a restart that loses queue state) would make the
simulator's figures say nothing about the deployed scheduler.

So one workload runs both ways on the same virtual clock, and the decisions
must be equal, one for one: every placement (task, node, GPUs, gang members),
preemption, stop and refusal, at the same time, in the same order. The inputs are
the same by construction: each job is first written as the ``TaskSubmitted`` a
client would send, and the simulator gets the core request and metadata the
adapter reads from it. The service side also restarts its worker half-way: the
cell is rebuilt from its records (a JSON round trip, as the state tables store
them) and must go on deciding the same. Workloads: the mixed generator
(fractional serving that preempts best-effort rendering, workflows, data
locality) and the training generator (gangs over several nodes).
"""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta
from typing import Any

import orjson
import pytest

from schemas.events import (
    Envelope,
    Event,
    GpuSpec,
    NodeRegistered,
    TaskFailed,
    TaskFinished,
    TaskPlaced,
    TaskPlacedV2,
    TaskPreempted,
    TaskProgress,
    TaskSubmittedV3,
    TaskUnschedulable,
    TaskUsageV2,
    Tick,
    make_event,
)
from schemas.gpu_catalog import get_model
from streams.adapter import apply, task_meta, task_request
from streams.core.cell import Cell, Preempted, Refused, Stopped
from streams.core.decisions import Placement
from streams.core.queue import QueueConfig
from streams.profiles.service import service_scheduler
from streams.sim.time.engine import SimPolicy, Simulator
from streams.sim.time.jobs import Job, job_restart_s, make_job, restart_s
from streams.sim.time.mixed import mixed_cluster, mixed_jobs
from streams.sim.time.speeds import BLIND, LEARNED
from streams.sim.time.training import training_cluster, training_jobs
from streams.sim.traces import NodeSpec

T0 = datetime(2026, 11, 29, tzinfo=UTC)
CELL = "cell-0"
HOUR_S = 3600.0

Decision = tuple[Any, ...]
"""(time_s, kind, task, node, gpus, members): what both runs are compared on."""


def _at(t: float) -> datetime:
    return T0 + timedelta(seconds=t)


# ---- the same inputs -------------------------------------------------------------------

def _whole_seconds(job: Job) -> Job:
    """The job with whole-second times: the service's clock is an event time in
    microseconds since the epoch, the simulator's a float from 0; whole seconds keep
    both exact, so a difference found is a difference of the code, not of rounding."""
    meta = job.meta
    if meta.expected_s is not None:
        meta = dataclasses.replace(meta, expected_s=float(max(round(meta.expected_s), 1)))
    return dataclasses.replace(job, arrival_s=float(round(job.arrival_s)),
                               duration_s=float(max(round(job.duration_s), 1)), meta=meta)


def submission(job: Job) -> Envelope[Event]:
    """The ``TaskSubmitted`` a client sends for ``job`` (version 3: a gang's shape and
    the job's name, the class the speed book learns by)."""
    r, m = job.request, job.meta
    resources: dict[str, Any] = {
        "gpu_count": r.num_gpu, "gpu_share_milli": r.gpu_milli if r.num_gpu else 1000,
        "cpu_milli": r.cpu_milli, "memory_mib": r.memory_mib, "gpu_models": list(r.gpu_models)}
    if r.nodes:
        resources["nodes"] = r.nodes
    if r.gpus_per_node:
        resources["gpus_per_node"] = r.gpus_per_node
    payload = TaskSubmittedV3.model_validate({
        "task_id": job.job_id, "tenant": m.tenant, "priority": m.priority, "qos": m.qos,
        "job_name": m.name or None,
        "resources": resources,
        "features": {"expected_duration_s": m.expected_s},
        "depends_on": list(m.depends_on),
        "inputs": ([{"uri": f"data/{job.job_id}", "size_mib": 1024,
                     "location": r.input_node}] if r.input_node else []),
        "executor": {"kind": "simulated", "simulated": {
            "duration_s": job.duration_s, "gpu_util_pct": 100.0 * job.util,
            "gpu_mem_used_mib": 1024}},
    })
    return make_event(payload, source="cli/test", occurred_at=_at(job.arrival_s), cell=CELL,
                      id_seed=f"submit/{job.job_id}")


def same_inputs(jobs: list[Job]) -> tuple[list[Job], dict[str, Envelope[Event]]]:
    """The submissions, and the jobs as the simulator gets them: the request and the
    metadata the service's adapter reads from each submission."""
    sims, subs = [], {}
    for job in map(_whole_seconds, jobs):
        env = subs[job.job_id] = submission(job)
        sims.append(dataclasses.replace(job, request=task_request(env.payload),
                                        meta=task_meta(env.payload)))
    return sims, subs


def registration(spec: NodeSpec) -> Envelope[Event]:
    m = get_model(spec.gpu_model)
    payload = NodeRegistered(
        node_id=spec.name, cell=CELL, cpu_milli=spec.cpu_milli, memory_mib=spec.memory_mib,
        gpus=[GpuSpec(index=i, uuid=f"GPU-{spec.name}-{i}", model=spec.gpu_model,
                      memory_mib=m.memory_mib, fp32_tflops=m.fp32_tflops,
                      fp16_tflops=m.fp16_tflops, mem_bandwidth_gbps=m.mem_bandwidth_gbps,
                      power_limit_w=m.tdp_w)
              for i in range(spec.gpu_count)])
    return make_event(payload, source=f"agent/{spec.name}", occurred_at=_at(0.0), cell=CELL,
                      id_seed=f"node/{spec.name}")


# ---- the simulator's decisions ---------------------------------------------------------

def simulated(policy: SimPolicy, nodes: list[NodeSpec], jobs: list[Job]) -> list[Decision]:
    out: list[Decision] = []

    def record(sim: Simulator, t: float, o: Any) -> None:
        if isinstance(o, Placement):
            members = tuple((n, tuple(g)) for n, g in o.members)
            out.append((t, "placed", o.task, o.node, tuple(o.gpus), members))
        elif isinstance(o, Preempted):
            out.append((t, "preempted", o.task, o.node, (), ()))
        elif isinstance(o, Stopped):
            out.append((t, "stopped", o.task, o.node, (), ()))
        elif isinstance(o, Refused):
            out.append((t, "refused", o.unschedulable.task, None, (), ()))

    sim = Simulator(policy, nodes, jobs)
    sim.observers.append(record)
    sim.run()
    return out


# ---- the service's decisions -----------------------------------------------------------

class ServicePath(Simulator):
    """The simulator's clock and event heap (so events at one time come in the same
    order), but every input reaches a service cell as the envelope the service would
    read, through ``streams.adapter.apply``, and every decision comes back as an
    envelope: the node's executor then reports the run's end (or, after a preemption,
    that it stopped) with the decision's ids, as a real executor does."""

    def __init__(self, policy: SimPolicy, nodes: list[NodeSpec], jobs: list[Job],
                 submissions: dict[str, Envelope[Event]], restart_after: int) -> None:
        super().__init__(policy, nodes, jobs)
        self.cell = self._fresh_cell()
        self.submissions = submissions
        self.restart_after = restart_after
        self.restarted = False
        self.decisions: list[Decision] = []
        self.runs: dict[str, tuple[str, str, float]] = {}
        """task -> (node, placement decision id, placed at): the executor's view."""
        self.handlers = {"arrive": ServicePath._arrive, "finish": ServicePath._finish,
                         "tick": ServicePath._on_tick, "sample": lambda sim, t, _: None}
        self._inputs = 0
        for spec in nodes:
            self._feed(registration(spec))

    def _fresh_cell(self) -> Cell:
        """What the scheduling processor builds for a cell it meets first."""
        return Cell.restore(CELL, self.policy.scheduler, None, [], [], config=self.policy.queue)

    def _feed(self, env: Envelope[Event]) -> None:
        self._inputs += 1
        if self._inputs == self.restart_after:
            self._restart_worker()
        for d in apply(self.cell, env):
            self._decided(d)

    def _restart_worker(self) -> None:
        """A new worker rebuilds the cell from the records in its state tables."""
        c = self.cell

        def stored(x: Any) -> Any:
            return orjson.loads(orjson.dumps(x))

        self.cell = Cell.restore(c.name, c.scheduler, stored(c.meta_record()),
                                 [(n, stored(c.node_record(n))) for n in c.nodes],
                                 [(t, stored(c.task_record(t))) for t in c.tasks],
                                 config=self.policy.queue)
        self.restarted = True

    def _decided(self, d: Envelope[Event]) -> None:
        p, t = d.payload, self.now_s
        if isinstance(p, TaskPlaced):
            members = tuple((m.node_id, tuple(g.index for g in m.gpus))
                            for m in getattr(p, "members", ()) if isinstance(p, TaskPlacedV2))
            self.decisions.append((t, "placed", p.task_id, p.node_id,
                                   tuple(g.index for g in p.gpus), members))
            job = self.jobs[p.task_id]
            rec = self.cell.tasks[p.task_id]
            self.runs[p.task_id] = (p.node_id, d.event_id, t)
            if job.speeds is None:
                restart = restart_s(job.request.num_gpu) if rec.preemptions else 0.0
                end = t + restart + max(job.duration_s - rec.progress_s, 0.0)
            else:  # the simulator's own run at the true speed, told to the cell as the
                # node's executor tells it: a TaskUsage carrying the run's progress rate
                end = self._true_speed_run(job, p.node_id, rec.preemptions > 0)
                rate = self.true_rate(job, p.node_id) * job.duration_s
                self._report(TaskUsageV2(task_id=p.task_id, node_id=p.node_id, window_s=30.0,
                                         gpus=[], progress=TaskProgress(units=1.0,
                                                                        rate_per_s=rate)),
                             f"usage/{d.event_id}")
            self.push(end, "finish", (p.task_id, d.event_id))
        elif isinstance(p, TaskPreempted) and not p.requeue:
            self.decisions.append((t, "stopped", p.task_id, p.node_id, (), ()))
            self.runs.pop(p.task_id, None)  # a gang's other members: nothing to report
        elif isinstance(p, TaskPreempted):
            self.decisions.append((t, "preempted", p.task_id, p.node_id, (), ()))
            self._stop_run(p.task_id)
            node, _, _ = self.runs.pop(p.task_id)
            self._report(TaskFailed(task_id=p.task_id, node_id=node, decision_id=d.event_id,
                                    reason="killed"), f"killed/{d.event_id}")
        elif isinstance(p, TaskUnschedulable):
            self.decisions.append((t, "refused", p.task_id, None, (), ()))

    def _true_speed_run(self, job: Job, node: str, after_preemption: bool) -> float:
        """``Simulator._start_run`` without its direct call into the cell (the progress
        goes through the adapter here): the run's end at the job's true speed."""
        restart = job_restart_s(job) if after_preemption else 0.0
        rate = self.true_rate(job, node)
        self._runs[job.job_id] = (self.now_s, restart, rate)
        return self.now_s + restart + max(1.0 - self._done.get(job.job_id, 0.0), 0.0) / rate

    def _report(self, payload: Event, seed: str) -> None:
        node = getattr(payload, "node_id", "") or ""
        self._feed(make_event(payload, source=f"executor/{node}", occurred_at=_at(self.now_s),
                              cell=CELL, id_seed=seed))

    def _arrive(self, t: float, job: Job) -> None:
        self._feed(self.submissions[job.job_id])

    def _finish(self, t: float, payload: tuple[str, str]) -> None:
        task, run = payload
        node, placed, started = self.runs.get(task, (None, None, 0.0))
        if placed != run:
            return  # that run was preempted; the executor stopped it
        del self.runs[task]
        self._runs.pop(task, None)
        self._report(TaskFinished(task_id=task, node_id=node, decision_id=run,
                                  runtime_s=t - started), f"finished/{run}")

    def _on_tick(self, t: float, _: Any) -> None:
        self._tick += 1
        self._feed(make_event(Tick(seq=self._tick, interval_s=self.tick_s), cell=CELL,
                              source=f"ticker/{CELL}", occurred_at=_at(t),
                              id_seed=f"tick/{self._tick}"))
        if self.active:
            self.push(t + self.tick_s, "tick", None)


def served(policy: SimPolicy, nodes: list[NodeSpec], jobs: list[Job],
           submissions: dict[str, Envelope[Event]]) -> list[Decision]:
    inputs = len(nodes) + len(jobs)
    run = ServicePath(policy, nodes, jobs, submissions, restart_after=inputs)
    run.run()
    assert run.restarted, "the worker restart must happen during the run"
    return run.decisions


# ---- the workloads ---------------------------------------------------------------------

def _mixed() -> tuple[list[NodeSpec], list[Job]]:
    """The mixed day's mix for 3 hours on every 8th of its nodes, at twice its load per
    GPU: the queue fills, serving preempts rendering, workflows wait for their first
    stage."""
    cluster = mixed_cluster()
    nodes = cluster[::4]
    return nodes, mixed_jobs(seed=5, horizon_s=6 * HOUR_S, load=2.0 * len(nodes) / len(cluster),
                             nodes=nodes)


def _training() -> tuple[list[NodeSpec], list[Job]]:
    """The training generator's gangs on 8 of its 8-GPU nodes, for a day at load 1.3."""
    nodes = training_cluster()[:16]
    return nodes, training_jobs(seed=3, horizon_s=72 * HOUR_S, load=1.3, nodes=nodes)


#: Per-class speed on each model against the V100's, shaped like Gavel's measurements: a
#: class 4x faster on the V100 than on the K80, one that gains 10x, and one that runs
#: faster on the P100 than on the V100.
SPEED_CLASSES = {"resnet": {"V100M16": 1.0, "P100": 0.5, "K80": 0.25},
                 "bert": {"V100M16": 1.0, "P100": 0.3, "K80": 0.1},
                 "lstm": {"V100M16": 1.0, "P100": 1.2, "K80": 0.7}}


def _speeds() -> tuple[list[NodeSpec], list[Job]]:
    """Learned speeds (issue 35): two 4-GPU nodes of each of K80, P100 and V100, and
    jobs of the three classes above (1 or 2 GPUs, run times from 10 min to 10 h on the
    V100, log-uniform, whole seconds on every model) arriving for 2 days at about the
    cluster's capacity: runs report their progress, the cell learns each class's
    speeds, places by them, moves jobs to faster GPUs that idle and swaps them."""
    import random

    from streams.sim.time.speeds import Speeds

    nodes = [NodeSpec(f"{m.lower()}-{i}", 32000, 262144, 4, m)
             for m in ("K80", "P100", "V100M16") for i in range(2)]
    rng = random.Random(35)
    jobs, t = [], 0.0
    for i in range(160):
        t += rng.expovariate(1 / 1500.0)
        name = rng.choice(sorted(SPEED_CLASSES))
        gpus = rng.choice((1, 1, 1, 2))
        v100_s = round(600 * 60 ** rng.random())
        by_model = {m: float(round(v100_s / f)) for m, f in SPEED_CLASSES[name].items()}
        jobs.append(make_job(f"j{i:03d}", round(t), v100_s, gpus, 1000, tenant="lab",
                             name=name, speeds=Speeds(by_model, gpus),
                             restart_cost_s=30.0))
    return nodes, jobs


def _reached(workload: str, decisions: list[Decision]) -> bool:
    """The run reaches what its workload is here for (else equality proves less)."""
    if workload in ("mixed", "speeds"):  # speeds: moves and swaps are preemptions
        return any(d[1] == "preempted" for d in decisions)
    return any(d[1] == "placed" and d[5] for d in decisions)  # gangs over several nodes


@pytest.mark.parametrize("workload", ["mixed", "training", "speeds"])
@pytest.mark.parametrize("predict", [False, True], ids=["queue", "predicted-runtimes"])
def test_the_service_decides_as_the_simulator_for_the_same_inputs(workload, predict):
    nodes, generated = {"mixed": _mixed, "training": _training, "speeds": _speeds}[workload]()
    jobs, submissions = same_inputs(generated)
    policy = SimPolicy("service", service_scheduler("hetsched"),
                       QueueConfig(predict_runtimes=predict),
                       speeds=LEARNED if workload == "speeds" else BLIND)

    expected = simulated(policy, nodes, jobs)
    got = served(policy, nodes, jobs, submissions)

    assert sum(d[1] == "placed" for d in expected) >= len(jobs) * 0.9
    assert _reached(workload, expected)
    assert got == expected
