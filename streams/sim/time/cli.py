"""``hetsched simulate --mode time``: compare schedulers over time on one workload and cluster.

Workloads: ``--workload mixed`` (seeded generator, default), ``training``
(seeded heavy-tailed training jobs with gangs, ``streams.sim.time.training``),
``openb`` (one day of the openb trace: ``--tasks`` pod list, ``--day-start``
seconds, default the busiest day), ``lora`` (genai LoRA requests,
``--time-scale`` compresses arrivals) or ``--jobs FILE`` (the generic CSV of
docs/simulation.md). ``--load L`` multiplies the arrival rate of any of them
by L (``load``).
Policies: the baselines ``fifo`` (alias ``static``: whole GPUs, strict FCFS, no
backfill) and ``backfill`` (whole GPUs, priority then FCFS, EASY backfilling),
the research baselines ``tiresias``, ``srtf-oracle`` (``baselines``) and Gavel's
round-based ``gavel-las``, ``gavel-fifo``, ``las`` (``gavel``),
and any built-in placement profile, run with the fair-share queue, backfill and
preemption. Writes DIR/timeseries.csv,
DIR/classes.csv, DIR/timeline.png and DIR/summary.md.

Example:
    hetsched simulate --mode time --workload mixed --policies static,hetsched --out out/mixed

Also DIR/summary.json (``summary`` per policy, with ``sim_seconds``), DIR/tenants.csv,
DIR/cdf.png (JCT and wait CDFs), DIR/tenants.png and, with ``--jobs-out FILE``,
one CSV row per job and policy (``report.write_job_rows``); metrics defined in
streams.sim.time.metrics.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from schemas.command_line import Limit, out_of_range
from streams.core.profile import Profile, get_profile
from streams.core.queue import QueueConfig
from streams.policies import backfill, speed, static
from streams.policies.fragmentation import TypicalTasks
from streams.profiles.compile import compile_profile
from streams.profiles.objectives import schedule_from_config
from streams.sim.time import baselines, gavel, progress, report, training
from streams.sim.time.cell_options import cell_only_flags
from streams.sim.time.engine import SimPolicy, make_simulator
from streams.sim.time.jobs import Job, restart_note
from streams.sim.time.metrics import Recorder
from streams.sim.time.speeds import BLIND
from streams.sim.traces import NodeSpec

DAY_S = 86_400.0
LORA_CLUSTER = (2, 8, "A10")  # nodes, GPUs per node, model for the genai requests
# hetsched in time mode: the packing score (0..100) plus rack-aware locality (seconds to move
# a task's input: ~0.9 s within a rack, ~3.4 s across, with the default links), so locality
# decides between placements that pack equally well and never overrides packing.
TIME_PROFILE = Profile("hetsched", {"hetsched": 1.0, "locality": 1.0})
SPEED_WEIGHT = 100.0
"""Weight of the ``speed`` term (0..100, 100 on the job's fastest model) in the cell's
policies when they are told speeds (``--speeds oracle``): a model 1 % faster outweighs
packing's whole range (0..100, weight 1), so the job goes to its fastest free model and
packing chooses among the nodes of that model (issue 35: "prefer the model with the
shortest duration")."""
PREDICTING = "hetsched-predict"
"""The former name of hetsched's queue, kept as an alias of ``hetsched``."""
FCFS = "hetsched-fcfs"
"""hetsched without ``QueueConfig.predict_runtimes``: the fair queue orders by priority,
aging and arrival only, and reservations assume ``default_duration_s`` for tasks that
declare no runtime. hetsched's queue before issue 31, kept to measure what prediction
adds."""


NOTES = {
    backfill.NAME: "backfill: reservations assume each job's declared `expected_s`, else its "
                   "TRUE duration (a perfect estimate, which favours this baseline).",
    static.NAME: "static: the no-backfill straw man (whole GPUs, strict FCFS); the same "
                 "policy as fifo.",
}
"""A line under the table for each baseline run, saying what the reader must know."""


def backfill_estimate(job: Job) -> float:
    """The runtime ``backfill``'s reservations assume: the declared ``expected_s``, else
    the truth (``streams.policies.backfill`` says why that favours the baseline)."""
    return job.meta.expected_s if job.meta.expected_s is not None else job.duration_s


def demand_typical(jobs: list[Job], coverage: float = 0.95) -> TypicalTasks:
    """The typical task mix weighted by the capacity each shape occupies, not by count.

    Why: fragmentation-aware packing asks "which shapes must the free capacity
    serve?". Counted per job, a day of the mixed workload is 96 % short
    fractional inference, so the 95 % coverage keeps only inference shapes and
    packing never protects the whole nodes that 8-GPU training needs, nor
    leaves the A100/V100 that training is restricted to. Weighted by requested
    GPU milli x declared runtime (``expected_s``, else the duration), shapes
    count as much as the capacity they hold. Same shape key and coverage rule
    as ``TypicalTasks.from_tasks``; CPU-only tasks count their CPU instead.
    """
    weight: dict[tuple[int, int, int, str], float] = {}
    for j in jobs:
        r = j.request
        secs = j.meta.expected_s or j.duration_s
        demand = r.gpu_total_milli if r.num_gpu else r.cpu_milli / 1000.0
        key = (r.cpu_milli, r.gpu_milli, r.num_gpu, "|".join(r.gpu_models))
        weight[key] = weight.get(key, 0.0) + demand * secs
    total = sum(weight.values())
    if not weight or total <= 0:
        return TypicalTasks.from_tasks([j.request for j in jobs])
    kept: list[tuple[tuple[int, int, int, str], float]] = []
    cum = 0.0
    for shape, w in sorted(weight.items(), key=lambda kv: (kv[1], kv[0]), reverse=True):
        kept.append((shape, w))
        cum += w
        if cum >= coverage * total:
            break
    return TypicalTasks(
        cpu_milli=np.array([k[0] for k, _ in kept], np.int64),
        gpu_milli=np.array([k[1] for k, _ in kept], np.int64),
        num_gpu=np.array([k[2] for k, _ in kept], np.int64),
        spec=tuple(tuple(m for m in k[3].split("|") if m) for k, _ in kept),
        prob=np.array([w / cum for _, w in kept], np.float64))


def make_policy(name: str, jobs: list[Job], seed: int = 42,
                objectives: Any = None, speeds: str = BLIND,
                type_order: tuple[str, ...] = ()) -> SimPolicy:
    """A baseline (``fifo``/``static``, ``backfill``), or a placement profile with the
    fair queue, backfill and preemption.

    ``objectives``: a raw objectives config (``WeightSchedule.from_config``) whose
    rules replace the profile by hour and load; the baselines ignore it. ``speeds``:
    what the profile policies are told of each job's per-model speeds (``--speeds``;
    not oracle: the ``speed`` term is added with ``SPEED_WEIGHT``); the baselines stay
    blind (they model schedulers that know no speeds). ``type_order``: the GPU models
    in the order Gavel's round-based policies walk them (``gavel.file_type_order``).
    """
    if name in static.NAMES or name in baselines.NAMES or name in gavel.NAMES:
        ctx = {"typical": TypicalTasks.from_tasks([j.request for j in jobs]), "seed": seed}
        sched = compile_profile(get_profile(static.PLACEMENT_PROFILE), ctx)
        if name in gavel.NAMES:  # Gavel's round-based policies, the round simulator
            return gavel.make_rounds(name, sched, jobs, type_order=type_order)
        if name in baselines.NAMES:  # whole-GPU research baselines, their own simulator
            return baselines.make_baseline(name, sched)
        return SimPolicy(name, sched, static.QUEUE, static.static_request)
    if name == backfill.NAME:
        ctx = {"typical": TypicalTasks.from_tasks([j.request for j in jobs]), "seed": seed}
        return SimPolicy(name, compile_profile(get_profile(backfill.PLACEMENT_PROFILE), ctx),
                         backfill.QUEUE, static.static_request, estimate=backfill_estimate)
    ctx = {"typical": demand_typical(jobs), "seed": seed}
    profile = TIME_PROFILE if name in ("hetsched", PREDICTING, FCFS) else get_profile(name)
    if speeds != BLIND:
        profile = replace(profile, weights={**profile.weights, speed.NAME: SPEED_WEIGHT})
    schedule = schedule_from_config(objectives, ctx) if objectives is not None else None
    return SimPolicy(name, compile_profile(profile, ctx),
                     QueueConfig(predict_runtimes=name != FCFS), objectives=schedule,
                     speeds=speeds, elastic=True)


def speeds_problem(args: argparse.Namespace, jobs: list[Job]) -> str | None:
    """Why the speed options cannot run on these jobs (None: they can). ``--model-speed``
    scales run times by catalog figures, the ``duration_s@`` columns give them: one
    source of truth per run, so both at once are refused; oracle needs something to
    tell. The adaptation and fault layer (``--adapt``, ``--fail-fraction``,
    ``--gpu-fail-fraction``, ``--throttle``) times every run itself at ``duration_s``
    and its own restart cost, so with it the columns of issue 35 would be read and
    silently not applied: refused until that layer runs jobs at their true speed."""
    measured = any(j.speeds is not None and j.speeds.by_model for j in jobs)
    if measured and getattr(args, "model_speed", False):
        return ("--model-speed scales run times by catalog figures, but the workload gives "
                "each job's run time per model (duration_s@MODEL columns): drop "
                "--model-speed, the columns are the truth")
    layer = cell_only_flags(args, with_model_speed=False)
    if layer and any(j.speeds is not None or j.restart_s is not None for j in jobs):
        return (f"{', '.join(layer)} run jobs at their duration_s with the layer's own "
                "restart cost, and the workload gives speeds or restart costs "
                "(duration_s@MODEL, duration1_s@MODEL, min_gpus/max_gpus or restart_s "
                "columns) that they would ignore: drop the option or the columns")
    mode = getattr(args, "speeds", BLIND)
    if mode != BLIND and not measured:
        return (f"--speeds {mode} tells the policies each job's run time per model, and "
                "the workload gives none (duration_s@MODEL columns of --jobs FILE)")
    return None


DEFAULT_HOURS = {"mixed": 24.0, "training": training.DEFAULT_HOURS}
"""``--hours`` of each generated workload when not given: a day of the mixed workload,
two weeks of training (its multi-day gangs need more than a day to matter)."""


def hours(args: argparse.Namespace) -> float:
    """The generated workload's window in hours: ``--hours``, else its default."""
    given = getattr(args, "hours", None)
    return given if given is not None else DEFAULT_HOURS.get(args.workload, 24.0)


def load(args: argparse.Namespace) -> tuple[str, list[NodeSpec], list[Job], float]:
    """Title, cluster, jobs and horizon of the chosen workload.

    ``--load L`` multiplies the arrival rate of every workload by L (1: as is): the
    generators (mixed, training) draw at L times their rate; the recorded ones
    (``--jobs``, openb, lora) have their arrival times divided by L, durations and
    order kept (``jobs.scale_arrivals``), and the horizon shrinks with them.
    """
    from streams.sim.time import loaders, mixed
    from streams.sim.time.jobs import read_jobs, scale_arrivals
    from streams.sim.traces import read_nodes

    nodes = read_nodes(args.nodes) if args.nodes else None
    rate = args.load
    if args.jobs:
        jobs = scale_arrivals(read_jobs(args.jobs), rate)
        if nodes is None:
            nodes = mixed.mixed_cluster()
        return Path(args.jobs).stem, nodes, jobs, max(j.arrival_s for j in jobs)
    if args.workload == "openb":
        jobs = scale_arrivals(
            loaders.openb_jobs(args.tasks or "openb_pod_list_default.csv", args.day_start), rate)
        return ("openb day", nodes or read_nodes("openb_node_list_gpu_node.csv"), jobs,
                DAY_S / rate)
    if args.workload == "lora":
        jobs = scale_arrivals(loaders.lora_jobs(time_scale=args.time_scale), rate)
        count, gpus, model = LORA_CLUSTER
        nodes = nodes or [NodeSpec(f"rack00-node{i:03d}", 64_000, 262_144, gpus, model)
                          for i in range(count)]
        return "genai LoRA requests", nodes, jobs, max(j.arrival_s for j in jobs)
    horizon = hours(args) * 3600.0
    if args.workload == "training":
        nodes = nodes or training.training_cluster()
        jobs = training.training_jobs(args.seeds[0], horizon, rate, nodes)
        return "training workload", nodes, jobs, horizon
    nodes = nodes or mixed.mixed_cluster()
    jobs = mixed.mixed_jobs(args.seeds[0], horizon, rate, nodes)
    return "mixed workload", nodes, jobs, horizon


def _limits(args: argparse.Namespace) -> list[Limit]:
    """The range of each numeric option of time mode (checked before any run)."""
    day_start = args.day_start if args.day_start is not None else 0.0
    return [
        ("--hours", args.hours, args.hours is None or args.hours > 0, "above 0"),
        ("--load", args.load, args.load > 0, "above 0"),
        ("--day-start", args.day_start, day_start >= 0, "0 or more (seconds into the trace)"),
        ("--time-scale", args.time_scale, args.time_scale > 0, "above 0"),
        ("--consolidate", args.consolidate, 0 <= args.consolidate <= 100,
         "a percentage (0-100)"),
        *((flag, value, 0 <= value <= 1, "a share from 0 to 1") for flag, value in (
            ("--fail-fraction", args.fail_fraction),
            ("--gpu-fail-fraction", args.gpu_fail_fraction),
            ("--throttle", args.throttle))),
    ]


def run_time(args: argparse.Namespace) -> int:
    problem = out_of_range(_limits(args))
    if problem is not None:
        print(f"error: {problem}", file=sys.stderr)
        return 2
    try:
        title, nodes, jobs, horizon = load(args)
    except (ValueError, FileNotFoundError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if not jobs:  # e.g. a mixed workload of a few seconds: nothing arrives in it
        generated = args.workload in DEFAULT_HOURS and not args.jobs
        hint = " (a longer --hours or a higher --load gives some)" if generated else ""
        print(f"error: {title}: no job to simulate{hint}", file=sys.stderr)
        return 2
    names = args.policies or ["static", "hetsched"]
    objectives = None
    if getattr(args, "objectives", None):
        from streams.settings import read_objectives

        try:
            objectives = read_objectives(args.objectives)
        except ValueError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
    problem = speeds_problem(args, jobs)
    if problem is not None:
        print(f"error: {problem}", file=sys.stderr)
        return 2
    mode = getattr(args, "speeds", BLIND)
    try:  # compile every policy first, so a bad config fails before any run
        order = gavel.file_type_order(args.nodes) \
            if args.nodes and any(n in gavel.NAMES for n in names) else ()
        policies = {name: make_policy(name, jobs, objectives=objectives, speeds=mode,
                                      type_order=order)
                    for name in names}
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    refused = baselines.unsupported(names, args) or gavel.unsupported(names, args)
    if refused is not None:
        print(f"error: {refused}", file=sys.stderr)
        return 2
    from streams.sim.time import adapt  # issue 8: adaptation and faults, when asked for

    runs: dict[str, Recorder] = {}
    adapted: dict[str, dict[str, float]] = {}
    wall: dict[str, float] = {}
    for name in names:
        t0 = time.perf_counter()
        sim = make_simulator(policies[name], nodes, jobs, horizon)
        layer = adapt.attach_from_args(sim, args, name)
        bar = progress.attach(sim, name, len(jobs))  # only when stderr is a terminal
        runs[name] = sim.run()
        if bar is not None:
            bar.close(sim)
        if layer is not None:
            adapted[name] = layer.summary()
        wall[name] = time.perf_counter() - t0
        print(f"{name}: {len(jobs)} jobs simulated in {wall[name]:.1f} s", file=sys.stderr)
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    report.write_timeseries(out / "timeseries.csv", runs)
    report.write_classes(out / "classes.csv", runs)
    report.write_tenants(out / "tenants.csv", runs)
    caption = f"{title}: {len(jobs)} jobs, {sum(n.gpu_count for n in nodes)} GPUs"
    report.plot(out / "timeline.png", runs, caption)
    report.plot_cdfs(out / "cdf.png", runs, caption)
    report.plot_tenants(out / "tenants.png", runs, caption)
    if getattr(args, "jobs_out", None):
        report.write_job_rows(Path(args.jobs_out), runs)
    table = report.summary_table(runs)
    if adapted:
        table += "\n## Adaptation and faults\n\n" + adapt.report_table(adapted)
    notes = "".join(f"\n{NOTES[n]}\n" for n in names if n in NOTES)
    if any(n in gavel.NAMES for n in names):
        notes += f"\n{gavel.NOTE}\n"
    notes += f"\n{restart_note(jobs)}.\n"
    if any(j.speeds is not None and j.speeds.by_model for j in jobs):
        notes += (f"\nspeeds: each job runs at its true speed on the model it holds "
                  f"(duration_s@MODEL); the policies are told: {mode}"
                  f"{' (the baselines: blind)' if mode != BLIND else ''}.\n")
    (out / "summary.md").write_text(f"# {title}\n\n{table}{notes}")
    (out / "summary.json").write_text(json.dumps({
        "title": title, "jobs": len(jobs), "gpus": sum(n.gpu_count for n in nodes),
        "horizon_h": horizon / 3600.0, "simulate_s": wall,
        "restart": restart_note(jobs), "speeds": mode,
        "offered": report.offered_load(jobs, nodes, horizon),
        "summary": {n: {**r.summary(), "sim_seconds": wall[n]} for n, r in runs.items()},
        "classes": {n: r.per_class() for n, r in runs.items()}}, indent=1, sort_keys=True))
    print(table + notes, end="")
    return 0
