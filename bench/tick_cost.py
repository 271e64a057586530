"""CPU time of one adaptation tick against how many tasks the cell has seen.

    taskset -c 0 .venv/bin/python bench/tick_cost.py [--rounds 1 2 4] [--nodes 200]
        [--tasks 8000] [--ticks 100]

A cell keeps every task it ever saw (finished ones too: a repeated submission is
ignored, dependencies look them up), so anything a tick does per task it has seen
grows without bound in a long-lived worker and in the replay of a long log. This
records the replay benchmark's placement workload (``bench/replay.py``: openb's
GPU nodes, its tasks one a second, at most 200 running) ``--rounds`` times over,
each round the same tasks under new names, applies it to a cell, then times
``--ticks`` ticks on the final cell (best of five batches, CPU time). With the
running tasks bounded, a tick should cost about the same whatever the rounds.
"""

from __future__ import annotations

import argparse
import dataclasses
import time

from streams.adapter import apply
from streams.audit.workload import record_run
from streams.core.adapt.engine import on_tick
from streams.core.cell import DONE, Cell
from streams.profiles.service import service_scheduler
from streams.sim.traces import read_nodes, read_tasks


def tick_cost(rounds: int, nodes: int, tasks: int, ticks: int,
              profile: str = "hetsched") -> tuple[int, int, float]:
    """(tasks seen, tasks unfinished, CPU seconds per tick) of the workload ``rounds`` times."""
    node_list = [(n.name, n.cpu_milli, n.memory_mib, n.gpu_count, n.gpu_model)
                 for n in read_nodes("openb_node_list_gpu_node.csv")[:nodes]]
    base = read_tasks("openb_pod_list_default.csv")[:tasks]
    workload = [dataclasses.replace(t, task=f"r{k}-{t.task}")
                for k in range(rounds) for t in base]
    rec = record_run(node_list, workload, service_scheduler(profile))
    cell = Cell("cell-0", service_scheduler(profile))
    for env in rec.envelopes:
        apply(cell, env)
    seq, now = cell.tick_seq + 1, cell.now_s
    best = float("inf")
    for _ in range(5):
        started = time.process_time()
        for _ in range(ticks):
            on_tick(cell, "bench-tick", seq, now)
            seq += 1
        best = min(best, (time.process_time() - started) / ticks)
    unfinished = sum(1 for r in cell.tasks.values() if r.status != DONE)
    return len(cell.tasks), unfinished, best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument("--nodes", type=int, default=200)
    parser.add_argument("--tasks", type=int, default=8000, help="tasks per round")
    parser.add_argument("--ticks", type=int, default=100, help="ticks per timed batch")
    args = parser.parse_args()
    print("| tasks seen | unfinished | CPU us per tick |")
    print("|---:|---:|---:|")
    for rounds in args.rounds:
        seen, unfinished, per_tick = tick_cost(rounds, args.nodes, args.tasks, args.ticks)
        print(f"| {seen:,} | {unfinished:,} | {per_tick * 1e6:,.0f} |")


if __name__ == "__main__":
    main()
