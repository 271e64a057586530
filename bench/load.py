"""Load and scale benchmarks of issue 11 on the real Kafka path.

    .venv/bin/python bench/load.py [--bootstrap HOST:PORT] [--only telemetry,ramp,scale]
        [--out bench/results/load.json]

* telemetry: GpuTelemetry events/s one worker's router/sequencer appends to the
  input log (aim 20,000/s), and the worker's CPU per event. ``both_hops_per_s``: events/s
  its scheduler processed (first to last sample that moved); ``both_hops_busy_per_s``
  the same without the last, partly idle, interval (:func:`busy_rate_of`). Event ``i`` is GPU
  ``(i // nodes) % 8`` of node ``i % nodes``: every GPU of every node reports in
  turn (``i % 8`` with 200 nodes had each node report one GPU only, 100 times,
  which made a batch look full of repeats). A backlog is produced while the worker is stopped;
  after its restart the input log's committed end offset (read_committed LSO,
  all partitions) is sampled every ``--sample-s`` (0.25 s; it was 1 s until
  session 11, when a fast run could append the whole backlog within two samples).
  Offsets include a few transaction markers (one per commit and partition), so the
  figure is a slight overestimate.
* ramp: submissions/s with p50/p99 submit-to-decision latency at increasing
  load (``--steps``, ``--step-s`` each) until saturation (p50 over 2 s or under
  80 % of the step's submissions decided within 15 s after it).
* scale: 1, 2 and 4 workers over 8 cells: a backlog produced as fast as
  possible, steady decisions/s in total and per worker.
* cpu: no broker; CPU microseconds per GpuTelemetry event of the two handlers
  a worker runs on the ingest path, in this process on stand-in transactions:
  the router (``Router.process``: bytes in, routed bytes out) and the
  scheduler (``CellStore.process`` of the routed bytes). Kafka client and
  transaction costs excluded: the telemetry run's ``worker_cpu_us_per_event``
  is the whole worker's. ``--only cpu`` alone needs no broker.
* client: CPU microseconds per record of the aiokafka calls on that path, on a
  scratch topic: a transactional producer's ``send`` per record (how
  ``eos_txn.Transaction`` appended before session 4), ``send_batch`` of the same records
  (default 16 KiB batches), ``eos_txn.Transaction`` itself (one batch per partition,
  ``produce.BATCH_BYTES``), 200 per transaction, and a ``read_committed``
  consumer's ``getmany``.

Memory per 10,000 GPUs: ``bench/state_memory.py`` (see BENCHMARKS.md). The
harness (``Run``: workers, producer, read_committed decision tail, node
registration, TaskFinished recycling) is ``bench/service.py``'s.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from service import (
    DATE,
    Run,
    broker,
    load_note,
    node_event,
    produce_backlog,
    save_results,
    telemetry_event,
)

from schemas.codec import encode
from schemas.topics import INPUT_LOG, NODES, TELEMETRY


async def bench_telemetry(bootstrap: str, work: Path, count: int, nodes: int,
                          window_s: float, sample_s: float = 0.25) -> dict[str, Any]:
    run = Run(bootstrap, work / "telemetry")
    run.finish = False
    rng = random.Random(1)
    try:
        worker = run.add_worker()
        await run.start()
        await run.wait_healthy()
        ids = await run.register_nodes(nodes, cells=1)
        await run.wait_nodes(nodes)
        await asyncio.to_thread(worker.stop)
        began = time.monotonic()
        futs = []
        for i in range(count):
            env = telemetry_event(ids[i % nodes], (i // nodes) % 8,
                                  round(rng.uniform(0, 100), 1))
            futs.append(await run.send(TELEMETRY, env))
            if len(futs) >= 5000:
                await asyncio.gather(*futs)
                futs.clear()
        await asyncio.gather(*futs)
        produce_rate = count / (time.monotonic() - began)
        base = await run.input_log_end()
        t0 = time.monotonic()
        worker.start()
        samples: list[tuple[float, int]] = []
        processed: list[tuple[float, int]] = []
        cpu: list[float | None] = []
        while time.monotonic() - t0 < window_s:
            await asyncio.sleep(sample_s)
            end = await run.input_log_end()
            samples.append((time.monotonic() - t0, end - base))
            cpu.append(worker.cpu_seconds())
            done_by_scheduler = await asyncio.to_thread(
                telemetry_processed, [p.web_port for p in worker.procs])
            if done_by_scheduler is not None:
                processed.append((time.monotonic() - t0, done_by_scheduler))
            if end - base >= count and (not processed or processed[-1][1] >= count):
                break
        both_hops = rate_of(processed)
        busy = busy_rate_of(processed, count)
        moving = [i for i, (_, n) in enumerate(samples) if n > 0]
        rate = rate_of(samples)
        # The worker's own CPU (router and scheduler, Kafka clients included) per
        # event, from its first append until its scheduler has also consumed the
        # last one (it runs behind the router): independent of what else the
        # machine runs, unlike the rate.
        caught_up_cpu = None
        if moving:
            done = await scheduler_caught_up(run, base + samples[-1][1], 60.0)
            caught_up_cpu = worker.cpu_seconds() if done else None
        cpu_per_event, cpu_missing = cpu_per_event_of(samples, cpu, caught_up_cpu)
        return {"backlog": count, "nodes": nodes, "producer_rate": round(produce_rate),
                "appended": samples[-1][1] if samples else 0,
                "window_s": round(samples[-1][0], 1) if samples else None,
                "restart_to_first_append_s": round(samples[moving[0]][0], 1) if moving
                else None,
                "ingest_per_s": None if rate is None else round(rate),
                "both_hops_per_s": None if both_hops is None else round(both_hops),
                "both_hops_busy_per_s": None if busy is None else round(busy),
                "processed_by_scheduler": processed[-1][1] if processed else None,
                "worker_cpu_us_per_event": None if cpu_per_event is None
                else round(cpu_per_event, 1),
                "worker_cpu_missing": cpu_missing,
                "sample_s": sample_s,
                "samples": samples[:: max(1, len(samples) // 20)],
                "processed": processed[:: max(1, len(processed) // 20)], "load": load_note()}
    finally:
        await run.stop()


def telemetry_processed(web_ports: list[int | None]) -> int | None:
    """Telemetry events the worker's scheduler has processed (``hetsched_inputs_total``
    on ``/metrics``, summed over the worker's processes: with ``--split`` the router's
    counts none), None when a process is unreadable."""
    import urllib.request

    total = 0
    for port in web_ports:
        if port is None:
            return None
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2) as r:
                text = r.read().decode()
        except OSError:
            return None
        for line in text.splitlines():
            if line.startswith('hetsched_inputs_total{type="GpuTelemetry"}'):
                total += int(float(line.rsplit(" ", 1)[1]))
    return total


def cpu_per_event_of(samples: list[tuple[float, int]], cpu: list[float | None],
                     caught_up_cpu: float | None) -> tuple[float | None, str | None]:
    """The worker's CPU microseconds per appended event, and why it is None when it is.

    ``samples[i]`` is (seconds since the restart, events appended) and ``cpu[i]`` the
    worker's CPU seconds at that sample; ``caught_up_cpu`` is its CPU once its scheduler
    has committed past the last append (None when it never did). The figure runs from
    the first sample that saw an append, so the worker's start-up CPU is left out; it
    needs a later sample with more appends. A run whose router appends the whole
    backlog between two samples has none: sample more often (``--sample-s``).
    """
    moving = [i for i, (_, n) in enumerate(samples) if n > 0]
    if not moving:
        return None, "nothing was appended within the window"
    first = moving[0]
    appended_after = samples[-1][1] - samples[first][1]
    if appended_after <= 0:
        return None, (f"the whole backlog ({samples[first][1]}) was appended between two "
                      f"samples: sample more often than every "
                      f"{samples[first][0] - (samples[first - 1][0] if first else 0):.2f} s")
    first_cpu = cpu[first]
    if first_cpu is None:
        return None, "the worker's CPU time was unreadable at its first append"
    if caught_up_cpu is None:
        return None, "the scheduler did not commit up to the router's last append in time"
    return (caught_up_cpu - first_cpu) / appended_after * 1e6, None


def rate_of(samples: list[tuple[float, int]]) -> float | None:
    """Events per second between the first and the last sample that moved."""
    moving = [(t, n) for t, n in samples if n > 0]
    if len(moving) < 2 or moving[-1][0] <= moving[0][0]:
        return None
    (ta, na), (tb, nb) = moving[0], moving[-1]
    return (nb - na) / (tb - ta)


def busy_rate_of(samples: list[tuple[float, int]], total: int) -> float | None:
    """Events per second between the first sample that moved and the last one still
    short of ``total``: only intervals in which the backlog was being worked through.

    :func:`rate_of` ends at the sample that saw the last event, whose interval is
    partly idle (the run ended somewhere inside it): with 1-s samples and a run of
    ~5 s (100,000 events at ~20,000/s) that understates the rate by up to a fifth.
    """
    busy = [(t, n) for t, n in samples if 0 < n < total]
    if len(busy) < 2 or busy[-1][0] <= busy[0][0]:
        return None
    (ta, na), (tb, nb) = busy[0], busy[-1]
    return (nb - na) / (tb - ta)


async def scheduler_caught_up(run: Run, end: int, timeout_s: float) -> bool:
    """Wait until the worker's scheduler has committed its input-log offsets up to ``end``
    (less one transaction marker per partition); False on timeout."""
    from aiokafka.admin import AIOKafkaAdminClient

    admin = AIOKafkaAdminClient(bootstrap_servers=run.bootstrap)
    await admin.start()
    try:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            offsets = await admin.list_consumer_group_offsets(
                f"{run.prefix}scheduler-scheduler")
            mine = {tp: o.offset for tp, o in offsets.items()
                    if tp.topic == run.prefix + INPUT_LOG}
            if mine and sum(mine.values()) >= end - len(mine):
                return True
            await asyncio.sleep(0.2)
        return False
    finally:
        await admin.close()


async def bench_ramp(bootstrap: str, work: Path, steps: list[float], step_s: float,
                     nodes: int) -> dict[str, Any]:
    run = Run(bootstrap, work / "ramp", hold_s=1.0)
    out: list[dict[str, Any]] = []
    try:
        run.add_worker()
        await run.start()
        await run.wait_healthy()
        await run.register_nodes(nodes, cells=1)
        await run.wait_nodes(nodes)
        for rate in steps:
            before = set(run.sent_at)
            t0 = time.monotonic()
            sent, achieved = await run.paced(rate, step_s)
            tids = [t for t in run.sent_at if t not in before]
            await run.drain(tids, 15.0)
            decided = [t for t in tids if t in run.first_decision]
            lat = run.latencies(tids)
            done = [run.first_decision[t] for t in decided]
            row = {"rate": rate, "achieved_submit_rate": round(achieved, 1), "sent": sent,
                   "decided": len(decided),
                   "decided_per_s": round(len(decided) / (max(done) - t0), 1) if done else 0,
                   **lat, "load": load_note()}
            out.append(row)
            print(json.dumps(row), flush=True)
            p50 = lat["first_decision"]["p50_ms"]
            if len(decided) < 0.8 * sent or (p50 is not None and p50 > 2000):
                row["saturated"] = True
                break
            await asyncio.sleep(3.0)
        return {"steps": out, "nodes": nodes, "step_s": step_s, "hold_s": run.hold_s}
    finally:
        await run.stop()


async def bench_scale(bootstrap: str, work: Path, workers: list[int], backlog: int,
                      nodes: int) -> dict[str, Any]:
    out: list[dict[str, Any]] = []
    for n in workers:
        run = Run(bootstrap, work / f"scale-{n}", cells=8)
        run.finish = False
        try:
            for _ in range(n):
                run.add_worker()
            await run.start()
            startup = await run.wait_healthy()
            await run.register_nodes(nodes, cells=8)
            await run.wait_nodes(nodes, timeout_s=180)
            await asyncio.sleep(5.0)  # let the group settle
            base = len(run.arrivals)
            tids, produce_rate = await produce_backlog(run, backlog)
            await run.drain(tids, 180.0)
            arr = sorted(run.arrivals[base:])
            steady = None
            if len(arr) > 20:
                i, j = len(arr) // 10, len(arr) * 9 // 10 - 1
                steady = (j - i) / (arr[j] - arr[i])
            row = {"workers": n, "cells": 8, "backlog": backlog, "nodes": nodes,
                   "startup_s": round(startup, 1), "producer_rate": round(produce_rate),
                   "decided": sum(1 for t in tids if t in run.first_decision),
                   "decisions_per_s": None if steady is None else round(steady, 1),
                   "per_worker": None if steady is None else round(steady / n, 1),
                   "load": load_note()}
            out.append(row)
            print(json.dumps(row), flush=True)
        finally:
            await run.stop()
    return {"runs": out}


class _StandInTxn:
    """What the handlers see of ``eos_txn.Transaction``: appends kept, state writes counted."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, bytes | None, bytes | None]] = []
        self.puts = 0

    async def send(self, topic: str, key: bytes | None, value: bytes | None,
                   partition: int | None = None, headers: Any = None) -> None:
        self.sent.append((topic, key, value))

    async def put(self, key: str, value: Any) -> None:
        self.puts += 1


