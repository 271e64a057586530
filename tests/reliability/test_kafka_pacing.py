"""The busy-loop guard on aiokafka's metadata refreshes (``schemas.kafka_pacing``).

aiokafka's producer sender, holding records whose partition leader is unknown,
asks for a metadata refresh and waits only for that refresh; with no broker the
refresh fails at once, so the pair spins. Here the sender's loop is reproduced on
a real ``AIOKafkaClient`` pointed at a closed port: unguarded it refreshes hundreds
of times a second, guarded at most once per ``MIN_PAUSE_S``.
"""

from __future__ import annotations

import asyncio
import socket
import time

import pytest
from aiokafka.client import AIOKafkaClient

from schemas.kafka_pacing import MIN_PAUSE_S, pace_failed_metadata_updates


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def _refreshes_in(seconds: float) -> int:
    """How often a sender-like loop gets a (failed) metadata refresh answered."""
    client = AIOKafkaClient(bootstrap_servers=f"127.0.0.1:{_closed_port()}",
                            retry_backoff_ms=20)
    client._sync_task = asyncio.ensure_future(client._md_synchronizer())
    count, end = 0, time.monotonic() + seconds
    try:
        while time.monotonic() < end:
            await client.force_metadata_update()  # what the sender does, unknown leader
            count += 1
    finally:
        client._sync_task.cancel()
        await client.close()
    return count


async def test_a_failed_refresh_is_answered_after_a_pause_not_at_once(
        monkeypatch: pytest.MonkeyPatch) -> None:
    pace_failed_metadata_updates()
    paced = AIOKafkaClient._metadata_update
    guarded = await _refreshes_in(0.5)
    assert guarded <= 0.5 / MIN_PAUSE_S + 1, guarded

    monkeypatch.setattr(AIOKafkaClient, "_metadata_update", paced.__wrapped__)
    unguarded = await _refreshes_in(0.5)
    assert unguarded > 10 * guarded, (unguarded, guarded)  # the loop the guard prevents


def test_installing_twice_wraps_once() -> None:
    pace_failed_metadata_updates()
    first = AIOKafkaClient._metadata_update
    pace_failed_metadata_updates()
    assert AIOKafkaClient._metadata_update is first
    assert not hasattr(first.__wrapped__, "_hetsched_paced")
