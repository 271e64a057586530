"""A worker's router waits for its own scheduler when that one is far behind (eos._pace).

Without it, router and scheduler took turns fetching the same number of records,
so a scheduler behind stayed behind while a backlog lasted (issue 11).
"""

from __future__ import annotations

import asyncio
import time

import pytest
from aiokafka import TopicPartition

from streams.processors import eos
from streams.processors.eos import TransactionalProcessor, _Owned


class Offsets:
    """The consumer's last stable offsets, as the last fetch left them."""

    def __init__(self, ends: dict[TopicPartition, int | None]) -> None:
        self.ends = ends

    def last_stable_offset(self, tp: TopicPartition) -> int | None:
        return self.ends.get(tp)


def _processor(**kwargs: object) -> TransactionalProcessor:
    return TransactionalProcessor(name="p", app_id="a", bootstrap="127.0.0.1:1",
                                  topics=["in"], handler=object(), **kwargs)  # type: ignore[arg-type]


def test_backlog_counts_committed_records_past_each_owned_partitions_next_offset() -> None:
    proc = _processor()
    assert proc.backlog() == 0  # not started
    tp0, tp1, tp2 = (TopicPartition("in", p) for p in range(3))
    proc._owned = {0: _Owned(1, {tp0: 100}), 1: _Owned(1, {tp1: 50}), 2: _Owned(1, {tp2: 7})}
    # tp1 is caught up (end == next), tp2 not fetched yet (None): only tp0 waits.
    proc._consumer = Offsets({tp0: 2_600, tp1: 50, tp2: None})  # type: ignore[assignment]
    assert proc.backlog() == 2_500


async def test_pace_waits_until_the_downstream_caught_up() -> None:
    left = [eos.DOWNSTREAM_BACKLOG_LIMIT + 1_000]

    async def downstream_rounds() -> None:  # the scheduler's rounds, on the same loop
        while left[0] > 0:
            await asyncio.sleep(0.01)
            left[0] -= 400

    proc = _processor(downstream_backlog=lambda: left[0])
    rounds = asyncio.ensure_future(downstream_rounds())
    await proc._pace()
    assert left[0] <= eos.DOWNSTREAM_BACKLOG_LIMIT
    assert left[0] > 0  # went on as soon as it was under the limit, not at zero
    rounds.cancel()


def test_pace_returns_at_once_without_a_backlog_or_a_downstream() -> None:
    """At once = without giving the loop a turn: the coroutine ends on its first step
    (a sleep of any length, even one poll, would suspend it there)."""
    for proc in (_processor(), _processor(downstream_backlog=lambda: 10),
                 _processor(downstream_backlog=lambda: eos.DOWNSTREAM_BACKLOG_LIMIT)):
        step = proc._pace()
        with pytest.raises(StopIteration):
            step.send(None)


async def test_a_stalled_downstream_slows_the_upstream_but_never_stops_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(eos, "PACE_MAX_WAIT_S", 0.1)
    proc = _processor(downstream_backlog=lambda: 10**9)
    started = time.monotonic()
    await asyncio.wait_for(proc._pace(), 5.0)
    assert time.monotonic() - started >= 0.1
