"""Which asyncio event loop a long-running process uses (``HETSCHED_EVENT_LOOP``).

A worker spends much of its CPU in the Kafka client's request round trips
(transactions, fetches, heartbeats), which is event-loop work: with uvloop a
transaction of one record costs about a quarter less client CPU than with the
standard loop (BENCHMARKS.md, "Scheduler service"). ``asyncio`` remains
available to rule the loop out when chasing a bug.

Against a secured cluster (any ``KAFKA_SECURITY_PROTOCOL`` other than
PLAINTEXT) the default is the standard loop: with uvloop, a worker on the TLS +
SCRAM broker of tests/security/test_secured_service.py opened its router's
partitions but never its scheduler's (a hang, not an error; with asyncio the
test passes), and the cause is not yet known. ``HETSCHED_EVENT_LOOP=uvloop``
still forces uvloop there.
"""

from __future__ import annotations

import asyncio
import os

LOOPS = ("uvloop", "asyncio")
DEFAULT_LOOP = "uvloop"


def default_loop() -> str:
    """uvloop on a plaintext cluster, the standard loop on a secured one (module doc)."""
    from schemas.kafka import security_settings

    try:
        protocol = security_settings().protocol
    except (ValueError, OSError, SystemExit):
        return "asyncio"  # a bad security config fails with its own message, later
    return DEFAULT_LOOP if protocol == "PLAINTEXT" else "asyncio"


def use_event_loop(name: str | None = None) -> str:
    """Install the event loop policy ``name`` (default: ``HETSCHED_EVENT_LOOP``, else
    :func:`default_loop`).

    Call before the first loop is created. Returns the name installed; an unknown
    name exits with the variable and the choices.
    """
    if name is None:
        name = os.environ.get("HETSCHED_EVENT_LOOP", "").strip() or default_loop()
    if name not in LOOPS:
        raise SystemExit(f"HETSCHED_EVENT_LOOP={name!r}: expected one of {', '.join(LOOPS)}")
    if name == "uvloop":
        import uvloop

        asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())
    else:
        asyncio.set_event_loop_policy(asyncio.DefaultEventLoopPolicy())
    return name
