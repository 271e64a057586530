"""List the nodes of the cluster with their GPU use, from the workers' web views."""

from __future__ import annotations

import argparse
import sys

from streams.commands.status import add_url_argument, fetch_states, gpu_bar, table


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_url_argument(parser)


def run(args: argparse.Namespace) -> int:
    try:
        cells, _ = fetch_states(args.url)
    except OSError as exc:
        print(f"hetsched nodes: cannot reach a worker: {exc}", file=sys.stderr)
        return 1
    rows = [[n["node"], c, n["model"] or "-", len(n["gpus_used_milli"]),
             gpu_bar(n["gpus_used_milli"]), f"{n['cpu_used_milli']}/{n['cpu_milli']}",
             n["tasks"], "yes" if n["healthy"] else "no"]
            for c, cell in cells.items() for n in cell["nodes"]]
    print(table(["NODE", "CELL", "MODEL", "GPUS", "USE", "CPU_MILLI", "TASKS", "HEALTHY"],
                sorted(rows)))
    return 0
