"""Time simulator speed (issue 31, part 5): 100k jobs on 2,500 GPUs, each policy on one core.

The workload is the Helios ``venus2vc-sept.csv`` trace (1,867 jobs, 26 days, 176
GPUs) tiled, read in place from ``$HETSCHED_TRACES/training`` or
``<repo>/../shared/traces/training`` (nothing is copied into the repository):

* jobs: ``ceil(jobs / 1867)`` copies, copy k's arrivals shifted by k times the
  file's span (its last arrival + 1 s), job ids suffixed ``-c<k>``; with
  ``--stack S`` every S consecutive copies share one time slot instead (S
  times the arrival rate, e.g. the trace's own load per GPU when S equals the
  node copies);
* nodes: ``nodes-venus2vc.csv`` (22 x 8 V100) replicated with new names
  (``r<k>-<name>``) to about ``--gpus`` GPUs.

Run (from the project root; ``taskset -c 0`` for timings on a shared machine):
    .venv/bin/python bench/timesim_speed.py                          # 100k jobs, 2,500 GPUs
    .venv/bin/python bench/timesim_speed.py --scale 0.1 --policies hetsched,backfill
    .venv/bin/python bench/timesim_speed.py --profile hetsched --scale 0.05

Prints per policy: jobs, events, events/s, wall seconds, peak RSS of the process
so far (``resource.getrusage``: a maximum, so run one policy per process to read
each one's own peak).
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import os
import resource
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from streams.sim.time.cli import make_policy  # noqa: E402
from streams.sim.time.engine import make_simulator  # noqa: E402
from streams.sim.time.jobs import Job, read_jobs  # noqa: E402
from streams.sim.traces import NodeSpec, read_nodes  # noqa: E402

TRAINING = Path(os.environ.get("HETSCHED_TRACES", ROOT.parent / "shared" / "traces")) / "training"
JOBS = 100_000
GPUS = 2_500
POLICIES = ("fifo", "backfill", "hetsched", "hetsched-fcfs", "tiresias", "srtf-oracle")


def tiled_jobs(base: list[Job], count: int, stack: int = 1) -> list[Job]:
    """``count`` jobs: copies of ``base``, copy k shifted by ``k // stack`` spans."""
    span = math.floor(max(j.arrival_s for j in base)) + 1.0
    out: list[Job] = []
    for k in range(math.ceil(count / len(base))):
        shift = (k // stack) * span
        for j in base:
            jid = f"{j.job_id}-c{k}"
            out.append(dataclasses.replace(
                j, job_id=jid, arrival_s=j.arrival_s + shift,
                request=dataclasses.replace(j.request, task=jid)))
    out.sort(key=lambda j: (j.arrival_s, j.job_id.rsplit("-c", 1)[1].zfill(6), j.job_id))
    return out[:count]


def tiled_nodes(base: list[NodeSpec], gpus: int) -> list[NodeSpec]:
    per = sum(n.gpu_count for n in base)
    copies = max(1, round(gpus / per))
    nodes = [dataclasses.replace(n, name=f"r{k:03d}-{n.name}")
             for k in range(copies) for n in base]
    return sorted(nodes, key=lambda n: n.name.encode())


def workload(scale: float, stack: int) -> tuple[list[NodeSpec], list[Job], float]:
    base_jobs = read_jobs(TRAINING / "venus2vc-sept.csv")
    base_nodes = read_nodes(TRAINING / "nodes-venus2vc.csv")
    jobs = tiled_jobs(base_jobs, max(1, round(JOBS * scale)), stack)
    nodes = tiled_nodes(base_nodes, max(1, round(GPUS * scale)))
    return nodes, jobs, max(j.arrival_s for j in jobs)


def run_one(name: str, nodes: list[NodeSpec], jobs: list[Job], horizon: float,
            profile: bool = False) -> dict[str, float]:
    policy = make_policy(name, jobs)
    t0 = time.perf_counter()
    sim = make_simulator(policy, nodes, jobs, horizon)
    if profile:
        import cProfile
        import pstats

        prof = cProfile.Profile()
        prof.runcall(sim.run)
        pstats.Stats(prof).sort_stats("cumulative").print_stats(45)
        pstats.Stats(prof).sort_stats("tottime").print_stats(30)
    else:
        sim.run()
    wall = time.perf_counter() - t0
    events = getattr(sim, "events", 0)
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
    return {"jobs": len(jobs), "events": events, "events_per_s": events / max(wall, 1e-9),
            "wall_s": wall, "peak_rss_mib": rss}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--policies", default=",".join(POLICIES))
    ap.add_argument("--scale", type=float, default=1.0,
                    help="fraction of 100k jobs and 2,500 GPUs (0.1: 10k jobs, 250 GPUs)")
    ap.add_argument("--stack", type=int, default=1,
                    help="copies of the trace that share one time slot (default 1)")
    ap.add_argument("--profile", metavar="POLICY", help="cProfile one policy instead")
    args = ap.parse_args(argv)
    nodes, jobs, horizon = workload(args.scale, args.stack)
    gpus = sum(n.gpu_count for n in nodes)
    print(f"workload: {len(jobs)} jobs on {len(nodes)} nodes, {gpus} GPUs, "
          f"horizon {horizon / 86400:.1f} days, stack {args.stack}", flush=True)
    if args.profile:
        run_one(args.profile, nodes, jobs, horizon, profile=True)
        return 0
    print("| policy | jobs | events | events/s | wall s | peak RSS MiB |\n"
          "|---|---:|---:|---:|---:|---:|", flush=True)
    for name in args.policies.split(","):
        r = run_one(name, nodes, jobs, horizon)
        print(f"| {name} | {r['jobs']:.0f} | {r['events']:.0f} | {r['events_per_s']:,.0f} | "
              f"{r['wall_s']:.1f} | {r['peak_rss_mib']:.0f} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
