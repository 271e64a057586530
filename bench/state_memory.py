"""Memory of scheduler state per 10,000 GPUs: the pure cell plus its persisted records.

    .venv/bin/python bench/state_memory.py [--gpus 10000] [--per-node 8]

Registers ``gpus / per_node`` A100 nodes in one ``Cell`` (the worker's own
state), places one fractional task per GPU so task records exist too, and
measures with ``tracemalloc`` the Python heap the cell holds, and the size of
its node/task records as JSON (what the changelog tables store).
"""

from __future__ import annotations

import argparse
import gc
import tracemalloc

import orjson

from streams.core.cell import Cell
from streams.core.events import NodeAdded, TaskArrived
from streams.core.request import TaskRequest
from streams.profiles.service import service_scheduler


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--gpus", type=int, default=10_000)
    p.add_argument("--per-node", type=int, default=8)
    args = p.parse_args()
    scheduler = service_scheduler("hetsched")
    gc.collect()
    tracemalloc.start()
    cell = Cell("cell-0", scheduler)
    for i in range(args.gpus // args.per_node):
        cell.add_node(NodeAdded(f"N{i:025d}", f"node-{i}", 64000 * 4, 1 << 20, args.per_node,
                                "A100"))
    nodes_bytes, _ = tracemalloc.get_traced_memory()
    for i in range(args.gpus):
        cell.submit(TaskArrived(f"T{i:025d}", TaskRequest(f"task-{i}", 100, 512, 1, 500)),
                    {"executor": {"kind": "simulated"}})
    gc.collect()
    total, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    records = sum(len(orjson.dumps(cell.node_record(n))) for n in cell.nodes) + sum(
        len(orjson.dumps(cell.task_record(t))) for t in cell.tasks)
    print(f"{args.gpus} GPUs on {len(cell.nodes)} nodes, {len(cell.tasks)} running tasks")
    print(f"cell heap: nodes only {nodes_bytes / 2**20:.1f} MiB, with tasks "
          f"{total / 2**20:.1f} MiB (peak {peak / 2**20:.1f} MiB)")
    print(f"table records as JSON: {records / 2**20:.1f} MiB")


if __name__ == "__main__":
    main()
