"""The tick timer: the only place the scheduler reads the wall clock.

Every ``HETSCHED_TICK_S`` a worker appends a ``Tick`` to the input log of each
cell it owns; the cell retries its queue on it. ``seq`` is the wall-clock
interval number (``floor(now / interval)``), so two workers briefly owning a
cell during a rebalance write the same seq and the cell ignores the repeat
(``Cell.tick`` drops seq <= last). Ticks are sent by a plain idempotent
producer, outside any transaction: a tick consumes nothing, so there is no
offset to commit with it, and a lost or repeated tick changes nothing but
when the queue is retried.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime

from aiokafka import AIOKafkaProducer

from schemas.codec import encode
from schemas.consume import PRODUCER_DEFAULTS
from schemas.events import Tick, make_event
from schemas.kafka import aiokafka_kwargs
from streams.processors.context import Context


def make_ticker(ctx: Context) -> Callable[[], Awaitable[None]]:
    producer: list[AIOKafkaProducer] = []

    async def tick_cells() -> None:
        cells = ctx.owned_cells()
        if not cells:
            return
        if not producer:
            p = AIOKafkaProducer(bootstrap_servers=ctx.settings.bootstrap, **PRODUCER_DEFAULTS,
                                **aiokafka_kwargs())
            await p.start()
            producer.append(p)
        now = time.time()
        interval = ctx.settings.tick_s
        seq = int(now // interval)
        at = datetime.fromtimestamp(now, UTC)
        for cell in cells:
            env = make_event(Tick(seq=seq, interval_s=interval), source=f"ticker/{cell}",
                             occurred_at=at, cell=cell, id_seed=f"tick/{cell}/{seq}")
            await producer[0].send_and_wait(ctx.input_log, encode(env), key=cell.encode())

    return tick_cells
