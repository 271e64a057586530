"""Service benchmarks of issue 5 on the real path, timestamps at producer and consumer.

    .venv/bin/python bench/service.py [--bootstrap HOST:PORT] [--only latency,burst,recovery]
        [--out bench/results/service.json]

Path measured: an aiokafka producer -> ``hetsched.tasks`` -> router/sequencer
-> ``hetsched.input-log`` -> scheduler -> ``hetsched.decisions`` -> a
``read_committed`` consumer. Send time and arrival time are both taken with
``time.monotonic()`` in this process, so latency = arrival - send. Nodes are
registered by producing ``NodeRegistered`` events directly (no node processes),
and a placed task is finished by producing ``TaskFinished`` ``--hold-s`` after
its placement, so capacity recycles.

* latency: submit-to-decision p50/p99 at 200 submissions/s for 60 s (aim p99 < 50 ms);
  also ``acked``, submit to the broker's acknowledgement of the submission (the load
  generator's own share of the path)
* burst: a backlog produced while the worker is stopped, then the worker's
  steady decisions/s (aim >= 1,000/s)
* recovery: ``kill -9`` of the worker under load, restart at once; restart ->
  first new decision and kill -> first new decision (aim < 15 s)

``--trace`` (latency only): the worker writes per-transaction stage times
(``HETSCHED_EOS_TRACE``, :mod:`streams.processors.eos`) and the result gets a
``stages`` breakdown of submit -> decision per task: producer send, router
fetch / transaction / commit, scheduler fetch / transaction / commit, arrival
(wall clock ``time.time()`` in every process), p50/p99 per stage and the mean
of each stage over the slowest 1 %.

``--count-requests`` (latency only): the worker counts its Kafka requests by type
(``bench/hooks/sitecustomize.py``, put on its ``PYTHONPATH``) and the result gets
``kafka_requests_per_submission`` over the measured window.

``--split``: the worker runs as two processes of the same app id, one per processor
(``HETSCHED_PROCESSORS=router`` and ``=scheduler``); CPU per submission is then both
processes' together.

Without ``--bootstrap`` a private embedded broker is started on a free port.
Each run's topics (its own prefix) are deleted when it stops, unless
``HETSCHED_BENCH_KEEP_TOPICS`` is set. Workers run as real ``hetsched worker``
processes (``bench/chaos_cluster.py``).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import random
import sys
import tempfile
import time
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import orjson
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.structs import TopicPartition
from chaos_cluster import Broker, Cluster, Proc

from schemas.admin import delete_topics_with_prefix
from schemas.codec import encode
from schemas.consume import PRODUCER_DEFAULTS
from schemas.events import (
    GpuSpec,
    GpuTelemetry,
    NodeRegistered,
    TaskFinished,
    TaskSubmitted,
    make_event,
)
from schemas.kafka import aiokafka_kwargs
from schemas.topics import (
    BY_NAME,
    DECISIONS,
    INPUT_LOG,
    NODES,
    TASK_STATUS,
    TASKS,
    key_for,
)

SHARES = (250, 500, 1000)
DATE = "2026-11-29"


def pct(values: list[float], q: float) -> float | None:
    if not values:
        return None
    s = sorted(values)
    return s[min(len(s) - 1, int(q / 100 * len(s)))]


def ms(values: list[float]) -> dict[str, Any]:
    """p50/p90/p99/max in milliseconds."""
    return {k: (None if v is None else round(v * 1000, 1)) for k, v in (
        ("p50_ms", pct(values, 50)), ("p90_ms", pct(values, 90)),
        ("p99_ms", pct(values, 99)), ("max_ms", max(values) if values else None))} | {
        "n": len(values)}


def cpu_seconds(pid: int | None) -> float | None:
    """User + system CPU seconds of process ``pid`` so far (Linux ``/proc``), or None."""
    with contextlib.suppress(OSError, ValueError, IndexError, TypeError):
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return None


def load_note() -> str:
    with contextlib.suppress(OSError):
        return "loadavg " + " ".join(Path("/proc/loadavg").read_text().split()[:3])
    return ""


def node_event(node_id: str, cell: str | None, gpus: int = 8) -> Any:
    payload = NodeRegistered(
        node_id=node_id, cell=cell, cpu_milli=256000, memory_mib=1048576, pool="training",
        gpus=[GpuSpec(index=i, uuid=f"GPU-{node_id}-{i}", model="A100", memory_mib=81920,
                      fp32_tflops=19.5, fp16_tflops=312.0, mem_bandwidth_gbps=2039.0,
                      power_limit_w=400.0) for i in range(gpus)])
    return make_event(payload, source=f"agent/{node_id}", occurred_at=datetime.now(UTC))


def task_event(task_id: str, share: int) -> Any:
    payload = TaskSubmitted.model_validate({
        "task_id": task_id, "tenant": "team-a",
        "resources": {"gpu_count": 1, "gpu_share_milli": share, "cpu_milli": 1000,
                      "memory_mib": 2048},
        "executor": {"kind": "simulated", "simulated": {
            "duration_s": 1.0, "gpu_util_pct": 50.0, "gpu_mem_used_mib": 1024}}})
    return make_event(payload, source="cli/bench", occurred_at=datetime.now(UTC))


def telemetry_event(node_id: str, gpu: int, util: float) -> Any:
    payload = GpuTelemetry(node_id=node_id, gpu_index=gpu, gpu_uuid=f"GPU-{node_id}-{gpu}",
                           gpu_util_pct=util, mem_used_mib=1024, temperature_c=55.0,
                           power_w=150.0)
    return make_event(payload, source=f"agent/{node_id}", occurred_at=datetime.now(UTC))


@dataclass
class Workers:
    """The worker's processes: one ``hetsched worker``, or two with ``--split``."""

    procs: list[Proc]

    def start(self) -> None:
        for p in self.procs:
            p.start()

    def stop(self) -> None:
        for p in self.procs:
            p.stop()

    def kill(self) -> None:
        for p in self.procs:
            p.kill()

    def cpu_seconds(self) -> float | None:
        """User + system CPU seconds of all its processes so far."""
        each = [cpu_seconds(p.popen.pid if p.popen else None) for p in self.procs]
        return None if any(c is None for c in each) else sum(c for c in each if c is not None)


