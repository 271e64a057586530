"""Replay speed: events per second of ``hetsched replay`` on one core, placement workload.

    .venv/bin/python bench/replay.py [--nodes 200] [--tasks 4000] [--profiles hetsched,bestfit]

Records a run on the openb trace (GPU nodes of ``openb_node_list_gpu_node.csv``,
tasks of ``openb_pod_list_default.csv`` submitted one a second, finished FIFO
to keep at most 200 running, a tick every 50 submissions), writes it to an
export file, then times :func:`streams.replay.replay` over the file's records
(decode, the worker's own step, encode, byte comparison, hash chains) in one
process. It also times the bare step (``apply`` over pre-decoded envelopes) to
show how much of the time is the decision core and how much is the audit.
"""

from __future__ import annotations

import argparse
import platform
import tempfile
import time
from pathlib import Path

from streams.adapter import apply
from streams.audit import logfile
from streams.audit.logfile import Header
from streams.audit.workload import record_run
from streams.core.cell import Cell
from streams.core.service_profile import service_scheduler
from streams.replay import replay
from streams.sim.traces import read_nodes, read_tasks


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=200)
    parser.add_argument("--tasks", type=int, default=4000)
    parser.add_argument("--profiles", default="hetsched,fgd,bestfit")
    args = parser.parse_args()
    nodes = [(n.name, n.cpu_milli, n.memory_mib, n.gpu_count, n.gpu_model)
             for n in read_nodes("openb_node_list_gpu_node.csv")[:args.nodes]]
    tasks = read_tasks("openb_pod_list_default.csv")[:args.tasks]
    print(f"machine: {platform.processor() or platform.machine()}, "
          f"Python {platform.python_version()}; {len(nodes)} nodes, {len(tasks)} tasks")
    print("| profile | input events | decisions | replay s | events/s | bare step s "
          "| audit overhead | match |")
    print("|---|---:|---:|---:|---:|---:|---:|---|")
    for profile in args.profiles.split(","):
        rec = record_run(nodes, tasks, service_scheduler(profile))
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "run.jsonl.gz"
            logfile.write(path, Header(topics=[], exported_at=""), rec.records)
            _, records = logfile.read(path)
        inputs = [r for r in records if r.topic.endswith("input-log")]
        decisions = [r for r in records if r.topic.endswith("decisions")]
        report = replay(inputs, decisions, service_scheduler(profile))
        cell = Cell("cell-0", service_scheduler(profile))
        started = time.perf_counter()
        for env in rec.envelopes:
            apply(cell, env)
        bare = time.perf_counter() - started
        rate = report.events / report.elapsed_s
        overhead = (report.elapsed_s - bare) / report.elapsed_s
        print(f"| {profile} | {report.events} | {report.replayed} | {report.elapsed_s:.2f} "
              f"| {rate:,.0f} | {bare:.2f} | {overhead:.0%} | {'yes' if report.ok else 'NO'} |")


if __name__ == "__main__":
    main()
