"""Start many simulated nodes in one process (demos, benchmarks, end-to-end tests).

Run: ``hetsched-node sim-cluster --nodes 50 --time-scale 60 [--seed 1]``
Nodes are a seeded sample of the openb cluster (``../shared/traces/openb/
openb_node_list_gpu_node.csv``: name, CPU, memory, GPU count and model), or
the whole list with ``--nodes 0``. Each node gets its own agent and executor;
they share one Kafka producer and one decision consumer, so hundreds of nodes
cost one process. Node-level flags (``--time-scale``, ``--fault``, triggers
via ``--set``) apply to every node; ``--simulate`` replaces the openb sample
with N identical nodes.
"""

from __future__ import annotations

import argparse
import csv
import random
from pathlib import Path

from agents.commands.common import add_node_arguments
from schemas.event_loop import use_event_loop


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--nodes", type=int, default=20, help="how many nodes (0 = all) (20)")
    parser.add_argument("--seed", type=int, default=0, help="which sample of nodes (0)")
    parser.add_argument("--node-list", type=Path, help="openb-style node CSV (default: openb)")
    parser.add_argument("--id-prefix", default="", help="prepended to node ids (isolation)")
    add_node_arguments(parser)


def sample_nodes(path: Path, count: int, seed: int) -> list[dict[str, str]]:
    """``count`` rows of the node list chosen with ``seed`` (all rows when 0), in file order."""
    with path.open(newline="", encoding="utf-8") as f:
        rows = [r for r in csv.DictReader(f) if int(r.get("gpu") or 0) > 0]
    if 0 < count < len(rows):
        keep = set(random.Random(seed).sample(range(len(rows)), count))
        rows = [r for i, r in enumerate(rows) if i in keep]
    return rows


def run(args: argparse.Namespace) -> int:
    import asyncio

    from agents import logs
    from agents.commands.common import fail, node_config, task_user_problem
    from agents.config import NodeConfig
    from agents.runtime import serve
    from agents.telemetry.traces import traces_dir

    if args.nodes < 0:  # it was taken as 0 (all of the list)
        return fail(f"--nodes {args.nodes}: must be 0 (the whole list) or more")
    logs.setup(args.log_level)
    base = node_config(args)
    if (problem := task_user_problem(base)) is not None:
        return fail(problem)
    configs: list[NodeConfig] = []
    if base.simulate.gpus:
        for i in range(max(1, args.nodes)):
            node = base.node.model_copy(update={"node_id": f"{args.id_prefix}sim-node-{i:04d}"})
            configs.append(base.model_copy(update={"node": node}))
    else:
        try:
            path = args.node_list or traces_dir() / "openb" / "openb_node_list_gpu_node.csv"
            rows = sample_nodes(path, args.nodes, args.seed)
        except (OSError, FileNotFoundError) as exc:
            return fail(f"cannot read the node list: {exc}")
        for row in rows:
            node = base.node.model_copy(
                update={
                    "node_id": args.id_prefix + row["sn"],
                    "cpu_milli": int(row["cpu_milli"]),
                    "memory_mib": int(row["memory_mib"]),
                }
            )
            simulate = base.simulate.model_copy(update={"gpus": f"{row['model']}x{row['gpu']}"})
            configs.append(base.model_copy(update={"node": node, "simulate": simulate}))
    if not configs:
        return fail("no nodes to simulate")
    use_event_loop()  # HETSCHED_EVENT_LOOP, uvloop by default: less client CPU per send
    return asyncio.run(serve(configs, agent=True, executor=True, metrics_port=args.metrics_port))
