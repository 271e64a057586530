"""Memory and time of the audit commands on a long cluster log (export, replay, what-if).

    .venv/bin/python bench/audit_memory.py [--bootstrap HOST:PORT] [--cells 4]
        [--telemetry 25000] [--tree PATH]

Produces a log to a fresh deployment prefix on a real broker (default: a private
one): per cell, on its own partition, the registrations of the first 20 GPU nodes of
openb, its first 200 tasks placed and finished under ``bestfit`` with their decisions,
then ``--telemetry`` telemetry records (``bench/replay.py``'s ``telemetry_log``; names
tagged per cell). Then runs each audit command in its own
process and reports its wall time, CPU time and peak RSS (``VmHWM``): ``export``,
``replay`` of the cluster, ``replay FILE``, ``replay FILE --jobs 2``, a what-if, and
``explain`` of cell 0's first task from the file and from the cluster, and ``check``
of the file (its safety invariants).
``--tree`` runs the commands from another checkout (a worktree of an earlier commit),
for a before/after on the same log. Also: the bytes a record that an
``integrity.Checker`` holds after a pass over the exported file (``tracemalloc``).
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import os
import resource
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from replay import telemetry_log
from service import broker

from schemas.topics import BY_NAME, DECISIONS, INPUT_LOG
from streams.audit.records import Record
from streams.sim.traces import read_nodes, read_tasks

REPO = Path(__file__).resolve().parent.parent


def cluster_log(prefix: str, cells: int, telemetry: int) -> list[Record]:
    """The records of the benchmark's log under ``prefix``, cell k on partition k."""
    out: list[Record] = []
    openb_nodes = read_nodes("openb_node_list_gpu_node.csv")[:20]
    openb_tasks = read_tasks("openb_pod_list_default.csv")[:200]
    for k in range(cells):
        nodes = [(f"c{k}-{n.name}", n.cpu_milli, n.memory_mib, n.gpu_count, n.gpu_model)
                 for n in openb_nodes]
        work = [dataclasses.replace(t, task=f"c{k}-{t.task}") for t in openb_tasks]
        inputs, decisions = telemetry_log(nodes, "bestfit", telemetry, seed=k, tasks=work,
                                          cell=f"cell-{k}", partition=k)
        key = f"cell-{k}".encode()
        out += [dataclasses.replace(r, topic=prefix + INPUT_LOG, key=key) for r in inputs]
        out += [dataclasses.replace(r, topic=prefix + DECISIONS, key=key) for r in decisions]
    return out


async def produce(bootstrap: str, prefix: str, records: list[Record], partitions: int) -> None:
    from aiokafka import AIOKafkaProducer

    from schemas.admin import ensure_topics

    # the catalog's cleanup policy and retention (kept forever), the run's partition count
    await ensure_topics(bootstrap, [dataclasses.replace(BY_NAME[t], name=prefix + t)
                                    for t in (INPUT_LOG, DECISIONS)], partitions=partitions)
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, enable_idempotence=True)
    await producer.start()
    try:
        for r in records:
            await producer.send(r.topic, r.value, key=r.key, partition=r.partition)
        await producer.flush()
    finally:
        await producer.stop()


_LAUNCH = """
import atexit, resource, runpy, sys

def peak():
    hwm = next(int(line.split()[1]) for line in open("/proc/self/status")
               if line.startswith("VmHWM:"))
    kids = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    print("peak_kb", max(hwm, kids), file=sys.stderr)

atexit.register(peak)
sys.argv = ["hetsched", *sys.argv[1:]]
runpy.run_module("streams.cli", run_name="__main__")
"""
"""Runs the CLI and prints its peak resident memory at exit: this process's ``VmHWM``
(reset by ``exec``, unlike ``ru_maxrss``, which a child inherits from its parent)
or its forked workers' largest, whichever is more."""

