"""Clients done with are closed in the background (streams/processors/closing.py).

Over TLS a client's close can wait the loop's whole SSL shutdown timeout (30 s)
for the broker's close_notify; the worker used to await it while opening its
partitions, and the secured end-to-end test gave up waiting for it.
"""

from __future__ import annotations

import asyncio

from streams.processors import closing
from streams.processors.eos_state import StateReader


class SlowClose:
    """A client whose stop takes as long as the test says (a TLS close, say)."""

    def __init__(self) -> None:
        self.release = asyncio.Event()
        self.stopped = False

    async def stop(self) -> None:
        await self.release.wait()
        self.stopped = True


class FailingClose:
    async def stop(self) -> None:
        raise ConnectionError("broker gone")


async def test_a_slow_close_does_not_hold_the_caller_and_finishes_later() -> None:
    client = SlowClose()
    closing.close_in_background(client)
    assert closing.closing_now() == 1
    await closing.wait_closed(0.05)  # bounded: returns while the close still runs
    assert not client.stopped
    client.release.set()
    await closing.wait_closed(1.0)
    assert client.stopped
    assert closing.closing_now() == 0


async def test_a_failing_close_is_swallowed() -> None:
    closing.close_in_background(FailingClose())
    await closing.wait_closed(1.0)
    assert closing.closing_now() == 0


async def test_the_state_reader_does_not_wait_for_its_consumer_to_close() -> None:
    reader = StateReader("127.0.0.1:1", "t-state", {0})  # no I/O before start
    client = SlowClose()
    reader._consumer = client  # type: ignore[assignment]
    await asyncio.wait_for(reader.__aexit__(None, None, None), 1.0)
    assert not client.stopped
    client.release.set()
    await closing.wait_closed(1.0)
    assert client.stopped
