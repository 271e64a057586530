"""Opening a partition: its committed state, and the writers its claim names.

Reading a processor's state partitions to their end (:class:`StateReader`), the
offsets kept among them (:func:`pop_offsets`), and the transactional ids that fence
(:data:`TXN_ID_SUFFIXES`) and claim (:data:`WRITERS_KEY`) a partition. The fencing
protocol that uses them is described in ``streams.processors.eos``.
"""

from __future__ import annotations

import time
from typing import Any

import orjson
from aiokafka import AIOKafkaConsumer, TopicPartition

from schemas.kafka import aiokafka_kwargs
from streams.processors.closing import close_in_background
from streams.processors.eos_txn import OFFSET_KEY

RESTORE_TIMEOUT_S = 120.0

TXN_ID_SUFFIXES = ("", "-b")
"""Transactional ids of a partition's own producers, ``{group}-{partition}{suffix}``
(both were used in turn for its transactions by the previous version). Opening a
partition starts both, which fences a worker of an earlier version; the first then
commits the partition's claim (:data:`WRITERS_KEY`) and both are closed."""

WRITERS_KEY = f"{OFFSET_KEY}writers"
"""State key of the transactional ids of the round producers that may write this
partition (the last owner's claim). Under :data:`OFFSET_KEY`, so that it never
reaches the handler, also not one of an earlier version restoring this state."""


class StateReader:
    """Reads a processor's state partitions (``read_committed``), and on again later.

    :meth:`read_to_end` applies everything committed up to the last stable
    offset as it is now; called again after fencing a writer, it reads what
    that writer's settled transaction added (its position kept in between).
    """

    def __init__(self, bootstrap: str, topic: str, partitions: set[int]) -> None:
        self.tps = [TopicPartition(topic, p) for p in sorted(partitions)]
        self.states: dict[int, dict[str, Any]] = {p: {} for p in partitions}
        self._consumer = AIOKafkaConsumer(
            bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
            isolation_level="read_committed", auto_offset_reset="earliest",
            **aiokafka_kwargs())

    async def __aenter__(self) -> StateReader:
        await self._consumer.start()
        self._consumer.assign(self.tps)
        await self._consumer.seek_to_beginning(*self.tps)
        return self

    async def __aexit__(self, *exc: object) -> None:
        close_in_background(self._consumer)  # done reading; a TLS close may take 30 s

    async def read_to_end(self) -> None:
        consumer = self._consumer
        ends = await consumer.end_offsets(self.tps)  # read_committed: the last stable offset
        waiting = {tp for tp in self.tps if await consumer.position(tp) < ends[tp]}
        deadline = time.monotonic() + RESTORE_TIMEOUT_S
        while waiting:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{self.tps[0].topic}: state not read in time")
            batches = await consumer.getmany(*waiting, timeout_ms=200)
            for tp, records in batches.items():
                state = self.states[tp.partition]
                for r in records:  # all committed (read_committed), also past ``ends``
                    if r.key is None:
                        continue
                    key = r.key.decode()
                    if r.value is None:
                        state.pop(key, None)
                    else:
                        state[key] = orjson.loads(r.value)
            for tp in list(waiting):
                if await consumer.position(tp) >= ends[tp]:
                    waiting.discard(tp)


def pop_offsets(state: dict[str, Any]) -> dict[str, Any]:
    """Take the :data:`OFFSET_KEY` records out of a restored state (the handler's rest)."""
    keys = [k for k in state if k.startswith(OFFSET_KEY)]
    return {k: state.pop(k) for k in keys}
