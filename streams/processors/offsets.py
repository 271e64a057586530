"""Never commit a source offset past a record no agent has processed (Faust's ack bookkeeping).

Root cause of the skipped first records (docs/service.md, "Offsets committed
past unprocessed records"): faust-streaming 0.15 decides how far it may commit
a partition in ``Consumer._new_offset`` from the offsets its agents acked, and
three defects combine:

* the "gap at the head" check (first acked offset vs the committed one) is
  skipped when the committed offset is ``None`` *or 0* (``if committed_offset:``),
  so a partition never committed before is committed up to the first run of
  acked offsets, whatever lies below it;
* ``perform_seek`` rewinds only partitions whose committed offset is > 0
  (aiokafka's ``seek_to_committed`` ignores ``None`` and 0), and records
  fetched in an older consumer generation are dropped by the stream without an
  ack ("Skipping message ... generation_id"); an agent still busy with an
  old-generation event when a rebalance ends acks it into the *new*
  generation's bookkeeping (Faust clears it on revoke), where it counts as
  progress of a partition whose earlier records were never seen;
* after a seek the records between the committed offset and the first one
  delivered are aborted records or transaction markers, which a
  ``read_committed`` consumer never receives; Faust only records such gaps
  between two delivered records with a truthy previous offset, so a partition
  whose head is such a run (an input log after a killed worker's transaction
  was aborted) may never commit again: its transaction stays open until the
  broker aborts it at ``transaction.timeout.ms`` and fences the producer.

The patch: acks of messages from an older generation are not counted (the
record will be delivered again from the committed offset); ``perform_seek``
rewinds every partition, to its committed offset or its first offset, and
records that position; ``_new_offset`` commits only from that position on: the
head run between it and the first offset acked since the seek is skipped (the
broker did not deliver it), a single missing offset after a commit is a commit
marker (Faust's own tolerance), anything else waits.
"""

from __future__ import annotations

import logging
from typing import Any

from faust.transport.consumer import Consumer, consecutive_numbers

log = logging.getLogger(__name__)

_original_ack = Consumer.ack
_original_perform_seek = Consumer.perform_seek
_original_revoked = Consumer.on_partitions_revoked


def _state(self: Any) -> tuple[dict[Any, int], dict[Any, int]]:
    bases = self.__dict__.setdefault("_hetsched_seek_base", {})
    firsts = self.__dict__.setdefault("_hetsched_first_acked", {})
    return bases, firsts


def ack(self: Any, message: Any) -> bool:
    gen = getattr(message, "generation_id", None)
    if gen is not None and gen != self.app.consumer_generation_id:
        # Delivered before the last rebalance: the stream will see it again from
        # the committed offset; counting it now could commit past its predecessors.
        message.acked = True
        self._unacked_messages.discard(message)
        return False
    done = bool(_original_ack(self, message))
    if done:
        _, firsts = _state(self)
        firsts.setdefault(message.tp, message.offset)
    return done


async def perform_seek(self: Any) -> None:
    committed = await self.seek_to_committed()
    bases, firsts = _state(self)
    missing = [tp for tp, off in committed.items() if not off]
    earliest = await self.earliest_offsets(*missing) if missing else {}
    for tp, off in committed.items():
        base = off if off else int(earliest.get(tp) or 0)
        if not off:
            await self.seek(tp, base)
        self._committed_offset[tp] = base
        self._read_offset[tp] = None
        self._acked.pop(tp, None)
        self._acked_index.pop(tp, None)
        self._gap.pop(tp, None)
        bases[tp] = base
        firsts.pop(tp, None)
    log.debug("hetsched perform_seek bases %s", bases)


async def on_partitions_revoked(self: Any, revoked: Any) -> None:
    bases, firsts = _state(self)
    for tp in revoked:
        bases.pop(tp, None)
        firsts.pop(tp, None)
    await _original_revoked(self, revoked)


def _new_offset(self: Any, tp: Any) -> int | None:
    acked = self._acked[tp]
    if not acked:
        return None
    max_offset = max(acked)
    gap_for_tp = self._gap[tp]
    if gap_for_tp:
        candidates = sorted(gap_for_tp.overlap(0, max_offset), key=lambda x: x.begin)
        if candidates:
            stuff: list[int] = []
            for entry in candidates:
                stuff.extend(range(entry.begin, entry.end))
            acked.extend(o for o in stuff if o not in self._acked_index[tp])
            self._acked_index[tp].update(stuff)
            gap_for_tp.chop(0, max(stuff[-1], max_offset + 1))
    acked.sort()
    committed = self._committed_offset[tp]
    if committed is None:
        return None  # position unknown (no seek since assignment): commit nothing
    while acked and acked[0] < committed:  # already committed (gap fill below it)
        self._acked_index[tp].discard(acked.pop(0))
    if not acked:
        return None
    first = acked[0]
    if first > committed:
        bases, firsts = _state(self)
        after_seek = committed == bases.get(tp) and first == firsts.get(tp)
        if not after_seek and first - committed > 1:
            return None
    batch = next(consecutive_numbers(acked))
    acked[: len(batch)] = []
    self._acked_index[tp].difference_update(batch)
    return int(batch[-1]) + 1


def install() -> None:
    """Patch Faust's consumer (idempotent)."""
    if getattr(Consumer, "_hetsched_offsets", False):
        return
    Consumer.ack = ack  # type: ignore[method-assign]
    Consumer.perform_seek = perform_seek  # type: ignore[method-assign]
    Consumer.on_partitions_revoked = on_partitions_revoked  # type: ignore[method-assign]
    Consumer._new_offset = _new_offset  # type: ignore[method-assign]
    Consumer._hetsched_offsets = True  # type: ignore[attr-defined]