@dataclass
class Run:
    """One isolated deployment (topic prefix) on a broker, with its producer and tail."""

    bootstrap: str
    workdir: Path
    cells: int = 1
    session_s: float = 10.0
    hold_s: float = 2.0
    prefix: str = field(default_factory=lambda: f"b{uuid.uuid4().hex[:6]}.")
    cluster: Cluster = field(init=False)
    producer: AIOKafkaProducer | None = None
    sent_at: dict[str, float] = field(default_factory=dict)
    sent_wall: dict[str, float] = field(default_factory=dict)
    sent_pos: dict[str, str] = field(default_factory=dict)
    """Trace only: task -> ``topic:partition:offset`` of its TaskSubmitted."""
    recv_wall: dict[str, float] = field(default_factory=dict)
    acked_at: dict[str, float] = field(default_factory=dict)
    first_decision: dict[str, float] = field(default_factory=dict)
    placed_at: dict[str, float] = field(default_factory=dict)
    arrivals: list[float] = field(default_factory=list)
    kinds: dict[str, int] = field(default_factory=dict)
    finish: bool = True
    split: bool = False
    """Run the router and the scheduler as two processes (``--split``)."""
    _tasks: list[asyncio.Task[Any]] = field(default_factory=list)
    _seq: int = 0

    def __post_init__(self) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.cluster = Cluster(self.bootstrap, self.workdir, self.prefix, cells=self.cells,
                               session_s=self.session_s)

    # --- processes -------------------------------------------------------------------
    def add_worker(self) -> Workers:
        """One ``hetsched worker`` (``Cluster.add_worker``), or with :attr:`split` two
        processes of it, one per processor (``HETSCHED_PROCESSORS``);
        ``HETSCHED_BENCH_PROFILE=1`` runs them under cProfile."""
        roles = ["router", "scheduler"] if self.split else [None]
        c = self.cluster
        procs = []
        for role in roles:
            profile: list[str] = []
            if os.environ.get("HETSCHED_BENCH_PROFILE"):
                profile = ["-m", "cProfile", "-o", str(c.workdir / f"worker-{len(c.workers)}.prof")]
            procs.append(c.add_worker({"HETSCHED_PROCESSORS": role} if role else None, profile))
        return Workers(procs)

    def node_count(self) -> int:
        seen = 0
        for w in self.cluster.workers:
            with contextlib.suppress(OSError, ValueError, KeyError):
                with urllib.request.urlopen(f"http://127.0.0.1:{w.web_port}/state",
                                            timeout=5) as r:
                    state = orjson.loads(r.read())
                seen += sum(len(c["nodes"]) for c in state["cells"].values())
        return seen

    async def wait_nodes(self, count: int, timeout_s: float = 120.0) -> float:
        began = time.monotonic()
        while time.monotonic() - began < timeout_s:
            if await asyncio.to_thread(self.node_count) >= count:
                return time.monotonic() - began
            await asyncio.sleep(0.5)
        raise RuntimeError(f"nodes not registered in {timeout_s}s; see {self.workdir}")

    async def wait_healthy(self, timeout_s: float = 180.0) -> float:
        began = time.monotonic()
        await asyncio.to_thread(self.cluster.wait_healthy, timeout_s)
        return time.monotonic() - began

    # --- Kafka -------------------------------------------------------------------------
    async def start(self) -> None:
        self.producer = AIOKafkaProducer(bootstrap_servers=self.bootstrap, linger_ms=2,
                                         **PRODUCER_DEFAULTS, **aiokafka_kwargs())
        await self.producer.start()
        self._tasks.append(asyncio.create_task(self._tail()))

    async def stop(self) -> None:
        for t in self._tasks:
            t.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await t
        if self.producer is not None:
            with contextlib.suppress(Exception):
                await self.producer.stop()
        await asyncio.to_thread(self.cluster.stop)
        if not os.environ.get("HETSCHED_BENCH_KEEP_TOPICS"):
            # ~130 partitions a run: a shared broker would run out of file handles.
            with contextlib.suppress(Exception):
                await delete_topics_with_prefix(self.bootstrap, self.prefix)

    async def send(self, topic: str, env: Any) -> asyncio.Future[Any]:
        assert self.producer is not None
        return await self.producer.send(self.prefix + topic, encode(env),
                                        key=key_for(BY_NAME[topic], env))

    async def register_nodes(self, count: int, cells: int | None = None) -> list[str]:
        ids = [f"{self.prefix}n{i:05d}" for i in range(count)]
        futs = [await self.send(NODES, node_event(
            n, None if cells is None else f"cell-{i % cells}")) for i, n in enumerate(ids)]
        await asyncio.gather(*futs)
        return ids

    def next_task(self) -> Any:
        tid = f"{self.prefix}t{self._seq:07d}"
        env = task_event(tid, SHARES[self._seq % len(SHARES)])
        self._seq += 1
        return tid, env

    async def submit(self) -> asyncio.Future[Any]:
        tid, env = self.next_task()
        self.sent_at[tid] = time.monotonic()
        self.sent_wall[tid] = time.time()
        fut = await self.send(TASKS, env)
        fut.add_done_callback(lambda f: self._sent(tid, f))
        return fut

    def _sent(self, tid: str, fut: asyncio.Future[Any]) -> None:
        self.acked_at[tid] = time.monotonic()
        if not fut.cancelled() and fut.exception() is None:
            md = fut.result()
            self.sent_pos[tid] = f"{md.topic}:{md.partition}:{md.offset}"

    async def paced(self, rate: float, seconds: float) -> tuple[int, float]:
        """Submit at ``rate``/s for ``seconds`` (no catch-up bursts); (sent, achieved rate)."""
        period = 1.0 / rate
        began = next_at = time.monotonic()
        sent = 0
        futs: list[asyncio.Future[Any]] = []
        while time.monotonic() - began < seconds:
            futs.append(await self.submit())
            sent += 1
            next_at += period
            delay = next_at - time.monotonic()
            if delay > 0:
                await asyncio.sleep(delay)
            elif sent % 50 == 0:
                await asyncio.sleep(0)
            if len(futs) > 2000:
                await asyncio.gather(*futs)
                futs.clear()
        await asyncio.gather(*futs)
        return sent, sent / (time.monotonic() - began)

    async def _finish_later(self, tid: str, node: str, decision_id: str, cell: str) -> None:
        await asyncio.sleep(self.hold_s)
        payload = TaskFinished(task_id=tid, node_id=node, decision_id=decision_id,
                               runtime_s=self.hold_s)
        env = make_event(payload, source=f"executor/{node}", occurred_at=datetime.now(UTC),
                         cell=cell)
        with contextlib.suppress(Exception):
            await self.send(TASK_STATUS, env)

    async def _tail(self) -> None:
        consumer = AIOKafkaConsumer(self.prefix + DECISIONS, bootstrap_servers=self.bootstrap,
                                    group_id=None, isolation_level="read_committed",
                                    auto_offset_reset="earliest", enable_auto_commit=False,
                                    **aiokafka_kwargs())
        await consumer.start()
        try:
            while True:
                batches = await consumer.getmany(timeout_ms=100, max_records=5000)
                now, wall = time.monotonic(), time.time()
                for batch in batches.values():
                    for m in batch:
                        d = orjson.loads(m.value)
                        kind, p = d.get("type", "?"), d.get("payload", {})
                        self.kinds[kind] = self.kinds.get(kind, 0) + 1
                        self.arrivals.append(now)
                        tid = p.get("task_id")
                        if tid is None:
                            continue
                        self.first_decision.setdefault(tid, now)
                        self.recv_wall.setdefault(tid, wall)
                        if kind == "TaskPlaced" and tid not in self.placed_at:
                            self.placed_at[tid] = now
                            if self.finish:
                                self._tasks.append(asyncio.create_task(self._finish_later(
                                    tid, p["node_id"], p["decision_id"], d.get("cell") or "")))
                if len(self._tasks) > 5000:
                    self._tasks = [t for t in self._tasks if not t.done()]
        finally:
            with contextlib.suppress(Exception):
                await consumer.stop()

    def latencies(self, tids: Iterator[str] | list[str]) -> dict[str, Any]:
        first, placed, missing = [], [], 0
        for tid in tids:
            s = self.sent_at[tid]
            if tid in self.first_decision:
                first.append(self.first_decision[tid] - s)
            else:
                missing += 1
            if tid in self.placed_at:
                placed.append(self.placed_at[tid] - s)
        acked = [self.acked_at[t] - self.sent_at[t] for t in self.sent_at if t in self.acked_at]
        return {"first_decision": ms(first), "placed": ms(placed), "no_decision": missing,
                "acked": ms(acked)}

    async def drain(self, tids: list[str], timeout_s: float) -> bool:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if all(t in self.first_decision for t in tids):
                return True
            await asyncio.sleep(0.2)
        return False

    def rate_between(self, lo: float, hi: float) -> float | None:
        """Steady decisions/s: arrivals between the lo and hi fractions of all arrivals."""
        a = sorted(self.arrivals)
        if len(a) < 20:
            return None
        i, j = int(lo * len(a)), int(hi * len(a)) - 1
        return (j - i) / (a[j] - a[i]) if a[j] > a[i] else None

    async def input_log_end(self) -> int:
        """Sum of the input log's committed end offsets (LSO), all partitions."""
        c = AIOKafkaConsumer(bootstrap_servers=self.bootstrap, group_id=None,
                             isolation_level="read_committed", **aiokafka_kwargs())
        await c.start()
        try:
            topic = self.prefix + INPUT_LOG
            parts = c.partitions_for_topic(topic) or set()
            if not parts:
                await c._client.force_metadata_update()
                parts = c.partitions_for_topic(topic) or set()
            ends = await c.end_offsets([TopicPartition(topic, p) for p in parts])
            return sum(ends.values())
        finally:
            await c.stop()


