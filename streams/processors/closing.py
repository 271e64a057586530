"""Closing Kafka clients off the critical path.

Stopping an aiokafka client closes its connections, and over TLS each close
first exchanges ``close_notify`` with the broker: the event loop waits for the
broker's answer up to its SSL shutdown timeout (30 s in uvloop and in asyncio
since 3.11) before it reports the connection lost. Against a TLS broker some
closes took that whole timeout: a worker that awaited the close of its state
reader opened its partitions 30.8 s late, long enough for the secured
end-to-end test to give up (found with uvloop, which it hit about once in four
runs; nothing in the close is specific to one loop).

The clients closed here are done with when they are closed: a state reader
after its last read, a producer whose only job was ``InitProducerId`` (fencing)
or a committed claim, writers given up on a rebalance. Nothing waits for their
close to finish, so it runs as a background task, bounded, its errors
swallowed (a failed close loses nothing: the broker drops the connection on
its own). :func:`wait_closed` lets a stopping service give them a moment.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Protocol

CLOSE_TIMEOUT_S = 40.0
"""A close still running after this is abandoned (the SSL shutdown timeout is 30 s)."""

_closing: set[asyncio.Task[None]] = set()


class Stoppable(Protocol):
    async def stop(self) -> None: ...


def close_in_background(client: Stoppable) -> None:
    """Stop ``client`` without waiting for it (module doc: why that is safe here)."""
    task = asyncio.ensure_future(_stop_quietly(client))
    _closing.add(task)  # a reference, so the task is not collected mid-close
    task.add_done_callback(_closing.discard)


async def wait_closed(timeout_s: float) -> None:
    """Wait up to ``timeout_s`` for the closes still running (on a service's stop)."""
    if _closing:
        await asyncio.wait(set(_closing), timeout=timeout_s)


def closing_now() -> int:
    """How many closes are still running."""
    return len(_closing)


async def _stop_quietly(client: Stoppable) -> None:
    with contextlib.suppress(Exception):
        await asyncio.wait_for(client.stop(), CLOSE_TIMEOUT_S)
