"""Send records and table updates in the transaction of the event being processed.

Why not Faust's own ``topic.send`` / ``table[key] = value`` under
``processing_guarantee="exactly_once"``: faust-streaming 0.15 picks the
transactional producer by the *destination* partition of each record, and
buffers table changelog writes (``send_soon``) without flushing them before it
commits offsets. So a record sent to another partition than the source's
(the router re-keys node/task events by cell) either fails ("No transaction
producer found") or lands in another partition's transaction, and a changelog
update may commit after the offsets it belongs with (faust-streaming issues
#177, #323, #517). A crash in between would lose or duplicate work.

Kafka's exactly-once contract is per *producer*: the output records, the
changelog updates and the consumed offsets are atomic when one transactional
producer sends them all. Faust runs one transactional producer per source
partition (``{app id}-{group}-{partition}``) and commits that partition's
offsets through it; this module sends our records through that same producer,
awaiting the append before the event is acknowledged, so they are in the
transaction that commits the event's offset. Table values are set in the local
store directly and their changelog record is sent the same way, to the source
partition (Faust's rule for table changelogs), encoded as the table's
serializers would, so Faust's recovery reads them back unchanged.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import AsyncIterator
from typing import Any

import faust
import orjson

_JSON = orjson.OPT_SORT_KEYS
_HELD: contextvars.ContextVar[str | None] = contextvars.ContextVar("held_tid", default=None)


class TransactionalSender:
    """Sends through the transactional producer of an event's source partition."""

    def __init__(self, app: faust.App) -> None:
        self.app = app

    def _tid(self, event: faust.types.EventT) -> str:
        tp = event.message.tp
        return f"{self.app.conf.id}-{self.app.assignor.group_for_topic(tp.topic)}-{tp.partition}"

    @contextlib.asynccontextmanager
    async def atomic(self, event: faust.types.EventT) -> AsyncIterator[None]:
        """Everything sent inside lands in one transaction: Faust cannot commit halfway.

        Faust's commit timer runs concurrently with agents and takes the same lock;
        holding it for a whole event means a commit sees all or none of the
        event's records, whatever the event's offset commit does.
        """
        if not self.app.in_transaction:
            yield
            return
        tid = self._tid(event)
        async with self.app.producer._trn_locks[tid]:  # private: see module doc
            token = _HELD.set(tid)
            try:
                yield
            finally:
                _HELD.reset(token)

    async def send(self, event: faust.types.EventT, topic: str, key: bytes, value: bytes,
                   partition: int | None = None,
                   headers: list[tuple[str, bytes]] | None = None) -> None:
        """Append one record to ``topic`` inside ``event``'s transaction."""
        app = self.app
        if not app.in_transaction:
            await app.producer.send(topic, key, value, partition, None, headers)
            return
        tid = self._tid(event)
        producer = app.producer._transaction_producers[tid]  # private: see module doc
        if _HELD.get() == tid:
            await producer.send(topic, value, key=key, partition=partition, headers=headers)
            return
        async with app.producer._trn_locks[tid]:
            await producer.send(topic, value, key=key, partition=partition, headers=headers)

    async def put(self, event: faust.types.EventT, table: Any, key: str,
                  value: Any) -> None:
        """``table[key] = value`` with the changelog record in ``event``'s transaction."""
        partition = event.message.partition
        store = table.data
        store[key] = value
        key_partition = getattr(store, "_key_partition", None)
        if key_partition is not None:
            key_partition[key] = partition
        await self.send(event, table.changelog_topic.get_topic_name(), orjson.dumps(key),
                        orjson.dumps(value, option=_JSON), partition)
