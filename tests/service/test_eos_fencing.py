"""A new owner fences every producer that could still write a partition before reading it.

Why: a partition is written by its own two transactional ids (``eos_state.TXN_ID_SUFFIXES``:
earlier versions' writers, and the claims) and by the round producers its state names
(``eos_state.WRITERS_KEY``). A zombie owner may hold an open transaction on any of them;
opening the partition must abort it and fence that producer, or the zombie could commit
outputs for records the new owner processes again.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import orjson
import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.errors import KafkaError
from eos_topics import processor_topics

from streams.processors.eos import TransactionalProcessor
from streams.processors.eos_state import TXN_ID_SUFFIXES, WRITERS_KEY
from streams.processors.eos_txn import Transaction

pytestmark = [pytest.mark.integration]


class Echo:
    def restore(self, partition: int, state: dict[str, Any]) -> None:
        pass

    def drop(self, partition: int) -> None:
        pass

    async def process(self, record: Any, txn: Transaction) -> None:
        raise AssertionError("no input in this test")

    async def reject(self, record: Any, txn: Transaction, error: str) -> None:
        raise AssertionError(error)


@pytest.mark.parametrize("suffix", TXN_ID_SUFFIXES)
async def test_opening_a_partition_aborts_and_fences_a_zombie_on_either_id(
        kafka_bootstrap: str, suffix: str) -> None:
    processor, out, _ = await _echo_deployment(kafka_bootstrap, "eosfence")
    await _zombie_is_fenced_by_opening(kafka_bootstrap, processor,
                                       f"{processor.group_id}-0{suffix}", out)
    assert await _committed(kafka_bootstrap, out) == []


async def test_opening_fences_the_round_writers_the_state_names_and_claims_for_its_own(
        kafka_bootstrap: str) -> None:
    """One transaction per round spans partitions, so its producer's id is not the
    partition's: the partition's state names it (``WRITERS_KEY``, the last owner's
    claim), and a new owner must fence exactly those ids before it reads on, then
    commit a claim naming its own writers (for the owner after it to fence)."""
    processor, out, state_topic = await _echo_deployment(kafka_bootstrap, "eosclaim")
    zombie_id = f"{processor.group_id}-rzombie"  # a previous owner's round producer
    claimer = AIOKafkaProducer(bootstrap_servers=kafka_bootstrap,
                               transactional_id=f"{processor.group_id}-0")
    await claimer.start()
    try:
        async with claimer.transaction():
            await claimer.send(state_topic, orjson.dumps([zombie_id]),
                               key=WRITERS_KEY.encode(), partition=0)
    finally:
        await claimer.stop()
    await _zombie_is_fenced_by_opening(kafka_bootstrap, processor, zombie_id, out)
    assert await _committed(kafka_bootstrap, out) == []
    claims = [orjson.loads(r.value) for r in await _committed(kafka_bootstrap, state_topic)
              if r.key == WRITERS_KEY.encode()]
    assert claims[0] == [zombie_id]
    assert len(claims) == 2 and zombie_id not in claims[-1]
    assert all(w.startswith(f"{processor.group_id}-r") for w in claims[-1])


async def _echo_deployment(bootstrap: str, label: str) -> tuple[TransactionalProcessor, str, str]:
    """A one-partition deployment of the :class:`Echo` processor (not started): the
    processor, its output topic (for a zombie to write) and its state topic."""
    app_id, src, out, state = await processor_topics(bootstrap, label, "echo", 1)
    processor = TransactionalProcessor(name="echo", app_id=app_id, bootstrap=bootstrap,
                                       topics=[src], handler=Echo(), session_timeout_s=6)
    return processor, out, state


async def _zombie_is_fenced_by_opening(bootstrap: str, processor: TransactionalProcessor,
                                       transactional_id: str, out: str) -> None:
    """A zombie with ``transactional_id`` holds an open transaction on ``out``; opening
    the processor's partition must make its commit fail."""
    zombie = AIOKafkaProducer(bootstrap_servers=bootstrap, transactional_id=transactional_id)
    await zombie.start()
    try:
        await zombie.begin_transaction()
        await zombie.send_and_wait(out, b"zombie", key=b"k")
        await _open_and_expect_fenced(processor, zombie)
    finally:
        with contextlib.suppress(Exception):
            await zombie.stop()


async def _open_and_expect_fenced(processor: TransactionalProcessor,
                                  zombie: AIOKafkaProducer) -> None:
    """Start ``processor`` until it owns partition 0 (fenced, state read, claimed); the
    zombie's open transaction must then fail to commit."""
    await processor.start()
    try:
        for _ in range(100):
            if processor.owned_partitions() == {0}:
                break
            await asyncio.sleep(0.2)
        assert processor.owned_partitions() == {0}
        with pytest.raises(KafkaError):
            await zombie.commit_transaction()
    finally:
        await processor.stop()


async def _committed(bootstrap: str, topic: str) -> list[Any]:
    reader = AIOKafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=None,
                              auto_offset_reset="earliest", isolation_level="read_committed")
    await reader.start()
    try:
        return [r for rs in (await reader.getmany(timeout_ms=2000)).values() for r in rs]
    finally:
        await reader.stop()
