"""The scheduler processor: a cell's input log in, its decisions out. Decode, step, encode.

Per input-log record: find the cell (restored from the partition's state
records when the partition was assigned), ``streams.adapter.apply`` it (pure)
and send the decisions to ``hetsched.decisions`` keyed by cell. Once per
transaction (``finish``) the records the batch changed go to the state topic,
each once however often the batch touched it. Decisions, record updates and the
input offsets commit in one transaction (:mod:`streams.processors.eos`), so a
worker killed at any point neither loses nor repeats a decision: the next owner
fences it, restores the cells from the committed records and resumes at the
committed offset.

A node's finish or failure report that the cell refuses (``not_placed_here``: the
task is not placed on that node) is answered with its ``TaskRejected`` decision and
also dead-lettered, in the same transaction, with where the task is placed, which the
decision (read by every node) does not say (``streams.adapter.refused_report``).

State keys (partition = the input-log partition of the cell):
``node/<cell>/<node>``, ``task/<cell>/<task>`` (``Cell.node_record`` /
``Cell.task_record``) and ``meta/<cell>`` (``Cell.meta_record``).
"""

from __future__ import annotations

import time
from typing import Any

import orjson

from schemas.codec import decode, encode
from schemas.deadletter import DeadLetter
from schemas.events import TaskRejected, TaskSubmitted, Tick
from schemas.signing import Signer
from streams.adapter import apply, refused_report
from streams.core.cell import Cell
from streams.core.objectives import WeightSchedule
from streams.core.queue import QueueConfig
from streams.core.scheduler import Scheduler
from streams.metrics import (
    ALLOCATION_RATIO,
    DECISIONS,
    INPUTS,
    PLACEMENT_LATENCY,
    QUEUE_LENGTH,
    CountsByType,
)
from streams.processors.context import Context
from streams.processors.eos_txn import Transaction
from streams.processors.ingest import valid_telemetry

_TELEMETRY_TAIL = b'"type":"GpuTelemetry","version":1}'
"""How a GpuTelemetry v1 record the router appended ends (its keys are sorted): only a
pre-filter for :func:`~streams.processors.ingest.valid_telemetry`, which decides."""

SUMMARY_MIN_INTERVAL_S = 0.2
"""Free-GPU counts change on every placement; publish them at most this often
(routing hints, not decisions). Node and model changes are published at once."""


