"""Chaos under load: crash, pause and feed garbage to a live cluster, then prove the invariants.

    .venv/bin/python bench/chaos.py --minutes 30 --seed 1 --out /tmp/chaos.json   # the long run
    .venv/bin/python bench/chaos.py --short --bootstrap 127.0.0.1:9092           # CI's version

Starts a deployment on an isolated topic prefix (and, unless ``--bootstrap``
is given, its own embedded broker on a free port and home folder): scheduler
workers, simulated node clusters (agents + executors), a steady load of
simulated tasks and GPU telemetry. Faults, chosen and timed by a seeded RNG:

* ``worker_kill``: ``kill -9`` a scheduler worker, restart it 1-3 s later;
* ``worker_pause``: ``SIGSTOP`` a worker past its session timeout, then ``SIGCONT``
  (its cells move to another worker; the zombie's transactions must be fenced);
* ``nodes_kill``: ``kill -9`` a node cluster (agents and executors), restart it;
* ``broker_restart``: ``kill -9`` the broker's JVM and start it again (own broker only);
* ``malformed``: a burst of invalid records on the tasks, telemetry and nodes topics.

Then the load stops and a quiet phase lets every task end; the run reads the
tasks, task-status, input-log and decisions topics and runs the invariant
checker (``streams.check``, settled). Output: a table of faults by kind with
recovery time (restart -> next decision on the decisions topic), tasks by
final state, lost and duplicated tasks; ``--out`` writes it as JSON. Exit 0
only when every invariant holds and nothing was lost or duplicated.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import signal
import statistics
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from chaos_cluster import Broker, Cluster, Proc
from chaos_load import DecisionClock, Load

from schemas.topics import DEADLETTER, DECISIONS, INPUT_LOG, TASK_STATUS, TASKS
from streams.audit import logfile
from streams.audit.kafka_source import read_topics
from streams.audit.logfile import Header
from streams.check.findings import DOUBLE_PLACEMENT, DUPLICATE_APPLY, DUPLICATE_DECISION
from streams.check.invariants import check

FAULTS = ("worker_kill", "worker_pause", "nodes_kill", "broker_restart", "malformed")
NODES_PER_GROUP = 3


@dataclass
class Fault:
    kind: str
    at_s: float
    target: str
    recovery_s: float | None = None
    action_at: float = 0.0


@dataclass
class Run:
    args: argparse.Namespace
    workdir: Path
    rng: random.Random
    faults: list[Fault] = field(default_factory=list)
    broker: Broker | None = None


async def _restart_later(proc: Proc, down_s: float) -> float:
    await asyncio.sleep(down_s)
    proc.start()
    return time.monotonic()


async def inject(run: Run, cluster: Cluster, load: Load, kind: str, t0: float) -> Fault:
    rng = run.rng
    fault = Fault(kind, round(time.monotonic() - t0, 1), "")
    if kind == "worker_kill":
        proc = rng.choice(cluster.workers)
        fault.target = proc.name
        proc.kill()
        fault.action_at = await _restart_later(proc, rng.uniform(1, 3))
    elif kind == "worker_pause":
        proc = rng.choice([w for w in cluster.workers if w.alive()] or cluster.workers)
        fault.target = proc.name
        proc.signal(signal.SIGSTOP)
        await asyncio.sleep(cluster.session_s + 3)
        proc.signal(signal.SIGCONT)
        fault.action_at = time.monotonic()
    elif kind == "nodes_kill":
        proc = rng.choice(cluster.nodes)
        fault.target = proc.name
        proc.kill()
        fault.action_at = await _restart_later(proc, rng.uniform(1, 3))
    elif kind == "broker_restart":
        assert run.broker is not None
        fault.target = "broker"
        run.broker.kill()
        await asyncio.to_thread(run.broker.start)
        fault.action_at = time.monotonic()
    elif kind == "malformed":
        fault.target = "tasks+telemetry+nodes"
        fault.action_at = time.monotonic()
        await load.malformed(run.args.malformed_burst)
    return fault


def _kinds(args: argparse.Namespace) -> list[str]:
    kinds = [k.strip() for k in args.faults.split(",") if k.strip()]
    bad = [k for k in kinds if k not in FAULTS]
    if bad:
        raise SystemExit(f"unknown fault kind(s): {', '.join(bad)} (known: {', '.join(FAULTS)})")
    if args.bootstrap and "broker_restart" in kinds:
        raise SystemExit("broker_restart needs the run's own broker (drop --bootstrap)")
    return kinds


def _schedule(args: argparse.Namespace, kinds: list[str], rng: random.Random) -> list[str]:
    """The order of faults: every kind once first (so a short run sees each), then random."""
    order = list(kinds)
    rng.shuffle(order)
    return order


async def _read(bootstrap: str, prefix: str, topics: tuple[str, ...]) -> list[Any]:
    snap = await read_topics(bootstrap, [prefix + t for t in topics])
    return snap.records


async def settle(bootstrap: str, prefix: str, timeout_s: float) -> tuple[list[Any], float]:
    """Wait until no task is queued, running or in flight (or the timeout); the records."""
    began = time.monotonic()
    topics = (TASKS, TASK_STATUS, INPUT_LOG, DECISIONS)
    while True:
        records = await _read(bootstrap, prefix, topics)
        states = check(records, prefix).states()
        busy = states["queued"] + states["running"] + states["in_flight"]
        if busy == 0 or time.monotonic() - began > timeout_s:
            return records, time.monotonic() - began
        await asyncio.sleep(5)


async def chaos(run: Run) -> dict[str, Any]:
    args = run.args
    kinds = _kinds(args)
    prefix = f"chaos{uuid.uuid4().hex[:6]}."
    if args.bootstrap:
        bootstrap = args.bootstrap
    else:
        run.broker = Broker(run.workdir / "kafka")
        run.broker.start()
        bootstrap = run.broker.bootstrap
    cluster = Cluster(bootstrap, run.workdir, prefix, cells=args.cells, session_s=args.session_s)
    clock = DecisionClock(bootstrap, prefix)
    load: Load | None = None
    try:
        for _ in range(args.workers):
            cluster.add_worker()
        cluster.wait_healthy()
        for _ in range(args.node_groups):
            cluster.add_nodes(NODES_PER_GROUP)
        clock.start()
        load = Load(bootstrap, prefix, cluster.node_ids(NODES_PER_GROUP), seed=args.seed,
                    tasks_per_s=args.tasks_per_s, telemetry_per_s=args.telemetry_per_s)
        await asyncio.sleep(5)  # nodes register before the load starts
        t0 = time.monotonic()
        load_task = asyncio.create_task(load.run())
        await asyncio.sleep(args.warmup_s)
        order = _schedule(args, kinds, run.rng)
        end = t0 + args.minutes * 60
        while time.monotonic() < end:
            kind = order.pop(0) if order else run.rng.choice(kinds)
            run.faults.append(await inject(run, cluster, load, kind, t0))
            print(f"[{time.monotonic() - t0:7.1f}s] {kind} {run.faults[-1].target}",
                  flush=True)
            await asyncio.sleep(run.rng.uniform(*args.gap_s))
        load.stop()
        await load_task
        load_s = time.monotonic() - t0
        records, quiet_s = await settle(bootstrap, prefix, args.quiet_s)
        for fault in run.faults:
            fault.recovery_s = clock.next_after(fault.action_at)
        deadletters = await _read(bootstrap, prefix, (DEADLETTER,))
        if args.export:
            header = Header(topics=[prefix + t for t in (TASKS, TASK_STATUS, INPUT_LOG,
                                                         DECISIONS)],
                            exported_at=datetime.now(UTC).isoformat(), topic_prefix=prefix)
            logfile.write(Path(args.export), header, records)
        report = check(records, prefix, settled=True)
        return summarize(run, report, load, load_s, quiet_s, len(deadletters), cluster)
    finally:
        if load is not None:
            load.stop()
            await load.close()
        await clock.stop()
        cluster.stop()
        if run.broker is not None:
            run.broker.stop()


def summarize(run: Run, report: Any, load: Load, load_s: float, quiet_s: float,
              deadletters: int, cluster: Cluster) -> dict[str, Any]:
    by_kind: dict[str, dict[str, Any]] = {}
    for kind in sorted({f.kind for f in run.faults}):
        times = [f.recovery_s for f in run.faults if f.kind == kind and f.recovery_s is not None]
        by_kind[kind] = {
            "count": sum(1 for f in run.faults if f.kind == kind),
            "recovery_p50_s": round(statistics.median(times), 2) if times else None,
            "recovery_max_s": round(max(times), 2) if times else None,
            "not_recovered": sum(1 for f in run.faults if f.kind == kind and f.recovery_s is None),
        }
    states = report.states()
    inv = report.by_invariant()
    stuck = states["queued"] + states["running"] + states["in_flight"]
    duplicates = inv[DUPLICATE_DECISION] + inv[DUPLICATE_APPLY] + inv[DOUBLE_PLACEMENT]
    return {
        "seed": run.args.seed, "minutes": run.args.minutes, "load_s": round(load_s, 1),
        "quiet_s": round(quiet_s, 1), "workers": run.args.workers, "cells": run.args.cells,
        "nodes": len(cluster.node_ids(NODES_PER_GROUP)),
        "faults": len(run.faults), "faults_by_kind": by_kind,
        "fault_log": [{"kind": f.kind, "at_s": f.at_s, "target": f.target,
                       "recovery_s": None if f.recovery_s is None else round(f.recovery_s, 2)}
                      for f in run.faults],
        "tasks_acked": load.acked, "tasks_submitted": len(report.task_states),
        "telemetry_sent": load.telemetry_sent, "send_retries": load.send_failures,
        "task_states": states, "failure_reasons": dict(report.failure_reasons),
        "lost": states["lost"], "stuck": stuck, "duplicates": duplicates,
        "invariants": inv, "max_share_milli": report.max_share_milli,
        "deadletters": deadletters, "ok": report.ok and states["lost"] == 0 and duplicates == 0,
        "violations": [str(v) for v in report.violations[:50]],
        "workdir": str(run.workdir),
    }


def render(summary: dict[str, Any]) -> str:
    lines = [f"chaos: {summary['faults']} faults over {summary['load_s']} s of load "
             f"(seed {summary['seed']}), quiet phase {summary['quiet_s']} s",
             "| fault | count | recovery p50 (s) | recovery max (s) | not recovered |",
             "| --- | --- | --- | --- | --- |"]
    for kind, row in summary["faults_by_kind"].items():
        lines.append(f"| {kind} | {row['count']} | {row['recovery_p50_s']} | "
                     f"{row['recovery_max_s']} | {row['not_recovered']} |")
    s = summary["task_states"]
    lines += [
        f"tasks submitted {summary['tasks_submitted']} (acked {summary['tasks_acked']}): "
        + ", ".join(f"{k} {v}" for k, v in s.items() if v),
        f"failed by reason: {summary['failure_reasons']}",
        f"lost {summary['lost']}, duplicates {summary['duplicates']}, still busy "
        f"{summary['stuck']}, max GPU booking {summary['max_share_milli']} milli, "
        f"dead letters {summary['deadletters']}, telemetry sent {summary['telemetry_sent']}",
        "invariants: " + ", ".join(f"{k} {v}" for k, v in summary["invariants"].items()),
        "RESULT: " + ("PASS" if summary["ok"] else "FAIL"),
    ]
    lines += [f"  - {v}" for v in summary["violations"][:20]]
    return "\n".join(lines)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--minutes", type=float, default=30.0, help="fault phase length (30)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--faults", default=",".join(FAULTS), help="comma-separated fault kinds")
    p.add_argument("--gap-s", type=float, nargs=2, default=(20.0, 40.0),
                   help="seconds between faults, uniform in [a, b] (20 40)")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--cells", type=int, default=4)
    p.add_argument("--node-groups", type=int, default=2, help="sim-cluster processes of 3 nodes")
    p.add_argument("--tasks-per-s", type=float, default=4.0)
    p.add_argument("--telemetry-per-s", type=float, default=40.0)
    p.add_argument("--session-s", type=float, default=6.0, help="workers' session timeout")
    p.add_argument("--malformed-burst", type=int, default=30)
    p.add_argument("--warmup-s", type=float, default=10.0)
    p.add_argument("--quiet-s", type=float, default=120.0, help="max wait for tasks to end")
    p.add_argument("--bootstrap", help="use this broker (no broker restarts)")
    p.add_argument("--workdir", help="logs and state (default: a temporary folder)")
    p.add_argument("--export", help="write the checked records to this export file")
    p.add_argument("--out", help="write the summary as JSON here")
    p.add_argument("--short", action="store_true",
                   help="CI's version: ~2 minutes, one fault of each kind but broker restarts")
    args = p.parse_args(argv)
    if args.short:
        args.minutes, args.gap_s, args.warmup_s, args.quiet_s = 0.75, (4.0, 6.0), 6.0, 60.0
        if args.faults == ",".join(FAULTS):
            args.faults = "worker_kill,nodes_kill,malformed,worker_pause"
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    workdir = Path(args.workdir or tempfile.mkdtemp(prefix="hetsched-chaos-"))
    workdir.mkdir(parents=True, exist_ok=True)
    run = Run(args, workdir, random.Random(args.seed))
    summary = asyncio.run(chaos(run))
    print(render(summary))
    if args.out:
        Path(args.out).write_text(json.dumps(summary, indent=2))
    return 0 if summary["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