def bench_cpu(count: int, nodes: int, batch: int = 200) -> dict[str, Any]:
    """CPU µs per GpuTelemetry event of the router and the scheduler handlers (see the
    module doc): the telemetry run's events, processed in ``batch``-record transactions."""
    from streams.processors.context import Context
    from streams.processors.eos_txn import Transaction
    from streams.processors.routing import Router
    from streams.processors.scheduling import CellStore
    from streams.profiles.service import service_scheduler
    from streams.settings import WorkerSettings

    settings = WorkerSettings(bootstrap="-", app_id="bench", web_port=0, web_host="-",
                              data_dir=Path("."), cells=1, partitions=8, replication=1,
                              tick_s=1.0, profile="hetsched")
    summaries = SimpleNamespace(items=lambda: [], latest={})
    # One context for both handlers, as streams.app builds them (the scheduler takes the
    # telemetry envelopes its router validated from it).
    rctx = sctx = Context(settings, summaries)  # type: ignore[arg-type]
    router = Router(rctx)
    cells = CellStore(sctx, service_scheduler(settings.profile), "bench-summaries")
    for p in range(settings.partitions):
        router.restore(p, {})
        cells.restore(p, {})
    rng = random.Random(1)
    ids = [f"bench.n{i:05d}" for i in range(nodes)]

    def msg(topic: str, partition: int, offset: int, key: bytes, value: bytes) -> Any:
        return SimpleNamespace(topic=topic, partition=partition, offset=offset, key=key,
                               value=value, headers=(), timestamp=None)

    def keyed(topic: str, node: str, i: int, env: Any) -> Any:
        return msg(topic, hash_partition(node, settings.partitions), i, node.encode(),
                   encode(env))

    registrations = [keyed(settings.topic(NODES), n, i, node_event(n, "cell-0"))
                     for i, n in enumerate(ids)]
    telemetry = [keyed(settings.topic(TELEMETRY), ids[i % nodes], i,
                       telemetry_event(ids[i % nodes], (i // nodes) % 8,
                                       round(rng.uniform(0, 100), 1)))
                 for i in range(count)]

    async def route(records: list[Any]) -> tuple[float, list[Any]]:
        out: list[Any] = []
        spent = 0.0
        for i in range(0, len(records), batch):
            txn = _StandInTxn()
            t0 = time.process_time()
            for r in records[i:i + batch]:
                await router.process(r, cast(Transaction, txn))
            spent += time.process_time() - t0
            out += [msg(t, sctx.cell_partition(k.decode()), len(out) + j, k, v)
                    for j, (t, k, v) in enumerate(txn.sent) if t == settings.topic(INPUT_LOG)
                    and k is not None and v is not None]
        return spent, out

    async def schedule(records: list[Any]) -> float:
        spent = 0.0
        for i in range(0, len(records), batch):
            txn = _StandInTxn()
            t0 = time.process_time()
            for r in records[i:i + batch]:
                await cells.process(r, cast(Transaction, txn))
            for p in {r.partition for r in records[i:i + batch]}:
                await cells.finish(p, cast(Transaction, txn))
            spent += time.process_time() - t0
        return spent

    def repeats() -> float:
        """Share of telemetry records whose GPU already reported earlier in the same
        transaction of its router partition (``batch`` records each): what coalescing
        per transaction could drop at most (see BENCHMARKS.md: it does not)."""
        by_partition: dict[int, list[tuple[str, int]]] = {}
        for i, r in enumerate(telemetry):
            by_partition.setdefault(r.partition, []).append((ids[i % nodes], (i // nodes) % 8))
        repeated = 0
        for seq in by_partition.values():
            for j in range(0, len(seq), batch):
                chunk = seq[j:j + batch]
                repeated += len(chunk) - len(set(chunk))
        return repeated / max(1, len(telemetry))

    async def go() -> dict[str, Any]:
        _, routed_nodes = await route(registrations)
        await schedule(routed_nodes)
        # Transaction by transaction, the scheduler reading what the router just
        # appended, as in a worker keeping up with its input.
        router_s = scheduler_s = 0.0
        routed_count = 0
        for i in range(0, len(telemetry), batch):
            spent, routed = await route(telemetry[i:i + batch])
            router_s += spent
            routed_count += len(routed)
            scheduler_s += await schedule(routed)
        return {"events": count, "nodes": nodes, "batch": batch, "routed": routed_count,
                "router_us_per_event": round(router_s / count * 1e6, 1),
                "scheduler_us_per_event": round(scheduler_s / count * 1e6, 1),
                "same_gpu_repeats_per_transaction": round(repeats(), 3),
                "load": load_note()}

    return asyncio.run(go())


async def bench_client(bootstrap: str, count: int, per_txn: int = 200) -> dict[str, Any]:
    """CPU µs per record of aiokafka's transactional produce and consume (module doc)."""
    import uuid

    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
    from aiokafka.admin import AIOKafkaAdminClient, NewTopic

    topic = f"bench-client-{uuid.uuid4().hex[:8]}"
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    await admin.create_topics([NewTopic(topic, 1, 1)])
    raws = [encode(telemetry_event(f"n{i % 200:05d}", (i // 200) % 8, 42.0))
            for i in range(count)]
    out: dict[str, Any] = {"records": count, "per_transaction": per_txn}
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, transactional_id=topic,
                                enable_idempotence=True, acks="all")
    await producer.start()
    try:
        for mode in ("send", "send_batch"):
            t0 = time.process_time()
            for i in range(0, count, per_txn):
                await producer.begin_transaction()
                futs = []
                if mode == "send":
                    futs = [await producer.send(topic, r, key=b"cell-0")
                            for r in raws[i:i + per_txn]]
                else:
                    batch = producer.create_batch()
                    for r in raws[i:i + per_txn]:
                        if batch.append(key=b"cell-0", value=r, timestamp=None) is None:
                            batch.close()
                            futs.append(await producer.send_batch(batch, topic, partition=0))
                            batch = producer.create_batch()
                            batch.append(key=b"cell-0", value=r, timestamp=None)
                    batch.close()
                    futs.append(await producer.send_batch(batch, topic, partition=0))
                await asyncio.gather(*futs)
                await producer.commit_transaction()
            out[f"producer_{mode}_us"] = round((time.process_time() - t0) / count * 1e6, 1)
    finally:
        await producer.stop()
    # The worker's own path: eos_txn.Transaction (one batch per partition at flush) on a
    # producer configured as the processors configure theirs.
    from streams.processors.eos_txn import Transaction
    from streams.processors.produce import BATCH_BYTES
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, transactional_id=f"{topic}-eos",
                                enable_idempotence=True, acks="all",
                                max_batch_size=BATCH_BYTES)
    await producer.start()
    try:
        t0 = time.process_time()
        for i in range(0, count, per_txn):
            await producer.begin_transaction()
            txn = Transaction(producer, topic, 0)
            for r in raws[i:i + per_txn]:
                await txn.send(topic, b"cell-0", r)
            await txn.flush()
            await producer.commit_transaction()
        out["eos_transaction_us"] = round((time.process_time() - t0) / count * 1e6, 1)
    finally:
        await producer.stop()
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=None,
                                isolation_level="read_committed", enable_auto_commit=False)
    await consumer.start()
    try:
        tp = TopicPartition(topic, 0)
        consumer.assign([tp])
        await consumer.seek_to_beginning(tp)
        got, t0 = 0, time.process_time()
        while got < 3 * count:
            got += sum(len(v) for v in (await consumer.getmany(
                timeout_ms=500, max_records=per_txn)).values())
        out["consumer_getmany_us"] = round((time.process_time() - t0) / got * 1e6, 1)
    finally:
        await consumer.stop()
        await admin.delete_topics([topic])
        await admin.close()
    out["load"] = load_note()
    return out


def hash_partition(key: str, partitions: int) -> int:
    """The producer's default partition of ``key`` (murmur2, as aiokafka and Java)."""
    from aiokafka.partitioner import murmur2
    return (murmur2(key.encode()) & 0x7FFFFFFF) % partitions


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--bootstrap", help="an existing broker (default: start a private one)")
    p.add_argument("--only", default="telemetry,ramp,scale")
    p.add_argument("--telemetry", type=int, default=30_000, help="telemetry backlog")
    p.add_argument("--window-s", type=float, default=60.0)
    p.add_argument("--sample-s", type=float, default=0.25,
                   help="telemetry run: seconds between samples of the input log's end")
    p.add_argument("--nodes", type=int, default=200)
    p.add_argument("--steps", default="10,25,50,100,200,400,800,1600")
    p.add_argument("--step-s", type=float, default=20.0)
    p.add_argument("--workers", default="1,2,4")
    p.add_argument("--scale-backlog", type=int, default=2000)
    p.add_argument("--out", default="bench/results/load.json")
    args = p.parse_args()
    work = Path(tempfile.mkdtemp(prefix="hetsched-load-bench-"))
    print("work folder:", work, flush=True)  # not saved: no machine paths in results
    results: dict[str, Any] = {"date": DATE, "cpus": os.cpu_count()}
    only = args.only.split(",")
    if "cpu" in only:
        results["cpu"] = bench_cpu(args.telemetry, args.nodes)
        print(json.dumps(results["cpu"]), flush=True)
        if only == ["cpu"]:
            save_results(Path(args.out), results)
            return

    async def go(bs: str) -> None:
        if "telemetry" in only:
            results["telemetry"] = await bench_telemetry(bs, work, args.telemetry, args.nodes,
                                                         args.window_s, args.sample_s)
            print(json.dumps(results["telemetry"]), flush=True)
        if "ramp" in only:
            results["ramp"] = await bench_ramp(bs, work, [float(s) for s in
                                                          args.steps.split(",")],
                                               args.step_s, args.nodes)
        if "client" in only:
            results["client"] = await bench_client(bs, args.telemetry)
            print(json.dumps(results["client"]), flush=True)
        if "scale" in only:
            results["scale"] = await bench_scale(bs, work, [int(w) for w in
                                                            args.workers.split(",")],
                                                 args.scale_backlog, args.nodes)

    with broker(args.bootstrap, work) as bs:
        asyncio.run(go(bs))
    save_results(Path(args.out), results)


if __name__ == "__main__":
    main()