class CellStore:
    """The worker's in-memory cells of its owned input-log partitions (an eos Handler)."""

    def __init__(self, ctx: Context, scheduler: Scheduler, summaries_topic: str,
                 objectives: WeightSchedule | None = None,
                 config: QueueConfig | None = None) -> None:
        # Executors with ``trusted_schedulers`` run only decisions that verify
        # (docs/security.md); without HETSCHED_SIGNING_KEY_FILE nothing is signed.
        ctx.signer = Signer.from_env()
        self.ctx = ctx
        self.scheduler = scheduler
        self.objectives = objectives  # HETSCHED_OBJECTIVES: weights by event hour and load
        self.config = config  # the queue's settings (HETSCHED_PREDICT_RUNTIMES); None: defaults
        self.summaries_topic = summaries_topic
        self.cells: dict[str, Cell] = {}
        self._partition_of: dict[str, int] = {}
        self._meta: dict[str, dict[str, Any]] = {}
        self._summary: dict[str, tuple[float, dict[str, Any]]] = {}
        self._touched: dict[int, dict[str, bool]] = {}
        """Per partition: cells the open transaction changed -> a Tick was among its inputs."""
        self._inputs = CountsByType(INPUTS)
        """Inputs by event type, counted at each ``finish``."""
        self._decided: dict[str, Any] = {}
        """``DECISIONS`` counter per decision type."""

    def get(self, name: str) -> Cell:
        """An owned cell (KeyError if this worker does not own it now)."""
        return self.cells[name]

    def restore(self, partition: int, state: dict[str, Any]) -> None:
        """Rebuild every cell of ``partition`` from its committed records."""
        nodes: dict[str, list[tuple[str, Any]]] = {}
        tasks: dict[str, list[tuple[str, Any]]] = {}
        metas: dict[str, Any] = {}
        for key, value in state.items():
            kind, _, rest = key.partition("/")
            if kind == "meta":
                metas[rest] = value
                continue
            cell, _, entity = rest.partition("/")
            (nodes if kind == "node" else tasks).setdefault(cell, []).append((entity, value))
        names = {c for c in self.ctx.settings.cell_names
                 if self.ctx.cell_partition(c) == partition}
        names |= set(nodes) | set(tasks) | set(metas)
        for name in sorted(names):
            self._add(name, partition, Cell.restore(name, self.scheduler, metas.get(name),
                                                    nodes.get(name, []), tasks.get(name, []),
                                                    config=self.config,
                                                    objectives=self.objectives))

    def _add(self, name: str, partition: int, cell: Cell) -> None:
        self.cells[name] = cell
        self._partition_of[name] = partition
        self._meta[name] = cell.meta_record()

    def drop(self, partition: int) -> None:
        for name in [n for n, p in self._partition_of.items() if p == partition]:
            del self.cells[name], self._partition_of[name]
            self._meta.pop(name, None)
            self._summary.pop(name, None)
        self._touched.pop(partition, None)

    async def process(self, msg: Any, txn: Transaction) -> None:
        ctx = self.ctx
        raw = msg.value or b""
        # Telemetry, most of the input log, as the router appends it (canonical JSON, keys
        # sorted: type and version last): the envelope this worker's router validated for
        # exactly these bytes, else the decode that returns the very envelope ``decode``
        # would; anything else, or anything that path refuses, goes to decode.
        value = None
        if raw.endswith(_TELEMETRY_TAIL):
            value = ctx.routed.take(raw)
            if value is None:
                value = valid_telemetry(raw)
        if value is None:  # a null value (tombstone) is dead-lettered as null
            value = decode(raw) if msg.value is not None else decode(None, topic=msg.topic)
        if isinstance(value, DeadLetter):
            await ctx.dead_letter(txn, msg, value)
            return
        name = value.cell or (msg.key or b"").decode()
        cell = self.cells.get(name)
        if cell is None:  # a cell outside cell_names (e.g. fewer cells configured now)
            cell = Cell.restore(name, self.scheduler, None, [], [], config=self.config,
                                objectives=self.objectives)
            self._add(name, msg.partition, cell)
        self._inputs.add(value.type)
        decisions = apply(cell, value)
        key = name.encode()
        for decision in decisions:
            out = encode(decision)
            headers = ctx.signer.headers(ctx.decisions, key, out) \
                if ctx.signer is not None else None
            await txn.send(ctx.decisions, key, out, headers=headers)
            refusal = refused_report(cell, decision, value)
            if refusal is not None:  # a node's report about a task not placed on it
                await ctx.dead_letter(txn, msg, refusal.dead_letter(
                    raw, topic=msg.topic, key=msg.key, event_type=value.type,
                    event_id=value.event_id))
            counter = self._decided.get(decision.type)
            if counter is None:
                counter = self._decided[decision.type] = DECISIONS.labels(decision.type)
            counter.inc()
        touched = self._touched.setdefault(msg.partition, {})
        touched[name] = touched.get(name, False) or isinstance(value.payload, Tick)
        if decisions and isinstance(value.payload, TaskSubmitted) and \
                decisions[0].type != TaskRejected.EVENT_TYPE:  # a duplicate is no placement
            PLACEMENT_LATENCY.observe(max(0.0, time.time() - value.occurred_at.timestamp()))

    async def reject(self, msg: Any, txn: Transaction, error: str) -> None:
        """Dead-letter a record whose processing kept failing (see ``eos.POISON_ATTEMPTS``)."""
        await self.ctx.reject(txn, msg, error)

    async def finish(self, partition: int, txn: Transaction) -> None:
        """Write what this transaction's records changed, once per record and cell."""
        self._inputs.flush()
        for name, ticked in sorted(self._touched.pop(partition, {}).items()):
            cell = self.cells.get(name)
            if cell is not None:
                await self._save(txn, cell, republish=ticked)

    async def _save(self, txn: Transaction, cell: Cell, republish: bool = False) -> None:
        """Write the records ``cell`` changed, in the batch's transaction.

        ``republish``: publish the summary even if no record changed (on ticks, so
        rate-limited free-GPU counts catch up when the cell goes quiet).
        """
        name = cell.name
        for node in sorted(cell.dirty_nodes):
            await txn.put(f"node/{name}/{node}", cell.node_record(node))
        for task in sorted(cell.dirty_tasks):
            await txn.put(f"task/{name}/{task}", cell.task_record(task))
        changed = bool(cell.dirty_nodes or cell.dirty_tasks)
        cell.dirty_nodes.clear()
        cell.dirty_tasks.clear()
        meta = cell.meta_record()
        if meta != self._meta.get(name):
            await txn.put(f"meta/{name}", meta)
            self._meta[name] = meta
        if changed or republish:
            await self._publish_summary(txn, cell)

    async def _publish_summary(self, txn: Transaction, cell: Cell) -> None:
        now = time.monotonic()
        last_at, last = self._summary.get(cell.name, (0.0, {}))
        if cell.state.n == last.get("nodes") and now - last_at < SUMMARY_MIN_INTERVAL_S:
            # ``Cell.summary`` walks every node (O(nodes) in Python); nodes are only
            # ever appended with a fixed model and GPU count, so with the same node
            # count nothing structural changed and the rate limit applies anyway.
            self._set_gauges(cell)
            return
        summary = cell.summary()
        structural = (summary["nodes"], list(summary["models"])) != (
            last.get("nodes"), list(last.get("models", {})))
        if summary != last and (structural or now - last_at >= SUMMARY_MIN_INTERVAL_S):
            await txn.send(self.summaries_topic, cell.name.encode(), orjson.dumps(summary))
            self._summary[cell.name] = (now, summary)
        self._set_gauges(cell)

    @staticmethod
    def _set_gauges(cell: Cell) -> None:
        QUEUE_LENGTH.labels(cell.name).set(len(cell.queue))
        total = cell.state.total_gpus
        ALLOCATION_RATIO.labels(cell.name).set(
            cell.state.allocated_gpu_milli / (total * 1000) if total else 0.0)
