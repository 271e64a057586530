"""Issue 8's layer on the time simulator: task telemetry, adaptation, faults and their metrics.

Pluggable, as the engine intends (handlers and ``_apply`` are replaced on the
one ``Simulator`` instance, the engine module is untouched):

* ``attach_adaptation(sim, SimAdaptConfig(...))`` installs the layer. Every
  tick it models each running task's utilisation (``streams.sim.time.telemetry``:
  GenAI curve shapes), integrates its progress at the speed its allocation
  gives, and integrates energy with the per-model power model of
  ``streams.core.adapt.energy`` (idle servers power down after ``idle_off_s``).
  With ``adapt=True`` it also feeds the samples to the core as TaskUsage-like
  inputs (``engine.on_usage``, event time only, threshold-triggered like the
  agents: a change of 5 points or 5 minutes of silence), submits through
  ``engine.prepare_submit`` with the task facts the adapter would keep
  (QoS, command, declared duration, elastic bounds), and ticks through
  ``engine.on_tick`` (elastic resizing, probe ends, moves). With
  ``adapt=False`` decisions are exactly those of the plain simulator.
* ``attach_failures`` / ``attach_faults``: seeded node failures (repaired
  after ``repair_s``), GPU failures (for the rest of the run) and thermal
  throttling episodes; the cell's adaptation engine decides what to do, as in
  the service.

Counted: resizes, migrations and their cost (seconds and GPU-seconds), work
lost to failures (GPU-hours of progress of evicted runs, no checkpoints),
energy and energy per finished task, used-GPU utilisation from the model.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from streams.core.adapt import engine
from streams.core.adapt.config import AdaptConfig
from streams.core.adapt.energy import HOST_IDLE_W, gpu_power_w
from streams.core.adapt.migration import cost_s
from streams.core.adapt.outcomes import Evicted, Migrated, Probed, Resized
from streams.core.cell import Outcome, Preempted
from streams.core.decisions import Placement
from streams.core.events import NodeAdded, TaskArrived, TaskEnded
from streams.core.request import MILLI_PER_GPU
from streams.policies.backfill import BASELINES
from streams.sim.time import telemetry
from streams.sim.time.engine import Simulator
from streams.sim.time.jobs import Job

REPORT_DELTA_PCT = 5.0
REPORT_SILENCE_S = 300.0
IDLE_OFF_S = 600.0  # ASSUMPTION: a server idle this long is powered down (both runs alike)


@dataclass
class FaultLog:
    failures: int = 0
    repairs: int = 0
    gpu_failures: int = 0
    throttles: int = 0
    evictions: int = 0
    work_lost_gpu_h: float = 0.0
    failed_nodes: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class SimAdaptConfig:
    """What the layer does; ``core`` is the cell's adaptation config when ``adapt``."""

    adapt: bool = True
    core: AdaptConfig = field(default_factory=lambda: AdaptConfig(probe_s=60.0,
                                                                  probe_in_place_gpus=2))
    seed: int = 42
    elastic_classes: tuple[str, ...] = ("training", "workflow")
    """Whole-GPU multi-GPU jobs of these classes declare elastic bounds [n/2, min(2n, 8)]."""
    idle_off_s: float = IDLE_OFF_S
    shaped: bool = True
    """Shape utilisation by the GenAI curves; False: every task keeps its job's ``util``."""
    model_speed: bool = False
    """Scale a task's work rate by its GPU model (``telemetry.model_speed``: FP32 TFLOPS
    for compute work, memory bandwidth for data work, against the fastest model the job
    may use); False: every model runs a task at the speed its duration assumes. The core
    knows it only through ``core.model_speed`` (``AdaptConfig``), set by the caller: the
    command line sets both, the bench also runs a speed-blind core on speed-true tasks."""
    data_classes: tuple[str, ...] = ()
    """With ``model_speed``: task classes taken as data work besides jobs that name an
    input node (a sensitivity check, e.g. ``("inference",)`` for bandwidth-bound serving)."""


