"""The scheduler processor: a cell's input log in, its decisions out. Decode, step, encode.

Per input-log event: look up the cell (rebuilt from its table records on the
first event after start or rebalance), ``streams.adapter.apply`` it (pure),
send the decisions to ``hetsched.decisions`` keyed by cell, and save the
records the step changed. Decisions, record updates and the input offset
commit in one transaction (:mod:`streams.processors.txn`), so a worker killed
at any point neither loses nor repeats a decision: the next owner restores the
cell from the committed records and resumes after the committed offset.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import Any

import faust
import orjson

from schemas.codec import encode
from schemas.deadletter import DeadLetter
from schemas.events import TaskSubmitted, Tick
from schemas.signing import Signer
from streams.adapter import apply
from streams.core.cell import Cell
from streams.core.scheduler import Scheduler
from streams.metrics import (
    ALLOCATION_RATIO,
    DECISIONS,
    INPUTS,
    PLACEMENT_LATENCY,
    QUEUE_LENGTH,
)
from streams.processors.context import Context

SUMMARY_MIN_INTERVAL_S = 0.2
"""Free-GPU counts change on every placement; publish them at most this often
(routing hints, not decisions). Node and model changes are published at once."""


class CellStore:
    """The worker's in-memory cells, restored from and saved to the tables."""

    def __init__(self, ctx: Context, scheduler: Scheduler) -> None:
        self.ctx = ctx
        self.scheduler = scheduler
        self.cells: dict[str, Cell] = {}
        self._meta: dict[str, dict[str, Any]] = {}
        self._summary: dict[str, tuple[float, dict[str, Any]]] = {}
        self.offsets: dict[str, int] = {}
        """Per cell: the last input-log offset whose effects are committed (dedupe)."""

    def forget(self) -> None:
        """Drop every cell (on rebalance): the next event restores from the tables."""
        self.cells.clear()
        self._meta.clear()
        self._summary.clear()
        self.offsets.clear()

    def get(self, name: str) -> Cell:
        cell = self.cells.get(name)
        if cell is None:
            cell = self._restore(name)
            self.cells[name] = cell
        return cell

    def _restore(self, name: str) -> Cell:
        t = self.ctx.tables
        prefix = f"{name}/"
        nodes = [(k[len(prefix):], v) for k, v in t.cellnode_to_record.items()
                 if k.startswith(prefix)]
        tasks = [(k[len(prefix):], v) for k, v in t.celltask_to_record.items()
                 if k.startswith(prefix)]
        meta = t.cell_to_meta.get(name)
        cell = Cell.restore(name, self.scheduler, meta, nodes, tasks)
        self.offsets[name] = int((meta or {}).get("offset", -1))
        self._meta[name] = {**cell.meta_record(), "offset": self.offsets[name]}
        return cell

    async def save(self, event: faust.types.EventT, cell: Cell, republish: bool = False) -> None:
        """Write the records ``cell`` changed, in ``event``'s transaction.

        ``republish``: publish the summary even if no record changed (on ticks, so
        rate-limited free-GPU counts catch up when the cell goes quiet).
        """
        t, put, name = self.ctx.tables, self.ctx.sender.put, cell.name
        for node in sorted(cell.dirty_nodes):
            await put(event, t.cellnode_to_record, f"{name}/{node}", cell.node_record(node))
        for task in sorted(cell.dirty_tasks):
            await put(event, t.celltask_to_record, f"{name}/{task}", cell.task_record(task))
        changed = bool(cell.dirty_nodes or cell.dirty_tasks)
        cell.dirty_nodes.clear()
        cell.dirty_tasks.clear()
        self.offsets[name] = event.message.offset
        meta = {**cell.meta_record(), "offset": event.message.offset}
        if meta != self._meta.get(name):
            await put(event, t.cell_to_meta, name, meta)
            self._meta[name] = meta
        if changed or republish:
            await self._publish_summary(event, cell)

    async def _publish_summary(self, event: faust.types.EventT, cell: Cell) -> None:
        summary = cell.summary()
        now = time.monotonic()
        last_at, last = self._summary.get(cell.name, (0.0, {}))
        structural = (summary["nodes"], list(summary["models"])) != (
            last.get("nodes"), list(last.get("models", {})))
        if summary != last and (structural or now - last_at >= SUMMARY_MIN_INTERVAL_S):
            await self.ctx.sender.send(event, self.ctx.tables.cell_to_summary.topic,
                                       cell.name.encode(), orjson.dumps(summary))
            self._summary[cell.name] = (now, summary)
        QUEUE_LENGTH.labels(cell.name).set(len(cell.queue))
        total = cell.state.total_gpus
        ALLOCATION_RATIO.labels(cell.name).set(
            cell.state.allocated_gpu_milli / (total * 1000) if total else 0.0)


def make_scheduler(ctx: Context,
                   store: CellStore) -> Callable[[faust.StreamT[Any]], Awaitable[None]]:
    # Executors with ``trusted_schedulers`` run only decisions that verify
    # (docs/security.md); without HETSCHED_SIGNING_KEY_FILE nothing is signed.
    ctx.signer = Signer.from_env()

    async def schedule_cells(stream: faust.StreamT[Any]) -> None:
        async for event in stream.events():
            await schedule_one(ctx, store, event)

    return schedule_cells


async def schedule_one(ctx: Context, store: CellStore, event: faust.types.EventT) -> None:
    value = event.value
    if isinstance(value, DeadLetter):
        async with ctx.sender.atomic(event):
            await ctx.dead_letter(event, value)
        return
    name = value.cell or (event.message.key or b"").decode()
    cell = store.get(name)
    if event.message.offset <= store.offsets[name]:
        return  # re-delivered after a failover: its effects are already committed
    INPUTS.labels(value.type).inc()
    decisions = apply(cell, value)
    async with ctx.sender.atomic(event):
        key = name.encode()
        for decision in decisions:
            raw = encode(decision)
            headers = ctx.signer.headers(ctx.decisions, key, raw) \
                if ctx.signer is not None else None
            await ctx.sender.send(event, ctx.decisions, key, raw, headers=headers)
            DECISIONS.labels(decision.type).inc()
        await store.save(event, cell, republish=isinstance(value.payload, Tick))
    if decisions and isinstance(value.payload, TaskSubmitted):
        PLACEMENT_LATENCY.observe(max(0.0, time.time() - value.occurred_at.timestamp()))