_CHECKER = """
import sys, tracemalloc
from pathlib import Path
from streams.audit.integrity import Checker
from streams.audit.logfile import LogFile

log = LogFile(Path(sys.argv[1]))
tracemalloc.start()
checker, n = Checker(log.header), 0
for r in log:
    checker.add(r)
    n += 1
print(tracemalloc.get_traced_memory()[0] / n)
"""
"""Bytes an ``integrity.Checker`` holds a record after one pass over a file."""


def measured(args: list[str], tree: Path, env: dict[str, str],
             quiet: tuple[str, ...] = ("--no-progress",)) -> dict[str, float | int]:
    """Wall s, CPU s (its workers' too) and peak RSS (MB) of ``hetsched ARGS QUIET`` run
    from ``tree`` (``quiet`` empty for a command that has no ``--no-progress`` in an
    earlier tree: its bar is off anyway, stderr being a pipe)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    began = time.monotonic()
    proc = subprocess.Popen([sys.executable, "-c", _LAUNCH, *args, *quiet],
                            cwd=tree, env=dict(env, PYTHONPATH=str(tree)),
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    _, err = proc.communicate()
    wall = time.monotonic() - began
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    peak = [int(line.split()[1]) for line in err.splitlines() if line.startswith("peak_kb ")]
    return {"status": proc.returncode, "wall_s": round(wall, 2),
            "cpu_s": round(cpu, 2),
            "max_rss_mb": round(peak[-1] / 1024) if peak else -1}


def checker_bytes_per_record(path: Path, tree: Path) -> float:
    done = subprocess.run([sys.executable, "-c", _CHECKER, str(path)], cwd=tree,
                          env=dict(os.environ, PYTHONPATH=str(tree)), capture_output=True,
                          text=True, check=True)
    return float(done.stdout.split()[-1])


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--bootstrap", help="an existing broker (default: start a private one)")
    p.add_argument("--cells", type=int, default=4)
    p.add_argument("--telemetry", type=int, default=25_000, help="telemetry records a cell")
    p.add_argument("--tree", type=Path, default=REPO,
                   help="checkout whose commands are measured (default: this one)")
    args = p.parse_args()
    with tempfile.TemporaryDirectory(prefix="hetsched-audit-bench-") as tmp, \
            broker(args.bootstrap, Path(tmp)) as bootstrap:
        work = Path(tmp)
        prefix = f"am{uuid.uuid4().hex[:6]}."
        records = cluster_log(prefix, args.cells, args.telemetry)
        asyncio.run(produce(bootstrap, prefix, records, args.cells))
        count = len(records)
        del records
        task = "c0-" + read_tasks("openb_pod_list_default.csv")[0].task
        env = dict(os.environ, KAFKA_BOOTSTRAP=bootstrap, HETSCHED_TOPIC_PREFIX=prefix)
        file = work / "audit.jsonl.gz"
        print(f"{count} records, {args.cells} cells, commands of {args.tree.name or '.'}")
        print("| command | wall s | CPU s | max RSS MB | exit |\n|---|---:|---:|---:|---:|")
        for name, argv in [("export -o FILE", ["export", "-o", str(file)]),
                           ("replay (the cluster)", ["replay"]),
                           ("replay FILE", ["replay", str(file)]),
                           ("replay FILE --jobs 2", ["replay", str(file), "--jobs", "2"]),
                           ("replay FILE --policy hetsched",
                            ["replay", str(file), "--policy", "hetsched"]),
                           ("explain TASK FILE", ["explain", task, str(file)]),
                           ("explain TASK (the cluster)", ["explain", task]),
                           ("check FILE", ["check", str(file)])]:
            m = measured(argv, args.tree, env, () if argv[0] in ("explain", "check") else
                         ("--no-progress",))
            print(f"| `{name}` | {m['wall_s']} | {m['cpu_s']} | {m['max_rss_mb']} | "
                  f"{m['status']} |", flush=True)
        print(f"integrity check: {checker_bytes_per_record(file, args.tree):.0f} B held a "
              "record")


if __name__ == "__main__":
    main()
