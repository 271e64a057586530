"""Which asyncio event loop a long-running process uses (``HETSCHED_EVENT_LOOP``).

A worker spends much of its CPU in the Kafka client's request round trips
(transactions, fetches, heartbeats), which is event-loop work: with uvloop a
transaction of one record costs about a quarter less client CPU than with the
standard loop (BENCHMARKS.md, "Scheduler service"). ``asyncio`` remains
available to rule the loop out when chasing a bug.
"""

from __future__ import annotations

import asyncio
import os

LOOPS = ("uvloop", "asyncio")
DEFAULT_LOOP = "uvloop"


def use_event_loop(name: str | None = None) -> str:
    """Install the event loop policy ``name`` (default: ``HETSCHED_EVENT_LOOP`` or uvloop).

    Call before the first loop is created. Returns the name installed; an unknown
    name exits with the variable and the choices.
    """
    if name is None:
        name = os.environ.get("HETSCHED_EVENT_LOOP", "").strip() or DEFAULT_LOOP
    if name not in LOOPS:
        raise SystemExit(f"HETSCHED_EVENT_LOOP={name!r}: expected one of {', '.join(LOOPS)}")
    if name == "uvloop":
        import uvloop

        asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())
    else:
        asyncio.set_event_loop_policy(asyncio.DefaultEventLoopPolicy())
    return name
