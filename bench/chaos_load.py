"""The steady load of a chaos run, and the clock it measures recovery with.

``Load`` submits simulated tasks and GPU telemetry at fixed rates with an
idempotent producer that survives broker restarts (a failed send is retried
with backoff on a fresh producer; the tasks topic, not this process, is the
record of what was submitted). ``DecisionClock`` tails the decisions topic
(read_committed) and remembers when each decision arrived, so a fault's
recovery time is "restart -> next decision". ``malformed`` is the bad-input
fault: records every consumer must dead-letter without stopping.
"""

from __future__ import annotations

import asyncio
import bisect
import contextlib
import random
import time
from datetime import UTC, datetime
from typing import Any

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

from schemas.codec import encode
from schemas.consume import PRODUCER_DEFAULTS
from schemas.events import GpuTelemetry, TaskSubmitted, make_event
from schemas.kafka import aiokafka_kwargs
from schemas.topics import BY_NAME, DECISIONS, NODES, TASKS, TELEMETRY, key_for

SEND_TIMEOUT_S = 10.0
BACKOFF_S = (0.5, 1.0, 2.0, 4.0)
SHAPES = ((1, 250), (1, 500), (1, 1000), (2, 1000))

MALFORMED: tuple[bytes, ...] = (
    b"not json at all",
    b"[1, 2, 3]",
    b'{"type": "TaskSubmitted"}',
    b'{"event_id": "01JN8S818G4FGGJ0Z50KYR7FXT", "type": "TaskSubmitted", "version": 9,'
    b' "source": "x", "occurred_at": "2026-01-01T00:00:00Z", "payload": {}}',
    b'{"event_id": "01JN8S818G4FGGJ0Z50KYR7FXT", "type": "TaskSubmitted", "version": 1,'
    b' "source": "x", "occurred_at": "2026-01-01T00:00:00Z", "payload": {"task_id": 7}}',
    b'{"event_id": "01JN8S818G4FGGJ0Z50KYR7FXT", "type": "NodeHeartbeat", "version": 1,'
    b' "source": "x", "occurred_at": "2026-01-01T00:00:00", "payload": {"node_id": "n",'
    b' "seq": -1}}',
    b"\xff\xfe\x00 binary",
    b"",
)


def task_event(task_id: str, rng: random.Random, duration_s: tuple[float, float]) -> Any:
    gpus, share = SHAPES[rng.randrange(len(SHAPES))]
    payload = TaskSubmitted.model_validate({
        "task_id": task_id, "tenant": f"team-{rng.randrange(3)}",
        "resources": {"gpu_count": gpus, "gpu_share_milli": share, "cpu_milli": 1000,
                      "memory_mib": 2048},
        "executor": {"kind": "simulated", "simulated": {
            "duration_s": round(rng.uniform(*duration_s), 2), "gpu_util_pct": 60.0,
            "gpu_mem_used_mib": 1024}},
    })
    return make_event(payload, source="cli/chaos", occurred_at=datetime.now(UTC))


def telemetry_event(node_id: str, gpu: int, rng: random.Random) -> Any:
    payload = GpuTelemetry(node_id=node_id, gpu_index=gpu, gpu_uuid=f"GPU-{node_id}-{gpu}",
                           gpu_util_pct=round(rng.uniform(0, 100), 1), mem_used_mib=1024,
                           temperature_c=55.0, power_w=150.0)
    return make_event(payload, source=f"agent/{node_id}", occurred_at=datetime.now(UTC))


