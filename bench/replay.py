"""Replay speed: events per second of ``hetsched replay``, placement workload, one core and more.

    taskset -c 0 .venv/bin/python bench/replay.py [--nodes 200] [--tasks 4000]
        [--profiles hetsched,fgd,bestfit] [--repeat 3] [--least-cpu] [--cells 2 --jobs 2]
        [--bound] [--telemetry 20000]

Records a run on the openb trace (GPU nodes of ``openb_node_list_gpu_node.csv``,
tasks of ``openb_pod_list_default.csv`` submitted one a second, finished FIFO
to keep at most 200 running, a tick every 50 submissions), writes it to an
export file and reads it back, then times :func:`streams.replay.replay` over the
file's records end to end: decode of every input record, the worker's own step
(``streams.adapter.apply``), encode, byte comparison with the recorded
decision, both hash chains. Events per second count input-log records.

Each replay is timed ``--repeat`` times in one process and the fastest is
reported, with its CPU time too: on a machine shared with other jobs the
process's CPU time is the steadier figure, and ``--least-cpu`` reports the
replay with the least CPU time instead of the fastest by wall clock (on a
loaded machine the two differ). It also takes the CPU time of the
bare step (``apply`` over pre-decoded envelopes, once) to show how much of the
replay is the decision core.

``--cells N`` (N > 1) adds the parallel figure: N cells, each the same
placement workload with its own node and task names on its own partition,
replayed with ``--jobs`` processes (``replay(..., jobs=)``, whole cells per
process). Its events/s is the total over all processes (wall clock), which only
scales when the machine has that many idle cores; the workers' CPU seconds are
also given, and the events per worker-CPU-second times the workers, the rate
with one free core per worker (a projection from measured CPU time).

``--bound`` adds what the rest of the replay costs without the scheduler's
scoring: the same replay, each ``place`` call answered from a tape of the
answers a first replay got (``PlaceTape``), so every decision still matches.
Its events/s is the most any speed-up of the placement alone could give; the
placement's share of the replay is one minus the ratio of the two rates.

``--telemetry N`` times a log of the other kind, the bulk of a live cell's input
log: the nodes' registrations then N ``GpuTelemetry`` records (seeded values,
random nodes, one a second), which the cell folds into its state and which
decide nothing here.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import importlib
import inspect
import os
import platform
import random
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

from schemas.codec import encode
from schemas.events import GpuTelemetry, make_event
from streams.adapter import apply
from streams.audit import logfile
from streams.audit.logfile import Header
from streams.audit.records import Record
from streams.audit.workload import T0, Recording, record_run
from streams.core.cell import Cell
from streams.core.request import TaskRequest
from streams.core.scheduler import PlaceResult, place
from streams.profiles.service import service_scheduler
from streams.replay import replay
from streams.sim.traces import read_nodes, read_tasks

Node = tuple[str, int, int, int, str | None]

_PLACE_CALLERS = ("streams.core.cell", "streams.core.adapt.engine", "streams.core.step")
"""The modules that call ``streams.core.scheduler.place`` on a replay's path."""


class PlaceTape:
    """The answers ``place`` gave in one replay, in call order, to answer a later replay
    of the same log without scoring anything (``--bound``)."""

    def __init__(self) -> None:
        self.answers: list[PlaceResult] = []
        self.played = 0

    def record(self, *args: Any, **kw: Any) -> PlaceResult:
        result = place(*args, **kw)
        self.answers.append(result)
        return result

    def play(self, *args: Any, **kw: Any) -> PlaceResult:
        result = self.answers[self.played]
        self.played += 1
        return result


@contextlib.contextmanager
def placing_by(answer: Callable[..., PlaceResult]) -> Iterator[None]:
    """``place`` replaced by ``answer`` in every module of ``_PLACE_CALLERS``."""
    modules = [importlib.import_module(name) for name in _PLACE_CALLERS]
    saved = [getattr(m, "place") for m in modules]  # noqa: B009 (a module's attribute)
    for m in modules:
        setattr(m, "place", answer)  # noqa: B010
    try:
        yield
    finally:
        for m, original in zip(modules, saved, strict=True):
            setattr(m, "place", original)  # noqa: B010


