"""``hetsched simulate --mode time``: compare schedulers over time on one workload and cluster.

Workloads: ``--workload mixed`` (seeded generator, default), ``openb`` (one
day of the openb trace: ``--tasks`` pod list, ``--day-start`` seconds, default
the busiest day), ``lora`` (genai LoRA requests, ``--time-scale`` compresses
arrivals) or ``--jobs FILE`` (the generic CSV of docs/simulation.md).
Policies: ``static`` (the baseline) and any built-in placement profile, run
with the fair-share queue, backfill and preemption. Writes DIR/timeseries.csv,
DIR/classes.csv, DIR/timeline.png and DIR/summary.md.

Example:
    hetsched simulate --mode time --workload mixed --policies static,hetsched --out out/mixed
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

from streams.core.objectives import WeightSchedule
from streams.core.queue import QueueConfig
from streams.core.scheduler import compile_profile
from streams.policies import static
from streams.policies.fragmentation import TypicalTasks
from streams.policies.profile import Profile, get_profile
from streams.sim.time import report
from streams.sim.time.engine import SimPolicy, Simulator
from streams.sim.time.jobs import Job
from streams.sim.time.metrics import Recorder
from streams.sim.traces import NodeSpec

DAY_S = 86_400.0
LORA_CLUSTER = (2, 8, "A10")  # nodes, GPUs per node, model for the genai requests
# hetsched in time mode: the packing score plus a data-locality term (input or predecessor node).
TIME_PROFILE = Profile("hetsched", {"hetsched": 1.0, "data": 1.0},
                       {"data": {"scale": 0.0, "transfer_cost": 0.5}})


def make_policy(name: str, jobs: list[Job], seed: int = 42,
                objectives: Any = None) -> SimPolicy:
    """``static``, or a placement profile with the fair queue, backfill and preemption.

    ``objectives``: a raw objectives config (``WeightSchedule.from_config``) whose
    rules replace the profile by hour and load; the static baseline ignores it.
    """
    ctx = {"typical": TypicalTasks.from_tasks([j.request for j in jobs]), "seed": seed}
    if name == static.NAME:
        return SimPolicy(name, compile_profile(get_profile(static.PLACEMENT_PROFILE), ctx),
                         static.QUEUE, static.static_request)
    profile = TIME_PROFILE if name == "hetsched" else get_profile(name)
    schedule = WeightSchedule.from_config(objectives, ctx) if objectives is not None else None
    return SimPolicy(name, compile_profile(profile, ctx), QueueConfig(), objectives=schedule)


def load(args: argparse.Namespace) -> tuple[str, list[NodeSpec], list[Job], float]:
    """Title, cluster, jobs and horizon of the chosen workload."""
    from streams.sim.time import loaders, mixed
    from streams.sim.time.jobs import read_jobs
    from streams.sim.traces import read_nodes

    nodes = read_nodes(args.nodes) if args.nodes else None
    if args.jobs:
        jobs = read_jobs(args.jobs)
        if nodes is None:
            nodes = mixed.mixed_cluster()
        return Path(args.jobs).stem, nodes, jobs, max(j.arrival_s for j in jobs)
    if args.workload == "openb":
        jobs = loaders.openb_jobs(args.tasks or "openb_pod_list_default.csv", args.day_start)
        return "openb day", nodes or read_nodes("openb_node_list_gpu_node.csv"), jobs, DAY_S
    if args.workload == "lora":
        jobs = loaders.lora_jobs(time_scale=args.time_scale)
        count, gpus, model = LORA_CLUSTER
        nodes = nodes or [NodeSpec(f"rack00-node{i:03d}", 64_000, 262_144, gpus, model)
                          for i in range(count)]
        return "genai LoRA requests", nodes, jobs, max(j.arrival_s for j in jobs)
    nodes = nodes or mixed.mixed_cluster()
    jobs = mixed.mixed_jobs(args.seeds[0], args.hours * 3600.0, args.load, nodes)
    return "mixed workload", nodes, jobs, args.hours * 3600.0


def run_time(args: argparse.Namespace) -> int:
    try:
        title, nodes, jobs, horizon = load(args)
    except (ValueError, FileNotFoundError) as exc:
        print(f"error: {exc}", file=sys.stderr)
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
    try:  # compile every policy first, so a bad config fails before any run
        policies = {name: make_policy(name, jobs, objectives=objectives) for name in names}
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    runs: dict[str, Recorder] = {}
    for name in names:
        t0 = time.perf_counter()
        runs[name] = Simulator(policies[name], nodes, jobs, horizon).run()
        print(f"{name}: {len(jobs)} jobs simulated in {time.perf_counter() - t0:.1f} s",
              file=sys.stderr)
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    report.write_timeseries(out / "timeseries.csv", runs)
    report.write_classes(out / "classes.csv", runs)
    report.plot(out / "timeline.png", runs, f"{title}: {len(jobs)} jobs, "
                f"{sum(n.gpu_count for n in nodes)} GPUs")
    table = report.summary_table(runs)
    (out / "summary.md").write_text(f"# {title}\n\n{table}")
    print(table, end="")
    return 0
