"""Run the local cluster demo: the main job of the README.

Starts, on the broker of ``KAFKA_BOOTSTRAP`` (``./dev demo`` starts the
embedded one first): a scheduler worker, a simulated cluster of ``--nodes``
nodes sampled from the openb node list (agents and executors in one
``hetsched-node sim-cluster`` process), and a replayer that submits tasks of
an openb pod trace for ``--minutes`` at ``--speedup``. A live terminal view
follows the cluster; at the end a report (markdown + JSON) is written to
``--report``. The worker's dashboard is at http://127.0.0.1:PORT/dashboard.
Ctrl-C stops everything (replayer, nodes, worker) and still writes the report.

``--short`` is the test mode (CI runs it end to end): 6 nodes, 30 s of
submissions at 300x, tasks capped at 30 trace minutes (6 wall seconds) so the
cluster drains in seconds, and at most 10 s of drain.
See docs/demo.md for how the trace is thinned and paced.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from streams.demo.accounting import Accounting
    from streams.demo.runner import DemoConfig


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--nodes", type=int, default=24, help="simulated nodes (24)")
    parser.add_argument("--seed", type=int, default=0, help="node and task sample (0)")
    parser.add_argument("--speedup", type=float, default=120.0,
                        help="trace seconds per wall second (120)")
    parser.add_argument("--minutes", type=float, default=3.0,
                        help="wall minutes of task submissions (3)")
    parser.add_argument("--load", type=float, default=0.9,
                        help="offered GPU load, share of the cluster's GPUs (0.9)")
    parser.add_argument("--max-duration-s", type=float, default=7200.0,
                        help="cap on a task's trace duration in seconds (7200)")
    parser.add_argument("--trace", type=Path,
                        help="openb pod list (default: openb_pod_list_default.csv)")
    parser.add_argument("--node-list", type=Path, help="openb node list (default: openb GPU nodes)")
    parser.add_argument("--report", type=Path,
                        help="report file, markdown; JSON beside it (var/demo/<run>/report.md)")
    parser.add_argument("--web-port", type=int, default=6066, help="worker web port (6066)")
    parser.add_argument("--metrics-port", type=int, default=9101,
                        help="simulated nodes' Prometheus port (9101)")
    parser.add_argument("--drain-s", type=float, default=60.0,
                        help="after the last submission, wait this long for running tasks (60)")
    parser.add_argument("--no-live", action="store_true",
                        help="print a status line every 5 s instead of the live view")
    parser.add_argument("--short", action="store_true",
                        help="test mode: 6 nodes, 30 s at 300x, tasks <= 1800 s, 10 s drain")


def run(args: argparse.Namespace) -> int:
    import asyncio
    import sys
    import uuid

    from schemas.kafka import bootstrap_servers
    from streams.demo import report as reports
    from streams.demo.procs import Children
    from streams.demo.runner import DemoConfig, run_demo
    from streams.demo.trace import Shape
    from streams.demo.tracker import Tracker

    if args.short:
        args.nodes, args.minutes, args.speedup, args.drain_s = 6, 0.5, 300.0, 10.0
        args.max_duration_s = min(args.max_duration_s, 1800.0)
    shape = Shape(speedup=args.speedup, load=args.load, max_duration_s=args.max_duration_s,
                  seed=args.seed)
    trace, node_list = _checked(args, shape)

    run_id = uuid.uuid4().hex[:8]
    run_dir = Path("var") / "demo" / run_id
    cfg = DemoConfig(
        nodes=args.nodes, seed=args.seed, shape=shape, minutes=args.minutes, trace=trace,
        node_list=node_list, report=args.report or run_dir / "report.md",
        run_dir=run_dir.resolve(), run_id=run_id, prefix=f"demo-{run_id}.",
        bootstrap=bootstrap_servers(), web_port=args.web_port, metrics_port=args.metrics_port,
        drain_s=args.drain_s, live=not args.no_live)
    children = Children(run_dir / "logs", run_id)
    tracker = Tracker()
    out: dict[str, object] = {}
    status = 0
    try:
        asyncio.run(run_demo(cfg, children, tracker, out))
    except KeyboardInterrupt:
        print("hetsched demo: interrupted; stopping", file=sys.stderr)
        status = 130
    except (RuntimeError, TimeoutError) as exc:
        print(f"hetsched demo: {exc}", file=sys.stderr)
        status = 1
    finally:
        children.stop_all()
    settings = out.get("settings")
    if isinstance(settings, dict):
        accounting, why_not = _accounted(cfg)
        summary = reports.summarise(tracker, settings, accounting, why_not)
        md, js = reports.write(summary, cfg.report)
        print(reports.markdown(summary))
        print(f"hetsched demo: report written to {md} and {js}")
    print(f"hetsched demo: stopped (logs in {children.log_dir})")
    return status


def _accounted(cfg: DemoConfig) -> tuple[Accounting | None, str]:
    """The run's tasks accounted for by ``hetsched check``'s fold, once every process
    of the run has stopped (:mod:`streams.demo.accounting`); or None and why not."""
    import sys

    from streams.demo.accounting import account

    try:
        return account(cfg.prefix, cfg.report.with_name("audit.jsonl.gz")), ""
    except Exception as exc:  # the report is still written, saying why it lacks the states
        print(f"hetsched demo: the run's topics could not be checked: {exc}", file=sys.stderr)
        return None, f"{type(exc).__name__}: {exc}"


def _checked(args: argparse.Namespace, shape: Any) -> tuple[Path, Path | None]:
    """The pod list and node list to use, the arguments checked before anything starts
    (a worker, nodes and a broker take a while to start; a bad argument should not
    wait for them). Relative trace paths are also looked up in the traces directory."""
    from schemas.command_line import CommandError, check_limits
    from streams.demo.trace import check_trace
    from streams.sim.traces import resolve, traces_dir

    check_limits([("--nodes", args.nodes, args.nodes >= 1, "at least 1"),
                  ("--speedup", args.speedup, args.speedup > 0, "above 0"),
                  ("--minutes", args.minutes, args.minutes > 0, "above 0"),
                  ("--load", args.load, args.load > 0, "above 0"),
                  ("--max-duration-s", args.max_duration_s, args.max_duration_s > 0, "above 0"),
                  ("--drain-s", args.drain_s, args.drain_s >= 0, "0 or more"),
                  ("--web-port", args.web_port, 0 < args.web_port < 65536, "a TCP port"),
                  ("--metrics-port", args.metrics_port, 0 <= args.metrics_port < 65536,
                   "a TCP port, or 0 for none")])
    try:
        trace = resolve(args.trace) if args.trace else (
            traces_dir() / "openb" / "openb_pod_list_default.csv")
        check_trace(trace, shape)
    except (FileNotFoundError, ValueError) as exc:
        raise CommandError(f"--trace: {exc}") from None
    try:
        node_list = resolve(args.node_list) if args.node_list else None
    except FileNotFoundError as exc:
        raise CommandError(f"--node-list: {exc}") from None
    if args.report is not None:
        existing = next(p for p in args.report.resolve().parents if p.exists())
        if not existing.is_dir():
            raise CommandError(f"--report {args.report}: {existing} is not a directory")
    return trace, node_list