def placement_free(inputs: list[Record], decisions: list[Record], profile: str,
                   repeat: int, least_cpu: bool = False) -> tuple[Any, float, float, int]:
    """``_timed`` with the placements answered from a tape: (report, wall s, CPU s,
    placements answered). Raises if the taped replay diverges from the recording."""
    tape = PlaceTape()
    with placing_by(tape.record):
        replay(inputs, decisions, service_scheduler(profile))
    best: tuple[Any, float, float] | None = None
    for _ in range(repeat):
        tape.played = 0
        with placing_by(tape.play):
            found = _timed(inputs, decisions, profile, 1)
        if tape.played != len(tape.answers):
            raise SystemExit(f"{profile}: the taped replay asked {tape.played} placements, "
                             f"the first {len(tape.answers)}")
        if best is None or (found[2] < best[2] if least_cpu else found[1] < best[1]):
            best = found
    assert best is not None
    return (*best, len(tape.answers))


def _through_file(rec: Recording) -> tuple[list[Record], list[Record]]:
    """The recording as ``hetsched replay FILE`` sees it: written, then read back."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "run.jsonl.gz"
        logfile.write(path, Header(topics=[], exported_at=""), rec.records)
        _, records = logfile.read(path)
    inputs = [r for r in records if r.topic.endswith("input-log")]
    decisions = [r for r in records if r.topic.endswith("decisions")]
    return inputs, decisions


def _timed(inputs: list[Record], decisions: list[Record], profile: str, repeat: int,
           least_cpu: bool = False, **kw: Any) -> tuple[Any, float, float]:
    """The fastest of ``repeat`` replays (by CPU time with ``least_cpu``): (report, wall s,
    CPU s of this process)."""
    best: tuple[Any, float, float] | None = None
    for _ in range(repeat):
        sched = service_scheduler(profile)
        cpu0, wall0 = time.process_time(), time.perf_counter()
        report = replay(inputs, decisions, sched, **kw)
        wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
        if not report.ok:
            raise SystemExit(f"{profile}: replay does not reproduce the recording")
        if best is None or (cpu < best[2] if least_cpu else wall < best[1]):
            best = (report, wall, cpu)
    assert best is not None
    return best


def telemetry_log(nodes: Sequence[Node], profile: str, n: int, seed: int = 1,
                  tasks: Sequence[TaskRequest] = (), cell: str = "cell-0",
                  partition: int = 0) -> tuple[list[Record], list[Record]]:
    """(inputs, decisions) of the nodes' registrations (and a recorded run of ``tasks``)
    followed by ``n`` telemetry records, as ``cell`` on ``partition``."""
    rec = record_run(nodes, tasks, service_scheduler(profile), cell=cell, partition=partition)
    inputs, decisions = _through_file(rec)
    last, rnd = inputs[-1], random.Random(seed)
    gpu_nodes = [node for node in nodes if node[3] > 0]
    for i in range(n):
        name, _, _, gpus, _ = gpu_nodes[rnd.randrange(len(gpu_nodes))]
        gpu = rnd.randrange(gpus)
        env = make_event(GpuTelemetry(
            node_id=name, gpu_index=gpu, gpu_uuid=f"GPU-{name}-{gpu}",
            gpu_util_pct=round(rnd.uniform(0, 100), 1), mem_used_mib=rnd.randrange(40_000),
            temperature_c=round(rnd.uniform(30, 80), 1), power_w=round(rnd.uniform(50, 300), 1)),
            source=f"agent/{name}", occurred_at=T0 + timedelta(seconds=i + 1), cell=cell,
            id_seed=f"{cell}/telemetry/{i}")
        inputs.append(Record(last.topic, last.partition, last.offset + 2 * (i + 1), None,
                             last.key, encode(env)))
    return inputs, decisions


def _cells(nodes: Sequence[Node], tasks: Sequence[TaskRequest], profile: str,
           n: int) -> Recording:
    """``n`` copies of the workload as separate cells (own names, partition k)."""
    out = Recording()
    for k in range(n):
        tag = f"c{k}-"
        rec = record_run([(tag + name, cpu, mem, gpus, model)
                          for name, cpu, mem, gpus, model in nodes],
                         [dataclasses.replace(t, task=tag + t.task) for t in tasks],
                         service_scheduler(profile), cell=f"cell-{k}", partition=k)
        out.inputs += rec.inputs
        out.decisions += rec.decisions
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=200)
    parser.add_argument("--tasks", type=int, default=4000)
    parser.add_argument("--profiles", default="hetsched,fgd,bestfit")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--least-cpu", action="store_true",
                        help="report the replay with the least CPU time, not the fastest wall")
    parser.add_argument("--cells", type=int, default=1, help="parallel figure: N cells")
    parser.add_argument("--jobs", type=int, default=0, help="processes (default: --cells)")
    parser.add_argument("--telemetry", type=int, default=0, metavar="N",
                        help="also time a log of node registrations and N telemetry records")
    parser.add_argument("--bound", action="store_true",
                        help="also time the replay with the placements answered from a tape")
    args = parser.parse_args()
    nodes: list[Node] = [(n.name, n.cpu_milli, n.memory_mib, n.gpu_count, n.gpu_model)
                         for n in read_nodes("openb_node_list_gpu_node.csv")[:args.nodes]]
    tasks = read_tasks("openb_pod_list_default.csv")[:args.tasks]
    cpus = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else set()
    print(f"machine: {platform.processor() or platform.machine()}, "
          f"Python {platform.python_version()}, {len(cpus) or '?'} CPU(s) allowed; "
          f"{len(nodes)} nodes, {len(tasks)} tasks, best of {args.repeat}")
    print("| profile | input events | decisions | replay s | events/s | CPU s | events/CPU s "
          "| bare step CPU s | match | head |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---|---|")
    bounds: list[str] = []
    for profile in args.profiles.split(","):
        rec = record_run(nodes, tasks, service_scheduler(profile))
        inputs, decisions = _through_file(rec)
        report, wall, cpu = _timed(inputs, decisions, profile, args.repeat, args.least_cpu)
        if args.bound:
            free, _, free_cpu, placed = placement_free(inputs, decisions, profile, args.repeat,
                                                       args.least_cpu)
            rate, free_rate = report.events / cpu, free.events / free_cpu
            bounds.append(f"| {profile} | {placed} | {rate:,.0f} | {free_rate:,.0f} "
                          f"| {free_rate / rate:.2f} | {1 - rate / free_rate:.0%} |")
        cell = Cell("cell-0", service_scheduler(profile))
        started = time.process_time()
        for env in rec.envelopes:
            apply(cell, env)
        bare = time.process_time() - started
        print(f"| {profile} | {report.events} | {report.replayed} | {wall:.2f} "
              f"| {report.events / wall:,.0f} | {cpu:.2f} | {report.events / cpu:,.0f} "
              f"| {bare:.2f} | {'yes' if report.ok else 'NO'} | {report.replayed_hash[:12]} |")
    if bounds:
        print("\nwithout the scoring: each place call answered from a tape of a first replay")
        print("| profile | placements | events/CPU s | placement free: events/CPU s "
              "| ratio | placement's share |")
        print("|---|---:|---:|---:|---:|---:|")
        print("\n".join(bounds))
    if args.telemetry:
        print(f"\ntelemetry: {len(nodes)} registrations then {args.telemetry} GpuTelemetry "
              "records")
        print("| profile | input events | decisions | events/CPU s | us per event | match |")
        print("|---|---:|---:|---:|---:|---|")
        for profile in args.profiles.split(","):
            inputs, decisions = telemetry_log(nodes, profile, args.telemetry)
            report, _, cpu = _timed(inputs, decisions, profile, args.repeat, args.least_cpu)
            print(f"| {profile} | {report.events} | {report.replayed} "
                  f"| {report.events / cpu:,.0f} | {cpu * 1e6 / report.events:.1f} "
                  f"| {'yes' if report.ok else 'NO'} |")
    if args.cells > 1:
        jobs = args.jobs or args.cells
        if "jobs" not in inspect.signature(replay).parameters:
            raise SystemExit("this replay has no parallel mode (jobs)")
        print(f"\nparallel: {args.cells} cells x ({len(nodes)} nodes, {len(tasks)} tasks), "
              f"{jobs} processes")
        print("| profile | input events | decisions | replay s | events/s (total) "
              "| workers' CPU s | events per worker CPU s x workers | 1 process s "
              "| 1 process CPU s | match |")
        print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---|")
        for profile in args.profiles.split(","):
            inputs, decisions = _through_file(_cells(nodes, tasks, profile, args.cells))
            before = _children_cpu()
            par, wall, _ = _timed(inputs, decisions, profile, 1, jobs=jobs)
            workers_cpu = _children_cpu() - before
            one, wall1, cpu1 = _timed(inputs, decisions, profile, 1)
            same = par.replayed_hash == one.replayed_hash and par.ok
            # Cells of equal size: each worker did about workers_cpu / jobs; with a free
            # core each, the run would take that long (a projection, labelled as such).
            projected = par.events / (workers_cpu / jobs) if workers_cpu else 0.0
            print(f"| {profile} | {par.events} | {par.replayed} | {wall:.2f} "
                  f"| {par.events / wall:,.0f} | {workers_cpu:.2f} | {projected:,.0f} "
                  f"| {wall1:.2f} | {cpu1:.2f} | {'yes' if same else 'NO'} |")


def _children_cpu() -> float:
    """CPU seconds of this process's finished children (the replay's forked workers)."""
    import resource

    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


if __name__ == "__main__":
    main()