async def produce_backlog(run: Run, count: int) -> tuple[list[str], float]:
    began = time.monotonic()
    tids, futs = [], []
    for _ in range(count):
        tid, env = run.next_task()
        tids.append(tid)
        futs.append(await run.send(TASKS, env))
        if len(futs) >= 2000:
            await asyncio.gather(*futs)
            futs.clear()
    await asyncio.gather(*futs)
    return tids, count / (time.monotonic() - began)


# --- (a) latency ------------------------------------------------------------------------
STAGES = (
    # (name, from, to): per task, "to" minus "from"; r. = router, s. = scheduler transaction
    ("to router: round in progress", "send", "r.poll"),
    ("to router: fetch", "r.poll|send", "r.fetch"),
    ("router: before its txn", "r.fetch", "r.begin"),
    ("router txn: process", "r.begin", "r.processed"),
    ("router txn: the round before commits", "r.processed", "r.appending"),
    ("router txn: appends", "r.appending", "r.flushed"),
    ("router txn: EndTxn", "r.flushed", "r.end"),
    ("to scheduler: round in progress", "r.end", "s.poll"),
    ("to scheduler: fetch", "s.poll|r.end", "s.fetch"),
    ("scheduler: before its txn", "s.fetch", "s.begin"),
    ("scheduler txn: process", "s.begin", "s.processed"),
    ("scheduler txn: the round before commits", "s.processed", "s.appending"),
    ("scheduler txn: appends", "s.appending", "s.flushed"),
    ("scheduler txn: EndTxn", "s.flushed", "s.end"),
    ("to bench consumer", "s.end", "recv"),
)


