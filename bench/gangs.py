"""Gangs in time: wait and completion per gang size, hetsched against whole-GPU FIFO.

Runs ``simulate --mode time``'s simulator on a job history (the Helios training
files in ../shared/traces/training/, see their README) under two policies:
``static`` (whole GPUs, strict FIFO, no backfill: the baseline every cluster
could run) and ``hetsched`` (its queue with backfill, reservations and gangs),
and prints one markdown table: per gang size (in nodes of the cluster's largest
node), jobs, mean wait, mean and p95 completion time (arrival to end), and the
jobs refused as larger than the cell.

    python bench/gangs.py --jobs ../shared/traces/training/venus2vc-2weeks.csv \\
        --nodes ../shared/traces/training/nodes-venus2vc.csv
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from streams.sim.time.cli import make_policy  # noqa: E402
from streams.sim.time.engine import Simulator  # noqa: E402
from streams.sim.time.jobs import read_jobs  # noqa: E402
from streams.sim.traces import read_nodes  # noqa: E402

POLICIES = ("static", "hetsched")


def bucket(gpus: int, per_node: int) -> tuple[int, str]:
    """Sort key and label of a job's gang size: 1 GPU, one node, then nodes as powers of 2."""
    if gpus <= 1:
        return 0, "1 GPU"
    if gpus <= per_node:
        return 1, f"2-{per_node} GPUs (one node)"
    nodes = math.ceil(gpus / per_node)
    top = 1 << (nodes - 1).bit_length()
    low = top // 2 + 1
    label = f"{top} nodes" if low == top else f"{low}-{top} nodes"
    return top, f"gang, {label}"


def run(jobs_path: str, nodes_path: str) -> str:
    jobs = read_jobs(jobs_path)
    nodes = read_nodes(nodes_path)
    per_node = max(n.gpu_count for n in nodes)
    horizon = max(j.arrival_s for j in jobs)
    rows: dict[tuple[int, str], dict[str, list[float]]] = {}
    refused: dict[str, int] = {}
    wall: dict[str, float] = {}
    for name in POLICIES:
        t0 = time.perf_counter()
        rec = Simulator(make_policy(name, jobs), nodes, jobs, horizon).run()
        wall[name] = time.perf_counter() - t0
        refused[name] = sum(1 for st in rec.jobs.values() if st.status == "unschedulable")
        for st in rec.jobs.values():
            if st.status != "finished":
                continue
            cell = rows.setdefault(bucket(st.job.request.num_gpu, per_node), {})
            cell.setdefault(f"{name}/wait", []).append(st.wait_s / 60.0)
            cell.setdefault(f"{name}/jct", []).append((st.end_s - st.job.arrival_s) / 3600.0)
    out = [f"{Path(jobs_path).name} on {Path(nodes_path).name}: {len(jobs)} jobs, "
           f"{sum(n.gpu_count for n in nodes)} GPUs; refused as larger than the cell: "
           + ", ".join(f"{p} {refused[p]}" for p in POLICIES)
           + "; simulated in " + ", ".join(f"{p} {wall[p]:.1f} s" for p in POLICIES), "",
           "| gang size | jobs | wait mean (min) FIFO / hetsched | JCT mean (h) FIFO / hetsched "
           "| JCT p95 (h) FIFO / hetsched |", "|---|---:|---:|---:|---:|"]
    for key in sorted(rows):
        cell = rows[key]

        def pair(metric: str, fn, cell=cell) -> str:
            return " / ".join(f"{fn(cell.get(f'{p}/{metric}', [math.nan])):.1f}"
                              for p in POLICIES)

        jobs_n = len(cell.get(f"{POLICIES[1]}/jct", []))
        out.append(f"| {key[1]} | {jobs_n} | {pair('wait', np.mean)} | {pair('jct', np.mean)} "
                   f"| {pair('jct', lambda v: np.percentile(v, 95))} |")
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--jobs", required=True, help="a job history CSV (docs/simulation.md)")
    ap.add_argument("--nodes", required=True, help="a node list CSV")
    args = ap.parse_args(argv)
    print(run(args.jobs, args.nodes), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
