"""Which asyncio event loop a long-running process uses (``HETSCHED_EVENT_LOOP``).

A worker spends much of its CPU in the Kafka client's request round trips
(transactions, fetches, heartbeats), which is event-loop work: with uvloop a
transaction of one record costs about a quarter less client CPU than with the
standard loop (BENCHMARKS.md, "Scheduler service"). ``asyncio`` remains
available to rule the loop out when chasing a bug.

uvloop is the default on secured clusters too. For a while it was not: on the
TLS + SCRAM broker of tests/security/test_secured_service.py a worker sometimes
opened its partitions 30 s late. The cause was not the loop but a TLS close
awaited on the way (the SSL shutdown timeout; streams/processors/closing.py),
which uvloop happened to hit more often.
"""

from __future__ import annotations

import asyncio
import os

LOOPS = ("uvloop", "asyncio")
DEFAULT_LOOP = "uvloop"


def use_event_loop(name: str | None = None) -> str:
    """Install the event loop policy ``name`` (default: ``HETSCHED_EVENT_LOOP``, else
    :data:`DEFAULT_LOOP`).

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