def read_traces(folder: Path) -> dict[str, dict[str, dict[str, float]]]:
    """processor name -> consumed record (``topic:partition:offset``) -> its txn's stages."""
    out: dict[str, dict[str, dict[str, float]]] = {}
    for path in folder.glob("*.jsonl"):
        if path.name.startswith("gc-"):
            continue
        by_rec = out.setdefault(path.name.rsplit("-", 1)[0], {})
        for line in path.read_bytes().splitlines():
            with contextlib.suppress(orjson.JSONDecodeError):
                row = orjson.loads(line)
                stages = {k: v for k, v in row.items() if k not in ("p", "recs")}
                for rec in row["recs"]:
                    by_rec[rec] = stages
    return out


async def input_log_positions(run: Run) -> dict[str, str]:
    """task -> ``topic:partition:offset`` of its TaskSubmitted in the input log (committed)."""
    c = AIOKafkaConsumer(bootstrap_servers=run.bootstrap, group_id=None,
                         isolation_level="read_committed", auto_offset_reset="earliest",
                         enable_auto_commit=False, **aiokafka_kwargs())
    await c.start()
    found: dict[str, str] = {}
    try:
        topic = run.prefix + INPUT_LOG
        if not c.partitions_for_topic(topic):
            await c._client.force_metadata_update()
        tps = [TopicPartition(topic, p) for p in sorted(c.partitions_for_topic(topic) or ())]
        c.assign(tps)
        ends = await c.end_offsets(tps)
        await c.seek_to_beginning(*tps)
        todo = {tp for tp in tps if ends[tp] > 0}
        while todo:
            for batch in (await c.getmany(*todo, timeout_ms=500)).values():
                for m in batch:
                    d = orjson.loads(m.value)
                    if d.get("type") == "TaskSubmitted":
                        found[d["payload"]["task_id"]] = f"{m.topic}:{m.partition}:{m.offset}"
            for tp in list(todo):
                if await c.position(tp) >= ends[tp]:
                    todo.discard(tp)
    finally:
        await c.stop()
    return found


