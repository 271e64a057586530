"""A pause after each failed metadata refresh of aiokafka's clients (a busy-loop guard).

Why: aiokafka 0.12's producer sender, holding records for a partition whose leader
is unknown, calls ``client.force_metadata_update()`` and waits only for that future
(``producer/sender.py``: "wait backoff time", but no wait). With the broker down
each refresh fails at once (connection refused), the future resolves, the sender
asks again: the client's metadata task spins at 100 % CPU until the broker is
back. ``tests/reliability/test_kafka_unreachable.py`` caught a worker at 4.9
CPU-s over 5 s of outage when a record was in flight as the broker stopped
(stack: ``AIOKafkaClient._md_synchronizer`` -> ``_metadata_update`` -> connect).

The guard wraps ``AIOKafkaClient._metadata_update`` (class-wide, once, for every
client of the process, Faust's included): a refresh that reached no broker is
followed by a pause of the client's ``retry_backoff_ms``, at least
:data:`MIN_PAUSE_S`, before its waiters learn the result. A successful refresh
is not delayed. Recheck on aiokafka upgrades (a private method is wrapped).
"""

from __future__ import annotations

import asyncio
import functools
from typing import Any

from aiokafka.client import AIOKafkaClient

MIN_PAUSE_S = 0.1
"""The Java client's default ``retry.backoff.ms`` (100 ms)."""

_MARK = "_hetsched_paced"


def pace_failed_metadata_updates() -> None:
    """Install the pause on failed metadata refreshes (idempotent)."""
    original = AIOKafkaClient._metadata_update
    if getattr(original, _MARK, False):
        return

    @functools.wraps(original)
    async def paced(self: AIOKafkaClient, cluster_metadata: Any, topics: Any) -> bool:
        updated = await original(self, cluster_metadata, topics)
        if not updated:
            await asyncio.sleep(max(float(getattr(self, "_retry_backoff", 0.0)), MIN_PAUSE_S))
        return bool(updated)

    setattr(paced, _MARK, True)
    AIOKafkaClient._metadata_update = paced  # type: ignore[method-assign]
