"""The telemetry agent: register the node, then publish only what the triggers pass.

Loop: every ``telemetry.interval_s`` read all GPUs from the source, feed the
readings to the :class:`~agents.triggers.TriggerEngine`, and publish what it
returns -- ``GpuTelemetry`` on threshold crossings and errors (the engine's
cache of the last reported state means only changes go out), ``GpuFailed``
once per failed GPU, ``NodeHeartbeat`` every ``triggers.heartbeat_s`` with the
executor's running tasks for reconciliation.

If publishing fails (broker away), the engine is told to resync, so the first
sample after recovery is a full snapshot rather than a delta against a report
the scheduler never received. A simulated node that suffers an injected
``node-loss`` goes silent, exactly like a crashed machine.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from collections.abc import Callable, Mapping

from agents.bus import Publisher, Topics
from agents.config import NodeSection
from agents.events import gpu_failed, gpu_telemetry, heartbeat
from agents.inventory import node_registered
from agents.telemetry.base import GpuReading, GpuSample, NodeInventory, TelemetrySource
from agents.triggers import Trigger, TriggerEngine, TriggerKind
from schemas.events import Event, NodeRegistered

log = logging.getLogger(__name__)

ForeignMemory = Callable[[Mapping[int, GpuSample]], Mapping[int, float | None]]


class NodeAgent:
    """Publishes one node's registration, telemetry and heartbeats."""

    def __init__(
        self,
        node: NodeSection,
        source: TelemetrySource,
        engine: TriggerEngine,
        publisher: Publisher,
        topics: Topics,
        *,
        interval_s: float = 1.0,
        running_tasks: Callable[[], list[str]] = list,
        clock: Callable[[], float] = time.monotonic,
        foreign_memory: ForeignMemory | None = None,
    ) -> None:
        self.node = node
        self.source = source
        self.engine = engine
        self.publisher = publisher
        self.topics = topics
        self.interval_s = interval_s
        self.running_tasks = running_tasks
        """Where heartbeats get the running task ids (the executor, when there is one)."""
        self.foreign_memory = foreign_memory
        """GPU index -> memory of processes no task owns (the executor, which knows its
        pids). Without it the agent cannot tell ours from theirs and reports none."""
        self._clock = clock
        self._seq = 0
        self.inventory: NodeInventory | None = None
        self._uuids: dict[int, str] = {}
        self.last_samples: dict[int, GpuSample] = {}
        self.published: dict[str, int] = {}
        self.source_name = f"agent/{node.node_id}"

    # -- what the executor may ask -------------------------------------------------

    def gpu_indices(self) -> set[int]:
        return set(self._uuids)

    def gpu_memory_mib(self) -> dict[int, int]:
        """GPU index -> memory (MiB), for the executor's policy checks."""
        inventory = self.discover()
        return {g.index: g.memory_mib for g in inventory.gpus}

    def failed_gpus(self) -> set[int]:
        return set(self.engine.failed_gpus())

    def gpu_usage(self, index: int) -> tuple[float, float] | None:
        """Latest whole-GPU (utilisation %, memory MiB) for the executor's TaskUsage."""
        sample = self.last_samples.get(index)
        return None if sample is None else (sample.util_pct, sample.mem_used_mib)

    def gpu_samples(self) -> dict[int, GpuSample]:
        """Latest sample per GPU, with its per-process figures, for attribution."""
        return dict(self.last_samples)

    def silenced(self) -> bool:
        """True once a simulated node has been 'lost' (it must stay silent)."""
        is_lost = getattr(self.source, "is_lost", None)
        return bool(is_lost is not None and is_lost(self._clock()))

    # -- loop ----------------------------------------------------------------------------

    def discover(self) -> NodeInventory:
        """Read the inventory once (the executor needs the GPU list before registering)."""
        if self.inventory is None:
            self.inventory = self.source.inventory()
            self._uuids = {g.index: g.uuid for g in self.inventory.gpus}
        return self.inventory

    async def register(self) -> NodeRegistered:
        event = node_registered(self.node, self.discover())
        for topic in (self.topics.nodes, self.topics.inventory):
            await self.publisher.publish(topic, event, source=self.source_name, cell=self.node.cell)
        self._count("NodeRegistered")
        log.info(
            "node registered",
            extra={"node_id": self.node.node_id, "gpus": len(event.gpus)},
        )
        return event

    async def step(self) -> list[Trigger]:
        """One sampling round: read, judge, publish. Returns the triggers published."""
        if self.silenced():
            return []
        now = self._clock()
        readings = self._with_foreign(self.source.sample(now))
        for reading in readings:
            if isinstance(reading, GpuSample):
                self.last_samples[reading.index] = reading
        triggers = self.engine.observe(now, readings)
        try:
            for trigger in triggers:
                await self._publish(trigger)
        except Exception:
            log.exception("publishing failed; will resend full state", extra=self._ids())
            self.engine.resync()
            raise
        return triggers

    def _with_foreign(self, readings: list[GpuReading]) -> list[GpuReading]:
        """Fill in each sample's foreign memory (accounting must never stop telemetry)."""
        if self.foreign_memory is None:
            return readings
        samples = {r.index: r for r in readings if isinstance(r, GpuSample)}
        try:
            foreign = self.foreign_memory(samples) if samples else {}
        except Exception:
            log.exception("attributing GPU memory to tasks failed", extra=self._ids())
            return readings
        return [
            dataclasses.replace(r, foreign_mem_mib=foreign.get(r.index))
            if isinstance(r, GpuSample)
            else r
            for r in readings
        ]

    async def run(self) -> None:
        """Register, then sample forever (until cancelled). Publishing errors are retried."""
        from schemas.backoff import Backoff, describe

        backoff = Backoff.from_env()
        while True:
            try:
                await self.register()
                break
            except Exception as exc:  # broker away (or slow): back off, one line per attempt
                delay = backoff.next()
                log.warning("registration failed (attempt %d: %s); retrying in %.1f s",
                            backoff.attempts, describe(exc), delay, extra=self._ids())
                await asyncio.sleep(delay)
        next_at = self._clock()
        while True:
            try:
                await self.step()
            except Exception:
                await asyncio.sleep(self.interval_s)
            next_at += self.interval_s
            await asyncio.sleep(max(0.0, next_at - self._clock()))
            if self._clock() - next_at > 10 * self.interval_s:
                next_at = self._clock()  # fell far behind (suspended?): do not burst

    async def _publish(self, trigger: Trigger) -> None:
        node_id = self.node.node_id
        event: Event
        if trigger.kind is TriggerKind.HEARTBEAT:
            event = heartbeat(node_id, self._seq, self.running_tasks())
            self._seq += 1
            await self.publisher.publish(
                self.topics.nodes, event, source=self.source_name, cell=self.node.cell
            )
        elif trigger.gpu_index is None or trigger.gpu_index not in self._uuids:
            return
        elif trigger.kind is TriggerKind.FAILED:
            event = gpu_failed(node_id, self._uuids[trigger.gpu_index], trigger)
            await self.publisher.publish(
                self.topics.nodes, event, source=self.source_name, cell=self.node.cell
            )
        else:
            event = gpu_telemetry(node_id, self._uuids[trigger.gpu_index], trigger)
            await self.publisher.publish(
                self.topics.telemetry, event, source=self.source_name, cell=self.node.cell
            )
        self._count(event.EVENT_TYPE)

    def _count(self, event_type: str) -> None:
        self.published[event_type] = self.published.get(event_type, 0) + 1

    def _ids(self) -> dict[str, str]:
        return {"node_id": self.node.node_id}