def _one_per_round(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The rows with a ``cpu_ms``, the first of each round only: a round writes one line
    per partition it read, all with the round's ``end``."""
    seen: set[float] = set()
    out = []
    for r in rows:
        if "cpu_ms" in r and r["end"] not in seen:
            seen.add(r["end"])
            out.append(r)
    return out


def round_summary(folder: Path, window: tuple[float, float]) -> dict[str, Any]:
    """Per processor, over the rounds that ended in the measured window: how many, their
    records and their own CPU (``cpu_ms``: processing only, without the loop's other
    work), p50 / p99 / max; and the worker's garbage collections of 2 ms or more."""
    def spread(values: list[float]) -> dict[str, float | None]:
        return {"p50": pct(values, 50), "p99": pct(values, 99),
                "max": max(values) if values else None}

    by_name: dict[str, list[dict[str, Any]]] = {}
    for path in folder.glob("*.jsonl"):  # per processor and process (``--split``: two)
        rows = []
        for line in path.read_bytes().splitlines():
            with contextlib.suppress(orjson.JSONDecodeError):
                rows.append(orjson.loads(line))
        rows = [r for r in rows if window[0] <= r.get("end", 0) <= window[1]]
        if not path.name.startswith("gc-"):
            rows = _one_per_round(rows)
        by_name.setdefault(path.name.rsplit("-", 1)[0], []).extend(rows)
    out: dict[str, Any] = {}
    for name, rows in sorted(by_name.items()):
        if name == "gc":
            out["gc_pauses"] = {"count": len(rows), "ms": spread([r["ms"] for r in rows]),
                                "gen2": sum(1 for r in rows if r.get("gen") == 2)}
            continue
        out[name] = {
            "rounds": len(rows),
            "records": spread([r["records"] for r in rows]),
            "cpu_ms": spread([r["cpu_ms"] for r in rows]),
            "round_ms": spread([round(1000 * (r["end"] - r["begin"]), 1) for r in rows])}
    return out


def stage_breakdown(run: Run, tids: list[str], traces: dict[str, dict[str, dict[str, float]]],
                    logged: dict[str, str]) -> dict[str, Any]:
    """Per stage p50/p99 (ms) and its mean over the tasks of the slowest 1 % end to end."""
    router, scheduler = traces.get("router", {}), traces.get("scheduler", {})
    rows: list[dict[str, float]] = []
    for tid in tids:
        r = router.get(run.sent_pos.get(tid, ""))
        s = scheduler.get(logged.get(tid, ""))
        if r is None or s is None or tid not in run.recv_wall:
            continue
        row = {"send": run.sent_wall[tid], "recv": run.recv_wall[tid]}
        row |= {f"r.{k}": v for k, v in r.items()} | {f"s.{k}": v for k, v in s.items()}
        rows.append(row)

    def span(row: dict[str, float], a: str, b: str) -> float:
        start = max(row[x] for x in a.split("|"))
        return max(0.0, row[b] - start)

    total = sorted(rows, key=lambda row: row["recv"] - row["send"])
    slow = total[int(len(total) * 0.99):] or total[-1:]
    out: dict[str, Any] = {"tasks_traced": len(rows),
                           "total": ms([row["recv"] - row["send"] for row in rows])}
    for name, a, b in STAGES:
        values = [span(row, a, b) for row in rows]
        out[name] = {"p50_ms": ms(values)["p50_ms"], "p99_ms": ms(values)["p99_ms"],
                     "slowest_1pct_mean_ms": round(
                         1000 * sum(span(row, a, b) for row in slow) / max(1, len(slow)), 1)}
    return out


def requests_per_submission(folder: Path, window: tuple[float, float],
                            sent: int) -> dict[str, float]:
    """Kafka requests of the worker per submission in the measured window, by type
    (``bench/hooks/sitecustomize.py``: counters sampled every half second)."""
    counts: dict[str, float] = {}
    for path in folder.glob("requests-*.jsonl"):  # one file per worker process
        rows = [orjson.loads(line) for line in path.read_bytes().splitlines() if line.strip()]
        if not rows:
            continue
        a = min(rows, key=lambda r: abs(r["t"] - window[0]))
        b = min(rows, key=lambda r: abs(r["t"] - window[1]))
        for k in (set(a) | set(b)) - {"t", "cpu"}:
            counts[k] = counts.get(k, 0) + b.get(k, 0) - a.get(k, 0)
    if not counts or not sent:
        return {}
    per = {k: round(n / sent, 3) for k, n in sorted(counts.items())}
    per = {k: v for k, v in sorted(per.items(), key=lambda kv: -kv[1]) if v}
    return {"total": round(sum(per.values()), 3), **per}


async def bench_latency(bootstrap: str, work: Path, rate: float, seconds: float,
                        nodes: int, trace: bool = False,
                        count_requests: bool = False, split: bool = False) -> dict[str, Any]:
    run = Run(bootstrap, work / "latency", hold_s=2.0, split=split)
    trace_dir = work / "latency" / "trace"
    requests_dir = work / "latency" / "requests"
    saved_path = os.environ.get("PYTHONPATH")
    try:
        if trace:
            os.environ["HETSCHED_EOS_TRACE"] = str(trace_dir)
        if count_requests:
            requests_dir.mkdir(parents=True, exist_ok=True)
            os.environ["HETSCHED_BENCH_REQUESTS"] = str(requests_dir)
            hooks = str(Path(__file__).resolve().parent / "hooks")
            os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (hooks, saved_path) if p)
        worker = run.add_worker()
        os.environ.pop("HETSCHED_EOS_TRACE", None)
        os.environ.pop("HETSCHED_BENCH_REQUESTS", None)
        if saved_path is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = saved_path
        await run.start()
        startup = await run.wait_healthy()
        await run.register_nodes(nodes, cells=1)
        await run.wait_nodes(nodes)
        # warm-up: 5 s at the rate, not counted
        await run.paced(rate, 5.0)
        warm = set(run.sent_at)
        await asyncio.sleep(2.0)
        cpu0, wall0 = worker.cpu_seconds(), time.time()
        sent, achieved = await run.paced(rate, seconds)
        cpu1, wall1 = worker.cpu_seconds(), time.time()
        tids = [t for t in run.sent_at if t not in warm]
        await run.drain(tids, 20.0)
        cpu = None if cpu0 is None or cpu1 is None else cpu1 - cpu0
        out = {"split": split, "rate_target": rate, "rate_achieved": round(achieved, 1),
               "seconds": seconds,
               "sent": sent, "nodes": nodes, "gpus": nodes * 8, "hold_s": run.hold_s,
               "worker_startup_s": round(startup, 1), **run.latencies(tids),
               "worker_cpu_ms_per_submission": None if cpu is None else round(
                   1000 * cpu / max(1, sent), 2),
               "worker_cpu_share": None if cpu is None else round(cpu / seconds, 2),
               "window_wall": [round(wall0, 3), round(wall1, 3)],
               "decision_kinds": dict(run.kinds), "load": load_note()}
        if count_requests:
            await asyncio.sleep(1.0)  # the sample after the window
            out["kafka_requests_per_submission"] = requests_per_submission(
                requests_dir, (wall0, wall1), sent)
        if trace:
            out["stages"] = stage_breakdown(run, tids, read_traces(trace_dir),
                                            await input_log_positions(run))
            out["rounds"] = round_summary(trace_dir, (wall0, wall1))
        return out
    finally:
        await run.stop()


