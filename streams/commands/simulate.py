"""Run the scheduler's pure core on a trace, without Kafka.

``--mode packing`` (default) runs the FGD/openb packing benchmark protocol,
described in docs/packing-benchmark.md (the workload §2, placement §3, the
baselines §4, the metrics §5, the fidelity check §7): for each policy and seed,
tasks arrive on an empty cluster until ``--tune`` x capacity has arrived, each
placed once or dropped. Writes DIR/curve.csv, DIR/allocation.png, DIR/summary.md
and, with ``--decisions``, one JSON-lines decision log per policy and seed.

Example:
    hetsched simulate --nodes openb_node_list_gpu_node.csv \\
        --tasks openb_pod_list_default.csv --policies fgd,bestfit --seeds 42-51 \\
        --tune 1.3 --out out/default
Relative trace paths are also looked up in $HETSCHED_TRACES or ../shared/traces/openb.

``--mode time`` runs schedulers over time on a virtual clock (queueing,
fair share, preemption, workflows) against the static-allocation baseline;
see ``streams.sim.time.cli`` and docs/simulation.md.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from streams.sim.packing import RunResult

MODES = ("packing", "time")


def parse_seeds(text: str) -> list[int]:
    """``42-51`` or ``42,43,50`` (or a mix) -> sorted unique seeds."""
    seeds: set[int] = set()
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        lo, sep, hi = part.partition("-")
        try:
            if sep:
                a, b = int(lo), int(hi)
                if b < a:
                    raise ValueError
                seeds.update(range(a, b + 1))
            else:
                seeds.add(int(part))
        except ValueError:
            msg = f"bad seed list {text!r} (use 42-51 or 1,2,3)"
            raise argparse.ArgumentTypeError(msg) from None
    if not seeds:
        raise argparse.ArgumentTypeError("no seeds given")
    return sorted(seeds)


# Scheduling policies of time mode only, besides the placement profiles: the whole-GPU
# baselines (fifo/static, backfill), the research baselines (streams.sim.time.baselines)
# Gavel's round-based policies (streams.sim.time.gavel), hetsched without run-time
# prediction (streams.sim.time.cli.FCFS) and the former name of hetsched's queue
# (streams.sim.time.cli.PREDICTING).
TIME_ONLY = ("fifo", "static", "backfill", "tiresias", "srtf-oracle", "gavel-las",
             "gavel-fifo", "las", "hetsched-fcfs", "hetsched-predict")


def parse_policies(text: str) -> list[str]:
    from streams.core.profile import BUILTIN_PROFILES

    names = [p.strip() for p in text.split(",") if p.strip()]
    unknown = [p for p in names if p not in BUILTIN_PROFILES and p not in TIME_ONLY]
    if unknown or not names:
        shown = ", ".join(map(repr, unknown)) if unknown else repr(text)
        raise argparse.ArgumentTypeError(
            f"unknown policy {shown} (known: {', '.join(BUILTIN_PROFILES)}; "
            f"time mode only: {', '.join(TIME_ONLY)})"
        )
    return list(dict.fromkeys(names))


def add_arguments(parser: argparse.ArgumentParser) -> None:
    # The description (this module's docstring) is printed as written: argparse's reflow
    # split the document's path at its hyphen and ran the example command into one line.
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.add_argument("--mode", choices=MODES, default="packing",
                        help="simulation mode (default: packing)")
    parser.add_argument("--nodes", help="node list CSV (sn,cpu_milli,...); packing: required")
    parser.add_argument("--tasks", help="task list CSV (name,cpu_milli,...); packing: required")
    parser.add_argument("--policies", type=parse_policies, default=None,
                        help="comma-separated policy profiles (default: hetsched); time mode "
                             "also takes the baselines fifo (alias static), backfill, "
                             "tiresias, srtf-oracle, Gavel's round-based gavel-las, "
                             "gavel-fifo, las, and hetsched-fcfs (hetsched's queue without "
                             "run-time prediction; hetsched-predict: an alias of hetsched) "
                             "(default: static,hetsched)")
    parser.add_argument("--seeds", type=parse_seeds, default=[42], help="e.g. 42-51 (default 42)")
    parser.add_argument("--tune", type=float, default=1.3,
                        help="arrived GPU demand as a multiple of capacity (default 1.3)")
    parser.add_argument("--out", required=True, type=Path, help="output directory")
    parser.add_argument("--decisions", action="store_true",
                        help="write decisions-<policy>-<seed>.jsonl per run")
    parser.add_argument("--jobs", default=None,
                        help="packing: parallel runs (processes); time: job history CSV")
    parser.add_argument("--workload", choices=("mixed", "training", "openb", "lora"),
                        default="mixed", help="time mode: workload (default: mixed)")
    parser.add_argument("--hours", type=float, default=None,
                        help="time mode, mixed and training: hours of arrivals (default: 24 "
                        "for mixed, 336 for training)")
    parser.add_argument("--load", type=float, default=1.0,
                        help="time mode: multiplies the arrival rate of any workload, "
                        "--jobs included (default 1: as generated or recorded)")
    parser.add_argument("--day-start", type=float, default=None,
                        help="time mode, openb: window start in s (default: busiest day)")
    parser.add_argument("--time-scale", type=float, default=23.0,
                        help="time mode, lora: arrival compression (default 23: one day)")
    parser.add_argument("--jobs-out", type=Path, default=None, metavar="FILE",
                        help="time mode: write one CSV row per job and policy (arrival, "
                        "start, end, wait, JCT, preemptions, declared expected_s)")
    parser.add_argument("--objectives", type=Path, default=None,
                        help="time mode: objectives file (JSON/TOML), weights by hour and load "
                        "for every policy but the baselines (docs/simulation.md)")
    from streams.sim.time.speeds import MODES as SPEED_MODES

    parser.add_argument("--speeds", choices=SPEED_MODES, default=SPEED_MODES[0],
                        help="time mode: what the policies are told of each job's per-model "
                        "run times (duration_s@MODEL columns): blind (default: nothing, as "
                        "today), oracle (the truth) or learned (each run reports its "
                        "progress and the cell learns, as in the service); the baselines "
                        "stay blind")
    from streams.sim.time.adapt import add_arguments as add_adapt_arguments

    add_adapt_arguments(parser)  # --adapt, --fail-fraction, --throttle, ... (issue 8)
    parser.add_argument("--no-progress", action="store_true",
                        help="hide the progress bar (stderr; off when not a TTY)")


def _one(job: tuple) -> RunResult:
    from streams.sim.packing import run_packing

    nodes, tasks, policy, seed, tune, decisions = job
    return run_packing(nodes, tasks, policy, seed, tune, record_decisions=decisions)


def run(args: argparse.Namespace) -> int:
    try:  # before the runs, which may take minutes: an unusable --out is found now
        args.out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        print(f"error: --out {args.out}: {exc.strerror or exc}", file=sys.stderr)
        return 2
    if args.mode == "time":
        from streams.sim.time.cli import run_time

        return run_time(args)
    return _run_packing(args)


def _run_packing(args: argparse.Namespace) -> int:
    from streams.progress import progress_bar
    from streams.sim import report
    from streams.sim.traces import TraceFormatError, read_nodes, read_tasks

    if not args.nodes or not args.tasks:
        print("error: packing mode needs --nodes and --tasks", file=sys.stderr)
        return 2
    args.policies = args.policies or ["hetsched"]
    time_only = [p for p in args.policies if p in TIME_ONLY]
    if time_only:
        print(f"error: {', '.join(time_only)}: time-mode "
              f"{'policy' if len(time_only) == 1 else 'policies'} (--mode time)",
              file=sys.stderr)
        return 2
    try:
        args.jobs = int(args.jobs or 1)
    except ValueError:
        print(f"error: --jobs in packing mode is a number of processes, got {args.jobs!r}",
              file=sys.stderr)
        return 2
    if not 0 < args.tune <= 10:
        print(f"error: --tune must be in (0, 10], got {args.tune}", file=sys.stderr)
        return 2
    try:
        nodes = read_nodes(args.nodes)
        tasks = read_tasks(args.tasks)
    except (TraceFormatError, FileNotFoundError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if not any(n.gpu_count for n in nodes):
        print(f"error: {args.nodes}: the cluster has no GPUs", file=sys.stderr)
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    jobs = [(nodes, tasks, p, s, args.tune, args.decisions) for p in args.policies
            for s in args.seeds]
    bar = progress_bar(total=len(jobs), unit="run", desc="simulate", disable=args.no_progress)
    results: list[RunResult] = []
    if args.jobs > 1 and len(jobs) > 1:
        import multiprocessing as mp

        with mp.get_context("fork").Pool(min(args.jobs, len(jobs))) as pool:
            for res in pool.imap(_one, jobs):
                results.append(res)
                bar.update()
    else:
        for job in jobs:
            results.append(_one(job))
            bar.update()
    bar.close()
    report.write_curve(args.out / "curve.csv", results)
    title = f"{Path(args.tasks).stem} on {Path(args.nodes).stem}"
    report.plot(args.out / "allocation.png", results, title)
    table = report.summary_table(results)
    (args.out / "summary.md").write_text(f"# {title}\n\n{table}")
    if args.decisions:
        for r in results:
            report.write_decisions(args.out, r)
    print(table, end="")
    return 0