@dataclass(slots=True)
class _Run:
    """One task's current run: work left (seconds at speed 1), speed, curve."""

    gen: int
    left_s: float
    speed: float
    since_s: float
    curve: int
    offset_s: float
    util: float = 0.0
    busy: float = 0.0
    sent_pct: float = -1.0
    sent_s: float = -1.0


@dataclass
class AdaptStats:
    """Metrics of the layer (see the module docstring)."""

    energy_j: float = 0.0
    energy_offpeak_j: float = 0.0
    busy_gpu_s: float = 0.0
    alloc_gpu_s: float = 0.0
    span_s: float = 0.0
    usage_reports: int = 0
    migrations: int = 0
    migration_cost_s: float = 0.0
    migration_cost_gpu_s: float = 0.0
    moves_by_code: dict[str, int] = field(default_factory=dict)
    resizes_up: int = 0
    resizes_down: int = 0
    probes: int = 0
    finished: int = 0
    finished_offpeak: int = 0
    powered_node_s: float = 0.0


class AdaptLayer:
    """The layer installed on one simulator; see the module docstring."""

    def __init__(self, sim: Simulator, cfg: SimAdaptConfig,
                 offpeak: tuple[tuple[float, float], ...] = ()) -> None:
        self.sim, self.cfg = sim, cfg
        self.offpeak = offpeak
        self.stats = AdaptStats()
        self.faults = FaultLog()
        self.runs: dict[str, _Run] = {}
        self.pending: dict[str, int] = {}  # task -> generation of its scheduled finish
        self.throttled: set[tuple[str, int]] = set()
        self.shapes = telemetry.genai_shapes() if cfg.shaped else None
        s = sim.cell.state
        n = s.n
        self.node_tdp = np.array([float(s.model_tdp_w[m]) if m >= 0 else 0.0
                                  for m in s.model[:n]])
        self.gpu_mem = np.array([float(s.catalog[s.model_names[m]].memory_mib)
                                 if m >= 0 and s.model_names[m] in s.catalog else 0.0
                                 for m in s.model[:n]])
        models = sorted({s.model_names[m] for m in s.model[:n] if m >= 0})
        self.model_figures = {
            kind: {name: telemetry.model_figure(spec.fp32_tflops, spec.mem_bandwidth_gbps, kind)
                   for name in models
                   if (spec := s.catalog.get(name)) is not None}
            for kind in ("compute", "data")}
        self.work: dict[str, tuple[str, float]] = {}  # job -> (kind, reference figure)
        self.last_busy_s = np.zeros(n)
        self.last_t = 0.0
        sim.adapt_layer = self  # type: ignore[attr-defined]
        if cfg.adapt:
            sim.cell.adapt.config = cfg.core
            sim.handlers["arrive"] = AdaptLayer._arrive_h(self)
        else:
            sim.cell.adapt.config = replace(cfg.core, probe_s=0.0)
        sim.handlers["tick"] = self._tick
        sim._apply = self._apply  # type: ignore[method-assign]
        sim.handlers["finish"] = self._finish

    # ---- inputs ------------------------------------------------------------------------

    @staticmethod
    def _arrive_h(layer: AdaptLayer) -> Any:
        def arrive(sim: Simulator, t: float, job: Job) -> None:
            layer._arrive(t, job)
        return arrive

    def _arrive(self, t: float, job: Job) -> None:
        """Submit with the facts the service's adapter keeps (``streams.adapter.task_facts``)."""
        sim = self.sim
        req = sim.request(job)
        m = job.meta
        elastic = None
        if (req.num_gpu >= 2 and req.gpu_milli >= MILLI_PER_GPU
                and job.task_class in self.cfg.elastic_classes):
            elastic = [max(1, req.num_gpu // 2), min(2 * req.num_gpu, 8)]
        facts: dict[str, Any] = {"qos": m.qos, "cmd": f"{m.tenant}/{job.task_class}",
                                 "elastic": elastic, "kind": None, "dur": m.expected_s,
                                 "gpu_mem": None}
        req = engine.prepare_submit(sim.cell, req, facts)
        sim.recorder.arrived(t, job)
        outs = sim.cell.submit(TaskArrived(f"a/{job.job_id}", req), {"adapt": facts}, m,
                               now_s=t)
        sim._apply(outs)

    def _finish(self, sim: Simulator, t: float, payload: tuple[str, int]) -> None:
        task, gen = payload
        if self.pending.get(task) != gen:
            sim._live += 1  # stale: already uncounted by _void, the pop took one more
            return
        del self.pending[task]
        self.runs.pop(task, None)
        self.stats.finished += 1
        if self._is_offpeak(t):
            self.stats.finished_offpeak += 1
        if self.cfg.adapt:
            rec = sim.cell.tasks.get(task)
            started = rec.started_s if rec is not None else t
            engine.on_task_end(sim.cell, task, max(t - started, 0.0))
        sim.recorder.finished(t, task)
        self._apply(sim.cell.end(TaskEnded(f"f/{task}/{gen}", task), now_s=t))

    # ---- outcomes ----------------------------------------------------------------------

    def _apply(self, outcomes: list[Outcome]) -> None:
        """Every outcome list passes ``engine.finish`` (probe placements become ``Probed``
        and start their window, whichever input placed them), then the books follow."""
        sim, t = self.sim, self.sim.now_s
        for o in engine.finish(sim.cell, outcomes, t):
            if isinstance(o, Probed):
                self.stats.probes += 1
                self._start(o.placement)
                sim.recorder.outcome(t, o.placement)
            elif isinstance(o, Placement):
                self._start(o)
                sim.recorder.outcome(t, o)
            elif isinstance(o, Preempted):
                self._void(o.task)
                self.runs.pop(o.task, None)
                sim.cell.ack_preempted(o.task)
                sim.recorder.outcome(t, o)
            elif isinstance(o, Evicted):
                self._evicted(o)
            elif isinstance(o, Migrated):
                self._migrated(o)
            elif isinstance(o, Resized):
                if o.direction == "up":
                    self.stats.resizes_up += 1
                else:
                    self.stats.resizes_down += 1
                self._reschedule(o.task)
                self._resend(o.task)
            else:
                sim.recorder.outcome(t, o)
            for obs in sim.observers:
                obs(sim, t, o)

    def _start(self, p: Placement) -> None:
        sim = self.sim
        job = sim.jobs[p.task]
        rec = sim.cell.tasks[p.task]
        self._void(p.task)
        gen = sim._gen.get(p.task, 0)
        curve, offset = (telemetry.pick(p.task, self.cfg.seed, self.shapes)
                         if self.shapes is not None else (0, 0.0))
        run = _Run(gen, max(job.duration_s - rec.progress_s, 0.0), 1.0, sim.now_s, curve,
                   offset)
        self.runs[p.task] = run
        self._set_speed(p.task, run, sim.now_s)
        self._push_finish(p.task, run)

    def _evicted(self, o: Evicted) -> None:
        """A failure stopped the run: its finish is void, its progress lost (no checkpoint)."""
        sim, t = self.sim, self.sim.now_s
        self.runs.pop(o.task, None)
        if not o.requeue:
            return
        self.faults.evictions += 1
        self._void(o.task)
        st = sim.recorder.jobs.get(o.task)
        if st is None or st.status != "running":
            return
        gpus = st.job.request.gpu_total_milli / MILLI_PER_GPU
        self.faults.work_lost_gpu_h += gpus * max(t - st.run_since_s, 0.0) / 3600.0
        sim.recorder._stop(st, t)
        st.status = "queued"

    def _migrated(self, o: Migrated) -> None:
        """A move restarts the task on its destination: the transfer and restart time is
        redone work (the core's migration cost model)."""
        t = self.sim.now_s
        run = self.runs.get(o.task)
        if run is None:
            return
        rec = self.sim.cell.tasks[o.task]
        self._advance(run, t)
        cost = float(o.metrics.get("cost_s", cost_s(rec.request.memory_mib,
                                                    self.sim.cell.adapt.config)))
        run.left_s += cost
        if o.code != "probe_classified":
            self.stats.migrations += 1
            self.stats.migration_cost_s += cost
            self.stats.migration_cost_gpu_s += cost * rec.request.gpu_total_milli / MILLI_PER_GPU
            self.stats.moves_by_code[o.code] = self.stats.moves_by_code.get(o.code, 0) + 1
        self._reschedule(o.task)
        self._resend(o.task)

    def _resend(self, task: str) -> None:
        """A new allocation starts a new series: the next tick reports whatever the value
        (the core cleared the task's window; the agent reports a changed allocation)."""
        run = self.runs.get(task)
        if run is not None:
            run.sent_pct = -1.0

    # ---- progress ----------------------------------------------------------------------

    def _advance(self, run: _Run, t: float) -> None:
        run.left_s = max(run.left_s - run.speed * max(t - run.since_s, 0.0), 0.0)
        run.since_s = t

    def _set_speed(self, task: str, run: _Run, t: float, hot: frozenset[str] = frozenset()
                   ) -> None:
        sim = self.sim
        job = sim.jobs[task]
        rec = sim.cell.tasks[task]
        shape = (self.shapes.at(run.curve, run.offset_s + t)
                 if self.shapes is not None else 1.0)
        run.util = telemetry.utilisation(job.util, job.task_class, shape)
        r = job.request.gpu_total_milli / MILLI_PER_GPU
        a = rec.request.gpu_total_milli / MILLI_PER_GPU
        node = rec.node or ""
        throttled = any((node, g) in self.throttled for g in rec.gpus)
        alloc_speed = telemetry.speed(r, a, run.util, throttled, node in hot)
        run.busy = telemetry.busy(r, a, run.util, alloc_speed)
        run.speed = alloc_speed * (self._model_factor(job, node) if self.cfg.model_speed
                                   else 1.0)

    def _model_factor(self, job: Job, node: str) -> float:
        """The GPU model's speed for the job's kind of work (1 off the flag, or for a
        model the catalog lacks)."""
        if job.request.num_gpu == 0 or not node:
            return 1.0
        kind, ref = self.work.get(job.job_id) or self._work_of(job)
        s = self.sim.cell.state
        m = int(s.model[s.node_index[node]])
        figure = self.model_figures[kind].get(s.model_names[m] if m >= 0 else "", 0.0)
        return telemetry.model_speed(figure, ref)

    def _work_of(self, job: Job) -> tuple[str, float]:
        kind = telemetry.work_kind(job.request.input_node is not None
                                   or job.task_class in self.cfg.data_classes)
        ref = telemetry.reference_figure(self.model_figures[kind], job.request.gpu_models)
        self.work[job.job_id] = (kind, ref)
        return kind, ref

    def _push_finish(self, task: str, run: _Run) -> None:
        t = self.sim.now_s
        if run.speed <= 0:
            return
        self._void(task)
        gen = self.sim._gen.get(task, 0)
        run.gen = gen
        self.pending[task] = gen
        self.sim.push(t + run.left_s / run.speed, "finish", (task, gen))

    def _void(self, task: str) -> None:
        """The task's scheduled finish no longer holds: a new generation, and the stale
        event stops counting as live work (else the run would tick on until it pops)."""
        self.sim._gen[task] = self.sim._gen.get(task, 0) + 1
        if self.pending.pop(task, None) is not None:
            self.sim._live -= 1

    def _reschedule(self, task: str, hot: frozenset[str] = frozenset()) -> None:
        """The task's allocation or GPUs' state changed: progress so far, new speed, new end."""
        run = self.runs.get(task)
        if run is None:
            return
        t = self.sim.now_s
        self._advance(run, t)
        self._set_speed(task, run, t, hot)
        self._push_finish(task, run)
        st = self.sim.recorder.jobs.get(task)
        if st is not None and st.status == "running":  # keep allocation % in step
            self.sim.recorder._add(st, -1)
            st.alloc_milli = self.sim.cell.tasks[task].request.gpu_total_milli
            self.sim.recorder._add(st, +1)

    # ---- ticks -------------------------------------------------------------------------

    def _tick(self, sim: Simulator, t: float, _: Any) -> None:
        """Account the interval, model and report usage, then the cell's (adaptive) tick."""
        self._account(t)
        hot = self._hot_nodes()
        for task, run in list(self.runs.items()):
            old = run.speed
            self._advance(run, t)
            self._set_speed(task, run, t, hot)
            if abs(run.speed - old) > 1e-9:
                self._push_finish(task, run)
            if self.cfg.adapt:
                self._report(task, run, t)
        sim._tick += 1
        cause = f"t/{sim._tick}"
        if self.cfg.adapt:
            self._apply(engine.on_tick(sim.cell, cause, sim._tick, t))
        else:
            self._apply(sim.cell.tick(cause, sim._tick, now_s=t))
        if sim.active:
            sim.push(t + sim.tick_s, "tick", None)

    def _report(self, task: str, run: _Run, t: float) -> None:
        """A TaskUsage-like sample, sent as an agent would: on change or after silence."""
        rec = self.sim.cell.tasks[task]
        if rec.node is None or not rec.gpus:
            return
        a = rec.request.gpu_total_milli / MILLI_PER_GPU
        pct = 100.0 * run.busy / a if a > 0 else 0.0
        if (abs(pct - run.sent_pct) < REPORT_DELTA_PCT
                and t - run.sent_s < REPORT_SILENCE_S):
            return
        run.sent_pct, run.sent_s = pct, t
        i = self.sim.cell.state.node_index[rec.node]
        mem = int(0.8 * self.gpu_mem[i] * rec.request.gpu_milli / MILLI_PER_GPU)
        self.stats.usage_reports += 1
        self._apply(engine.on_usage(self.sim.cell, f"u/{task}/{t}", task, rec.node, t,
                                    [(g, pct, mem) for g in rec.gpus]))

    def _gpu_busy(self) -> np.ndarray:
        s = self.sim.cell.state
        util = np.zeros((s.n, s.gpu_free.shape[1]))
        for task, run in self.runs.items():
            rec = self.sim.cell.tasks[task]
            if rec.node is None or not rec.gpus:
                continue
            i = s.node_index[rec.node]
            per = run.busy / len(rec.gpus)
            for g in rec.gpus:
                util[i, g] += per
        return np.minimum(util, 1.0)

    def _hot_nodes(self) -> frozenset[str]:
        """Nodes whose every GPU is above the hot-spot mark (the core's ``hot_util_pct``),
        shared by two or more tasks (contention needs company)."""
        s = self.sim.cell.state
        util = self._gpu_busy()
        mark = self.sim.cell.adapt.config.hot_util_pct / 100.0
        out = []
        for i in range(s.n):
            c = int(s.gpu_count[i])
            if c and (util[i, :c] >= mark).all() and len(
                    self.sim.cell.on_node.get(s.node_names[i], {})) >= 2:
                out.append(s.node_names[i])
        return frozenset(out)

    def _is_offpeak(self, t: float) -> bool:
        day = t % 86_400.0
        return any(a <= day < b for a, b in self.offpeak)

    def _account(self, t: float) -> None:
        """Energy over ``[last tick, t]`` (the whole run, so that energy per finished task
        counts every task's energy); busy and allocated GPU-seconds within the horizon."""
        dt = t - self.last_t
        if dt <= 0:
            return
        s = self.sim.cell.state
        n = s.n
        util = self._gpu_busy()
        count = s.gpu_count[:n]
        alloc = count * MILLI_PER_GPU - s.gpu_free[:n].sum(axis=1)
        busy_nodes = alloc > 0
        self.last_busy_s[busy_nodes] = t
        powered = busy_nodes | (t - self.last_busy_s < self.cfg.idle_off_s)
        power = 0.0  # watts, summed in Python floats
        for i in np.flatnonzero(powered).tolist():
            c = int(count[i])
            power += HOST_IDLE_W + sum(gpu_power_w(float(self.node_tdp[i]), float(u))
                                       for u in util[i, :c])
        self.stats.energy_j += power * dt
        if self._is_offpeak(self.last_t):
            self.stats.energy_offpeak_j += power * dt
        self.stats.powered_node_s += float(powered.sum()) * dt
        win = min(t, self.sim.horizon_s) - min(self.last_t, self.sim.horizon_s)
        if win > 0:
            self.stats.busy_gpu_s += float(util.sum()) * win
            self.stats.alloc_gpu_s += float(np.clip(alloc, 0, None).sum()) / MILLI_PER_GPU * win
            self.stats.span_s += win
        self.last_t = t

    # ---- faults ------------------------------------------------------------------------

    def fail_node(self, t: float, node: str) -> None:
        self.faults.failures += 1
        self.faults.failed_nodes.append(node)
        self._apply(engine.on_node_down(self.sim.cell, f"nf/{node}/{t}", node, "node_failed"))

    def node_back(self, t: float, node: str) -> None:
        self.faults.repairs += 1
        added = self.sim.cell.nodes[node].added
        outs = self.sim.cell.add_node(NodeAdded(f"nb/{node}/{t}", node, added.cpu_milli,
                                                added.memory_mib, added.gpu_count,
                                                added.gpu_model), now_s=t)
        engine.on_registered(self.sim.cell, node, t, by_agent=False)
        self._apply(outs)

    def fail_gpu(self, t: float, node: str, gpu: int) -> None:
        self.faults.gpu_failures += 1
        self._apply(engine.on_gpu_failed(self.sim.cell, f"gf/{node}/{gpu}/{t}", node, gpu,
                                         "xid 79 (fallen off the bus)"))

    def throttle(self, t: float, node: str, gpu: int, on: bool) -> None:
        """A GPU starts or stops thermal throttling: its tasks slow down; with adaptation
        the cell hears it as GPU telemetry (temperature and throttle reason)."""
        key = (node, gpu)
        if on:
            self.faults.throttles += 1
            self.throttled.add(key)
        else:
            self.throttled.discard(key)
        cell = self.sim.cell
        for task in list(cell.on_node.get(node, {})):
            if gpu in cell.tasks[task].gpus:
                self._reschedule(task)
        if not self.cfg.adapt:
            return
        s = cell.state
        i = s.node_index[node]
        spec = s.catalog.get(s.model_names[int(s.model[i])])
        if spec is None:
            return
        booked = sum(float(spec.memory_mib) * cell.tasks[x].request.gpu_milli / MILLI_PER_GPU
                     for x in cell.on_node.get(node, {}) if gpu in cell.tasks[x].gpus)
        temp = spec.throttle_temp_c + 2.0 if on else spec.throttle_temp_c - 20.0
        self._apply(engine.on_telemetry(
            cell, f"th/{node}/{gpu}/{t}", node, gpu, t, temperature_c=temp,
            throttle=["hw_thermal_slowdown"] if on else [], mem_used_mib=int(booked),
            mem_util_pct=None, xids=[], ecc_dbe=0))

    # ---- summary -----------------------------------------------------------------------

    def summary(self) -> dict[str, float]:
        st, s = self.stats, self.sim.cell.state
        cap = max(float(s.gpu_count[: s.n].sum()), 1.0) * max(st.span_s, 1.0)
        counters = self.sim.cell.adapt.meta.get("counters", {})
        return {
            "used_gpu_pct": 100.0 * st.busy_gpu_s / cap,
            "alloc_gpu_pct": 100.0 * st.alloc_gpu_s / cap,
            "busy_of_alloc_pct": 100.0 * st.busy_gpu_s / max(st.alloc_gpu_s, 1.0),
            "energy_kwh": float(st.energy_j) / 3.6e6,
            "energy_per_task_wh": float(st.energy_j) / 3600.0 / max(st.finished, 1),
            "energy_offpeak_kwh": st.energy_offpeak_j / 3.6e6,
            "energy_per_task_offpeak_wh": st.energy_offpeak_j / 3600.0 / max(
                st.finished_offpeak, 1),
            "powered_nodes_mean": st.powered_node_s / max(self.last_t, 1.0),
            "resizes_up": float(st.resizes_up), "resizes_down": float(st.resizes_down),
            "migrations": float(st.migrations), "migration_cost_s": st.migration_cost_s,
            "migration_cost_gpu_h": st.migration_cost_gpu_s / 3600.0,
            "probes": float(st.probes), "usage_reports": float(st.usage_reports),
            "migrations_refused": float(counters.get("migrations_refused", 0)),
            "migrations_over_budget": float(counters.get("migrations_over_budget", 0)),
            "nodes_emptied": float(counters.get("consolidations", 0)),
            "consolidations_refused_energy": float(
                counters.get("consolidations_refused_energy", 0)),
            "defrags": float(counters.get("defrags", 0)),
            "evictions": float(self.faults.evictions),
            "work_lost_gpu_h": self.faults.work_lost_gpu_h,
            **{f"moves_{k}": float(v) for k, v in sorted(st.moves_by_code.items())},
        }


def attach_adaptation(sim: Simulator, cfg: SimAdaptConfig | None = None,
                      offpeak: tuple[tuple[float, float], ...] = ()) -> AdaptLayer:
    """Install the layer (see the module docstring); call before ``sim.run()``."""
    return AdaptLayer(sim, cfg or SimAdaptConfig(), offpeak)


def _layer(sim: Simulator) -> AdaptLayer:
    layer = getattr(sim, "adapt_layer", None)
    if layer is None:
        layer = attach_adaptation(sim, SimAdaptConfig(adapt=False))
    assert isinstance(layer, AdaptLayer)
    return layer


def attach_faults(sim: Simulator, *, seed: int, node_fraction: float = 0.0,
                  gpu_fraction: float = 0.0, throttle_fraction: float = 0.0,
                  repair_s: float = 3600.0, throttle_s: float = 7200.0,
                  horizon_s: float | None = None) -> FaultLog:
    """A seeded fault plan within the horizon (10%-90% of it): ``node_fraction`` of the
    nodes fail (repaired ``repair_s`` later), ``gpu_fraction`` of the GPUs fail for good,
    ``throttle_fraction`` of the GPUs throttle for ``throttle_s``. Uses the installed
    layer, or installs one with adaptation off (the cell still handles the failures)."""
    layer = _layer(sim)
    s = sim.cell.state
    names = list(sim.cell.nodes)
    rng = np.random.default_rng(seed)
    horizon = horizon_s if horizon_s is not None else sim.horizon_s
    count = round(node_fraction * len(names))
    chosen = sorted(rng.choice(len(names), size=count, replace=False).tolist()) if count else []
    times = rng.uniform(0.1 * horizon, 0.9 * horizon, size=len(chosen))
    for i, t in zip(chosen, times, strict=True):
        sim.push(float(t), "node_fail", names[i])
        sim.push(float(t) + repair_s, "node_back", names[i])
    gpus = [(n, g) for n in names for g in range(int(s.gpu_count[s.node_index[n]]))]
    for what, fraction in (("gpu_fail", gpu_fraction), ("throttle_on", throttle_fraction)):
        k = round(fraction * len(gpus))
        picks = sorted(rng.choice(len(gpus), size=k, replace=False).tolist()) if k else []
        when = rng.uniform(0.1 * horizon, 0.9 * horizon, size=len(picks))
        for j, t in zip(picks, when, strict=True):
            sim.push(float(t), what, gpus[j])
            if what == "throttle_on":
                sim.push(float(t) + throttle_s, "throttle_off", gpus[j])
    sim.handlers["node_fail"] = lambda _s, t, node: layer.fail_node(t, node)
    sim.handlers["node_back"] = lambda _s, t, node: layer.node_back(t, node)
    sim.handlers["gpu_fail"] = lambda _s, t, ng: layer.fail_gpu(t, ng[0], ng[1])
    sim.handlers["throttle_on"] = lambda _s, t, ng: layer.throttle(t, ng[0], ng[1], True)
    sim.handlers["throttle_off"] = lambda _s, t, ng: layer.throttle(t, ng[0], ng[1], False)
    return layer.faults


def attach_failures(sim: Simulator, fraction: float, seed: int, repair_s: float = 3600.0,
                    horizon_s: float | None = None) -> FaultLog:
    """Node failures only (the issue's 5% target); see ``attach_faults``."""
    return attach_faults(sim, seed=seed, node_fraction=fraction, repair_s=repair_s,
                         horizon_s=horizon_s)


# ---- command line (``hetsched simulate --mode time``) -----------------------------------------

def add_arguments(parser: Any) -> None:
    """The adaptation and fault options of ``hetsched simulate --mode time``."""
    g = parser.add_argument_group("time mode: adaptation and faults (issue 8)")
    g.add_argument("--adapt", action="store_true",
                   help="elastic resizing, probing (60 s; 2+ GPUs in place), hot-spot and "
                   "throttle migration, "
                   "fed by GenAI-shaped task utilisation (not the fifo/static/backfill baselines)")
    g.add_argument("--defrag", action="store_true",
                   help="with --adapt: defragmentation moves for stuck multi-GPU tasks")
    g.add_argument("--consolidate", type=float, default=0.0, metavar="PCT",
                   help="with --adapt: consolidate onto fewer nodes below PCT%% allocation")
    g.add_argument("--model-speed", action="store_true",
                   help="tasks run at their GPU model's speed (FP32 TFLOPS for compute work, "
                   "memory bandwidth for data work, vs the fastest model the job may use); "
                   "with --adapt the core's moves weigh it too (AdaptConfig.model_speed)")
    g.add_argument("--fail-fraction", type=float, default=0.0, metavar="F",
                   help="share of nodes that fail during the run (repaired 1 h later)")
    g.add_argument("--gpu-fail-fraction", type=float, default=0.0, metavar="F",
                   help="share of GPUs that fail for the rest of the run")
    g.add_argument("--throttle", type=float, default=0.0, metavar="F",
                   help="share of GPUs thermally throttled (half speed) for 2 h each")


def attach_from_args(sim: Simulator, args: Any, policy: str) -> AdaptLayer | None:
    """Install what the options ask for on one run; None when nothing is asked."""
    adapt = bool(getattr(args, "adapt", False)) and policy not in BASELINES
    faults = (getattr(args, "fail_fraction", 0.0), getattr(args, "gpu_fail_fraction", 0.0),
              getattr(args, "throttle", 0.0))
    model_speed = bool(getattr(args, "model_speed", False))
    if not adapt and not any(faults) and not getattr(args, "adapt", False) and not model_speed:
        return None
    seed = int(getattr(args, "seeds", [42])[0])
    core = AdaptConfig(probe_s=60.0, probe_in_place_gpus=2,
                       defrag=bool(getattr(args, "defrag", False)),
                       consolidate_pct=float(getattr(args, "consolidate", 0.0)),
                       model_speed=model_speed)
    layer = attach_adaptation(sim, SimAdaptConfig(adapt=adapt, core=core, seed=seed,
                                                  model_speed=model_speed))
    if any(faults):
        attach_faults(sim, seed=seed, node_fraction=faults[0], gpu_fraction=faults[1],
                      throttle_fraction=faults[2])
    return layer


REPORT_ROWS = (
    ("used GPU utilisation (%)", "used_gpu_pct"), ("allocated GPUs (%)", "alloc_gpu_pct"),
    ("energy (kWh)", "energy_kwh"), ("energy per finished task (Wh)", "energy_per_task_wh"),
    ("powered nodes, mean", "powered_nodes_mean"), ("resizes up", "resizes_up"),
    ("resizes down", "resizes_down"), ("probes", "probes"), ("migrations", "migrations"),
    ("migration cost (s of task time)", "migration_cost_s"),
    ("migration cost (GPU-h)", "migration_cost_gpu_h"),
    ("migrations refused (cost)", "migrations_refused"),
    ("migrations over budget", "migrations_over_budget"), ("evictions", "evictions"),
    ("work lost to failures (GPU-h)", "work_lost_gpu_h"),
)


def report_table(runs: dict[str, dict[str, float]]) -> str:
    """Markdown table of the layer's metrics, one column per run."""
    names = list(runs)
    lines = ["| metric | " + " | ".join(names) + " |",
             "|---|" + "---:|" * len(names)]
    for label, key in REPORT_ROWS:
        lines.append(f"| {label} | " + " | ".join(f"{runs[n].get(key, 0.0):,.1f}"
                                                  for n in names) + " |")
    moves = sorted({k for r in runs.values() for k in r if k.startswith("moves_")})
    for k in moves:
        lines.append(f"| migrations: {k[6:]} | " + " | ".join(
            f"{runs[n].get(k, 0.0):,.0f}" for n in names) + " |")
    return "\n".join(lines) + "\n"