class Load:
    """Submissions and telemetry at fixed rates until ``stop()``."""

    def __init__(self, bootstrap: str, prefix: str, nodes: list[str], *, seed: int,
                 tasks_per_s: float, telemetry_per_s: float,
                 duration_s: tuple[float, float] = (1.0, 4.0)) -> None:
        self.bootstrap, self.prefix, self.nodes = bootstrap, prefix, nodes
        self.rng = random.Random(seed)
        self.tasks_per_s, self.telemetry_per_s = tasks_per_s, telemetry_per_s
        self.duration_s = duration_s
        self.acked = 0
        self.send_failures = 0
        self.telemetry_sent = 0
        self._producer: AIOKafkaProducer | None = None
        self._running = True
        self._next_task = 0

    async def _send(self, topic: str, value: bytes, key: bytes | None) -> bool:
        for backoff in (*BACKOFF_S, None):
            try:
                if self._producer is None:
                    self._producer = AIOKafkaProducer(bootstrap_servers=self.bootstrap,
                                                      **PRODUCER_DEFAULTS, **aiokafka_kwargs())
                    await asyncio.wait_for(self._producer.start(), SEND_TIMEOUT_S)
                fut = await asyncio.wait_for(self._producer.send(self.prefix + topic, value,
                                                                 key=key), SEND_TIMEOUT_S)
                await asyncio.wait_for(fut, SEND_TIMEOUT_S)
                return True
            except Exception:  # broker down or restarting: a fresh producer after a pause
                self.send_failures += 1
                await self._close()
                if backoff is None or not self._running:
                    return False
                await asyncio.sleep(backoff)
        return False

    async def _close(self) -> None:
        producer, self._producer = self._producer, None
        if producer is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(producer.stop(), 5)

    async def run(self) -> None:
        spec_t, spec_g = BY_NAME[TASKS], BY_NAME[TELEMETRY]
        period = 1.0 / max(self.tasks_per_s, 1e-6)
        telemetry_each = self.telemetry_per_s * period
        owed = 0.0
        next_at = time.monotonic()
        while self._running:
            env = task_event(f"{self.prefix}task-{self._next_task:06d}", self.rng,
                             self.duration_s)
            self._next_task += 1
            if await self._send(TASKS, encode(env), key_for(spec_t, env)):
                self.acked += 1
            owed += telemetry_each
            while owed >= 1 and self.nodes:
                owed -= 1
                node = self.rng.choice(self.nodes)
                tel = telemetry_event(node, self.rng.randrange(4), self.rng)
                if await self._send(TELEMETRY, encode(tel), key_for(spec_g, tel)):
                    self.telemetry_sent += 1
            next_at += period
            await asyncio.sleep(max(0.0, next_at - time.monotonic()))
            next_at = max(next_at, time.monotonic() - 1.0)  # never burst to catch up

    def stop(self) -> None:
        self._running = False

    async def malformed(self, count: int) -> int:
        """Send ``count`` bad records spread over tasks, telemetry and nodes."""
        sent = 0
        for i in range(count):
            topic = (TASKS, TELEMETRY, NODES)[i % 3]
            if await self._send(topic, MALFORMED[i % len(MALFORMED)], f"bad-{i}".encode()):
                sent += 1
        return sent

    async def close(self) -> None:
        await self._close()


class DecisionClock:
    """When each decision arrived (monotonic seconds), read_committed from the start."""

    def __init__(self, bootstrap: str, prefix: str) -> None:
        self.bootstrap, self.topic = bootstrap, prefix + DECISIONS
        self.arrivals: list[float] = []
        self._seen: set[tuple[int, int]] = set()
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.create_task(self._tail())

    async def _tail(self) -> None:
        while True:
            consumer = AIOKafkaConsumer(self.topic, bootstrap_servers=self.bootstrap,
                                        group_id=None, isolation_level="read_committed",
                                        auto_offset_reset="earliest", **aiokafka_kwargs())
            try:
                await consumer.start()
                while True:
                    batches = await consumer.getmany(timeout_ms=200)
                    now = time.monotonic()
                    for batch in batches.values():
                        for m in batch:
                            if (m.partition, m.offset) not in self._seen:  # not a re-read
                                self._seen.add((m.partition, m.offset))
                                self.arrivals.append(now)
            except asyncio.CancelledError:
                raise
            except Exception:
                await asyncio.sleep(1.0)  # the broker restarts: tail again from the start
            finally:
                with contextlib.suppress(Exception):
                    await consumer.stop()

    def next_after(self, t: float) -> float | None:
        """Seconds from ``t`` to the first decision that arrived after it."""
        i = bisect.bisect_right(self.arrivals, t)
        return self.arrivals[i] - t if i < len(self.arrivals) else None

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