# --- (b) burst ----------------------------------------------------------------------------
async def bench_burst(bootstrap: str, work: Path, backlog: int, nodes: int,
                      split: bool = False) -> dict[str, Any]:
    run = Run(bootstrap, work / "burst", split=split)
    run.finish = False  # a cluster big enough for the whole backlog: no recycling
    try:
        worker = run.add_worker()
        await run.start()
        await run.wait_healthy()
        await run.register_nodes(nodes, cells=1)
        await run.wait_nodes(nodes)
        await asyncio.to_thread(worker.stop)  # backlog while stopped: the producer and the
        tids, produce_rate = await produce_backlog(run, backlog)  # worker never share a CPU
        base = len(run.arrivals)
        t_start = time.monotonic()
        worker.start()
        await run.drain(tids, 240.0)
        arr = sorted(run.arrivals[base:])
        got = sum(1 for t in tids if t in run.first_decision)
        first = arr[0] - t_start if arr else None
        # steady: between 10 % and 90 % of this run's decisions
        steady = None
        if len(arr) > 20:
            i, j = len(arr) // 10, len(arr) * 9 // 10 - 1
            steady = (j - i) / (arr[j] - arr[i])
        return {"split": split, "backlog": backlog, "nodes": nodes, "gpus": nodes * 8,
                "producer_rate": round(produce_rate), "decided": got,
                "restart_to_first_decision_s": None if first is None else round(first, 1),
                "steady_decisions_per_s": None if steady is None else round(steady),
                "whole_backlog_s": round(arr[-1] - arr[0], 1) if arr else None,
                "decision_kinds": dict(run.kinds), "load": load_note()}
    finally:
        await run.stop()


