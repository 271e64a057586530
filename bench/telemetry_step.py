"""CPU per GpuTelemetry event of the core's step alone (issue 11), and a fingerprint of what
it decided and persisted, so two commits can be compared for speed and for sameness.

    PYTHONPATH=$PWD .venv/bin/python bench/telemetry_step.py [--events 20000] [--rounds 3]

No broker, no decode: ``streams.adapter.apply`` over pre-built envelopes on a cell of
``--nodes`` 8-GPU A100 nodes with ``--tasks`` running one-GPU tasks (so the per-GPU
booked memory is summed over real tasks). Two telemetry mixes:

* ``steady``: what ``bench/load.py`` sends (55 C, 1024 MiB, no memory bandwidth): the
  common case of a sample that changes nothing the core acts on;
* ``varied``: seeded random temperatures (a few near or past the throttle point, so
  GPUs go hot and cool again), memory around and above the bookings, memory bandwidth
  on most samples, foreign memory on some, and rare fatal XIDs and ECC errors.

Each round builds a fresh cell (untimed), then times ``apply`` over every event with
``time.process_time``; the best round is reported. Every ``--batch`` events the cell's
dirty records are "written" (as ``CellStore.finish`` does); the fingerprint hashes every
decision, the last record written per key, the cell's records at the end and its free-GPU
array. Equal fingerprints on two commits: same decisions, same persisted state.
Any commit whose ``apply`` takes envelopes can be measured: run this file with
``PYTHONPATH`` pointing at that commit's checkout.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import orjson

from schemas.codec import encode
from schemas.events import GpuSpec, GpuTelemetry, NodeRegistered, TaskSubmitted, make_event
from streams.adapter import apply
from streams.core.cell import Cell
from streams.profiles.service import service_scheduler

T0 = datetime(2026, 11, 29, 12, 0, 0, tzinfo=UTC)
GPU_MIB = 81920


def _at(i: int) -> datetime:
    return T0 + timedelta(milliseconds=i)


def _node(n: int) -> Any:
    nid = f"n{n:04d}"
    payload = NodeRegistered(
        node_id=nid, cell="cell-0", cpu_milli=256000, memory_mib=1048576, pool="training",
        gpus=[GpuSpec(index=g, uuid=f"GPU-{nid}-{g}", model="A100", memory_mib=GPU_MIB,
                      fp32_tflops=19.5, fp16_tflops=312.0, mem_bandwidth_gbps=2039.0,
                      power_limit_w=400.0) for g in range(8)])
    return make_event(payload, source=f"agent/{nid}", occurred_at=_at(n), id_seed=f"node{n}")


def _task(t: int, rng: random.Random) -> Any:
    resources: dict[str, Any] = {"gpu_count": 1, "gpu_share_milli": rng.choice([250, 500, 1000]),
                                 "cpu_milli": 1000, "memory_mib": 2048}
    if rng.random() < 0.5:
        resources["gpu_memory_mib"] = rng.choice([8192, 20000, 40000])
    payload = TaskSubmitted.model_validate({
        "task_id": f"t{t:05d}", "tenant": "team-a", "resources": resources,
        "features": {"profile": "compute"},
        "executor": {"kind": "simulated", "simulated": {
            "duration_s": 1.0, "gpu_util_pct": 50.0, "gpu_mem_used_mib": 1024}}})
    return make_event(payload, source="cli/bench", occurred_at=_at(10_000 + t),
                      id_seed=f"task{t}")


def _telemetry(i: int, nodes: int, mix: str, rng: random.Random) -> Any:
    node, gpu = f"n{i % nodes:04d}", (i // nodes) % 8
    extra: dict[str, Any] = {}
    if mix == "steady":
        temp, mem = 55.0, 1024
    else:
        r = rng.random()
        temp = round(rng.uniform(80.0, 95.0) if r < 0.03 else rng.uniform(35.0, 75.0), 1)
        mem = rng.choice([0, 1024, 8192, 20000, 41000, 60000, 81000])
        if rng.random() < 0.9:
            extra["mem_util_pct"] = rng.choice([12.5, 40.0, 77.0])
        if rng.random() < 0.1:
            extra["foreign_mem_mib"] = rng.choice([0, 512, 4096])
        if rng.random() < 0.02:
            extra["throttle_reasons"] = [rng.choice(["sw_power_cap", "gpu_idle"])]
        if rng.random() < 0.0005:
            extra["xid_errors"] = [rng.choice([13, 79])]
        if rng.random() < 0.0003:
            extra["ecc_dbe_total"] = 1
    payload = GpuTelemetry(node_id=node, gpu_index=gpu, gpu_uuid=f"GPU-{node}-{gpu}",
                           gpu_util_pct=50.0, mem_used_mib=mem, temperature_c=temp,
                           power_w=150.0, **extra)
    return make_event(payload, source=f"agent/{node}", occurred_at=_at(1_000_000 + i),
                      id_seed=f"tel{i}")


def build(nodes: int, tasks: int) -> Cell:
    """A cell with ``nodes`` registered nodes and ``tasks`` placed tasks."""
    cell = Cell.restore("cell-0", service_scheduler("hetsched"), None, [], [])
    rng = random.Random(7)
    for n in range(nodes):
        apply(cell, _node(n))
    for t in range(tasks):
        apply(cell, _task(t, rng))
    cell.dirty_nodes.clear()
    cell.dirty_tasks.clear()
    return cell


def run(cell: Cell, events: list[Any], batch: int) -> tuple[float, str, int]:
    """(CPU seconds in ``apply``, fingerprint, node records written)."""
    digest = hashlib.sha256()
    written: dict[str, bytes] = {}
    writes = 0
    spent = 0.0
    for j in range(0, len(events), batch):
        t0 = time.process_time()
        decided = [apply(cell, env) for env in events[j:j + batch]]
        spent += time.process_time() - t0
        for ds in decided:
            for d in ds:
                digest.update(encode(d))
        for node in sorted(cell.dirty_nodes):
            written[f"node/{node}"] = orjson.dumps(cell.node_record(node))
            writes += 1
        for task in sorted(cell.dirty_tasks):
            written[f"task/{task}"] = orjson.dumps(cell.task_record(task))
        cell.dirty_nodes.clear()
        cell.dirty_tasks.clear()
    for key in sorted(written):
        digest.update(key.encode() + written[key])
    for node in cell.nodes:
        digest.update(orjson.dumps(cell.node_record(node)))
    for task in cell.tasks:
        digest.update(orjson.dumps(cell.task_record(task)))
    digest.update(cell.state.gpu_free.tobytes())
    return spent, digest.hexdigest()[:12], writes


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--events", type=int, default=20_000)
    p.add_argument("--nodes", type=int, default=200)
    p.add_argument("--tasks", type=int, default=600)
    p.add_argument("--batch", type=int, default=200)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--mix", default="steady,varied")
    p.add_argument("--out", type=Path, default=None)
    args = p.parse_args()
    results: dict[str, Any] = {}
    for mix in args.mix.split(","):
        rng = random.Random(42)
        events = [_telemetry(i, args.nodes, mix, rng) for i in range(args.events)]
        best = None
        prints = set()
        for _ in range(args.rounds):
            spent, fp, writes = run(build(args.nodes, args.tasks), events, args.batch)
            prints.add(fp)
            best = spent if best is None else min(best, spent)
        assert best is not None
        results[mix] = {"events": args.events, "us_per_event": round(best / args.events * 1e6, 2),
                        "fingerprint": ",".join(sorted(prints)),
                        "node_records_written": writes}
        print(json.dumps({mix: results[mix]}), flush=True)
    results["load"] = " ".join(Path("/proc/loadavg").read_text().split()[:3])
    if args.out is not None:
        args.out.write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
