"""Correct changelog highwaters for Faust's table recovery under exactly-once.

Root cause of the failover duplicates (docs/service.md, "Table recovery"):
faust-streaming 0.15, when ``processing_guarantee="exactly_once"``, takes the
highwater of each changelog partition to recover from
``AIOKafkaConsumer.last_stable_offset(tp)``. That is not a broker request but
the value cached from the consumer's last *fetch response* for ``tp``: ``None``
for a partition just assigned and not fetched yet (Faust then uses -1: "nothing
to recover", or crashes with "persisted offset higher than highwater"), and a
stale value for one fetched earlier. Either way a successor can finish
"recovery" without the dead worker's last committed records, restore a cell or
the router's tables from an old state and decide or route an event again.

The fix asks the broker. A ``read_committed`` ListOffsets gives the last stable
offset (LSO), but Faust's recovery ends when it has *applied* the record at
``highwater - 1``, and with transactions the records just below the LSO are
commit markers, which a consumer never receives (Faust would then wait for two
5 s timeouts in ``detect_aborted_tx``). So we return ``last committed data
record + 1``, found by reading the partition's tail with ``read_committed``:
recovery then ends exactly when the last committed record is applied, and
never reads past an open or aborted transaction.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from typing import Any

from aiokafka import AIOKafkaConsumer, TopicPartition
from faust.transport.drivers.aiokafka import AIOKafkaConsumerThread

from schemas.kafka import aiokafka_kwargs

log = logging.getLogger(__name__)

TAIL_WINDOW = 64
"""Records read back from the LSO at first; doubled until a data record is found."""
TAIL_TIMEOUT_S = 20.0


async def last_committed_ends(bootstrap: str, partitions: Sequence[TopicPartition],
                              timeout_s: float = TAIL_TIMEOUT_S) -> dict[TopicPartition, int]:
    """Per partition: offset of its last committed data record + 1 (0 if none).

    Reads each partition's tail with ``read_committed`` up to its LSO, widening
    the window until a record is found or the window reaches the log start.
    """
    if not partitions:
        return {}
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=None,
                                enable_auto_commit=False, isolation_level="read_committed",
                                **aiokafka_kwargs())
    await consumer.start()
    try:
        tps = list(partitions)
        consumer.assign(tps)
        ends = await consumer.end_offsets(tps)  # read_committed: the LSO
        starts = await consumer.beginning_offsets(tps)
        result: dict[TopicPartition, int] = {}
        window = {tp: TAIL_WINDOW for tp in tps}
        pending = [tp for tp in tps if ends[tp] > starts[tp]]
        for tp in tps:
            if tp not in pending:
                result[tp] = 0 if ends[tp] == 0 else starts[tp]
        deadline = time.monotonic() + timeout_s
        while pending:
            if time.monotonic() > deadline:
                raise TimeoutError(f"changelog tails not read in {timeout_s}s: {pending}")
            last: dict[TopicPartition, int] = {}
            for tp in pending:
                consumer.seek(tp, max(starts[tp], ends[tp] - window[tp]))
            waiting = set(pending)
            while waiting:
                if time.monotonic() > deadline:
                    raise TimeoutError(f"changelog tails not read in {timeout_s}s")
                batches = await consumer.getmany(*waiting, timeout_ms=200)
                for tp, records in batches.items():
                    for r in records:
                        if r.offset < ends[tp]:
                            last[tp] = max(last.get(tp, -1), r.offset)
                for tp in list(waiting):
                    if await consumer.position(tp) >= ends[tp]:
                        waiting.discard(tp)
            still = []
            for tp in pending:
                if tp in last:
                    result[tp] = last[tp] + 1
                elif ends[tp] - window[tp] <= starts[tp]:
                    result[tp] = starts[tp]  # only markers / aborted records: nothing to apply
                else:
                    window[tp] *= 4
                    still.append(tp)
            pending = still
        return result
    finally:
        await consumer.stop()


def install(bootstrap: str) -> None:
    """Make Faust's exactly-once recovery use :func:`last_committed_ends` as highwaters."""
    original = AIOKafkaConsumerThread._highwaters

    async def _highwaters(self: Any, partitions: list[Any]) -> Mapping[Any, int]:
        if not self.consumer.in_transaction:
            return await original(self, partitions)
        tps = [TopicPartition(tp.topic, tp.partition) for tp in partitions]
        ends = await last_committed_ends(bootstrap, tps)
        by_key = {(tp.topic, tp.partition): v for tp, v in ends.items()}
        return {tp: by_key[(tp.topic, tp.partition)] for tp in partitions}

    AIOKafkaConsumerThread._highwaters = _highwaters  # type: ignore[method-assign]
