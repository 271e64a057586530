"""``python -m streams.sim.time.rounds --jobs FILE --nodes FILE --policy P [--out DIR]``.

Prints the summary and writes ``DIR/summary.json`` (with ``wall_s``, the
simulation's own time, and ``cpu_s``, its CPU time: on a shared machine the wall
time also counts waiting for a core, the CPU time is what one core of its own needs).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from streams.sim.time.rounds import metrics, simulator, workload


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m streams.sim.time.rounds", description=__doc__)
    ap.add_argument("--jobs", required=True, help="generic job CSV (duration_s@MODEL columns)")
    ap.add_argument("--nodes", required=True, help="node list CSV (model, gpu)")
    ap.add_argument("--policy", required=True, choices=simulator.POLICIES)
    ap.add_argument("--seed", type=int, default=0, help="seed of the agnostic type shuffle")
    ap.add_argument("--all-jobs", action="store_true",
                    help="run until every job finished, not only the window's")
    ap.add_argument("--out", help="directory for summary.json")
    args = ap.parse_args(argv)

    names, counts = workload.read_nodes(args.nodes)
    wl, _ = workload.read_jobs(args.jobs, names)
    t0, c0 = time.perf_counter(), time.process_time()
    res = simulator.simulate(wl, counts, args.policy, seed=args.seed,
                             until_window=not args.all_jobs)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    out = {"policy": args.policy, "jobs_file": str(args.jobs), "nodes_file": str(args.nodes),
           "gpus": dict(zip(names, counts.astype(int).tolist(), strict=True)),
           "round_s": simulator.ROUND_S, "seed": args.seed,
           **metrics.summary(wl, res), "wall_s": wall, "cpu_s": cpu}
    text = json.dumps(out, indent=2)
    print(text)
    if args.out:
        d = Path(args.out)
        d.mkdir(parents=True, exist_ok=True)
        (d / "summary.json").write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