# --- (c) recovery -------------------------------------------------------------------------
async def bench_recovery(bootstrap: str, work: Path, kills: int, rate: float,
                         nodes: int, split: bool = False) -> dict[str, Any]:
    run = Run(bootstrap, work / "recovery", hold_s=2.0, split=split)
    out: list[dict[str, Any]] = []
    try:
        worker = run.add_worker()
        await run.start()
        await run.wait_healthy()
        await run.register_nodes(nodes, cells=1)
        await run.wait_nodes(nodes)
        load = asyncio.create_task(run.paced(rate, 10_000))
        await asyncio.sleep(10.0)
        for _ in range(kills):
            t_kill = time.monotonic()
            await asyncio.to_thread(worker.kill)
            t_restart = time.monotonic()
            worker.start()
            deadline = t_restart + 120
            while time.monotonic() < deadline:
                if run.arrivals and run.arrivals[-1] > t_restart:
                    break
                await asyncio.sleep(0.05)
            first = next((a for a in run.arrivals if a > t_restart), None)
            await asyncio.sleep(8.0)
            tids = [t for t, s in run.sent_at.items() if s > t_kill]
            backlog = [t for t, s in run.sent_at.items() if t_kill < s <= t_restart + 30]
            out.append({
                "kill_to_restart_s": round(t_restart - t_kill, 2),
                "restart_to_first_decision_s": None if first is None else round(
                    first - t_restart, 2),
                "kill_to_first_decision_s": None if first is None else round(first - t_kill, 2),
                "submitted_after_kill": len(tids),
                "decided_after_8s": sum(1 for t in backlog if t in run.first_decision)})
            await asyncio.sleep(5.0)
        load.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await load
        return {"split": split, "kills": out, "rate": rate, "nodes": nodes,
                "session_s": run.session_s, "load": load_note()}
    finally:
        await run.stop()


@contextlib.contextmanager
def broker(bootstrap: str | None, work: Path) -> Iterator[str]:
    if bootstrap:
        yield bootstrap
        return
    b = Broker(work / "kafka")
    b.start()
    try:
        yield b.bootstrap
    finally:
        b.stop()


def save_results(out: Path, results: dict) -> None:
    """Merge ``results`` into the JSON file ``out``, keeping earlier runs' other keys."""
    out.parent.mkdir(parents=True, exist_ok=True)
    prior = json.loads(out.read_text()) if out.exists() else {}
    prior.update(results)
    out.write_text(json.dumps(prior, indent=1) + "\n")
    print("wrote", out)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--bootstrap", help="an existing broker (default: start a private one)")
    p.add_argument("--only", default="latency,burst,recovery")
    p.add_argument("--rate", type=float, default=200.0)
    p.add_argument("--seconds", type=float, default=60.0)
    p.add_argument("--nodes", type=int, default=200)
    p.add_argument("--backlog", type=int, default=10_000)
    p.add_argument("--burst-nodes", type=int, default=400)
    p.add_argument("--kills", type=int, default=2)
    p.add_argument("--trace", action="store_true",
                   help="latency: per-stage breakdown from the worker's transaction trace")
    p.add_argument("--count-requests", action="store_true",
                   help="latency: the worker's Kafka requests per submission, by type "
                        "(bench/hooks/sitecustomize.py)")
    p.add_argument("--split", action="store_true",
                   help="run the worker as two processes, the router and the scheduler "
                        "(HETSCHED_PROCESSORS)")
    p.add_argument("--out", default="bench/results/service.json")
    args = p.parse_args()
    random.seed(0)
    work = Path(tempfile.mkdtemp(prefix="hetsched-service-bench-"))
    print("work folder:", work, flush=True)  # not saved: no machine paths in results
    results: dict[str, Any] = {"date": DATE, "cpus": os.cpu_count()}
    only = args.only.split(",")

    async def go(bs: str) -> None:
        if "latency" in only:
            results["latency"] = await bench_latency(bs, work, args.rate, args.seconds,
                                                     args.nodes, trace=args.trace,
                                                     count_requests=args.count_requests,
                                                     split=args.split)
            print(json.dumps(results["latency"], indent=1), flush=True)
        if "burst" in only:
            results["burst"] = await bench_burst(bs, work, args.backlog, args.burst_nodes,
                                                 split=args.split)
            print(json.dumps(results["burst"]), flush=True)
        if "recovery" in only:
            results["recovery"] = await bench_recovery(bs, work, args.kills, 50.0, args.nodes,
                                                       split=args.split)
            print(json.dumps(results["recovery"]), flush=True)

    with broker(args.bootstrap, work) as bs:
        asyncio.run(go(bs))
    save_results(Path(args.out), results)


if __name__ == "__main__":
    main()
