"""Logical clock: ticks written into a cell's input log drive periodic work.

The core never reads the wall clock; "every 10 s" means "on every tick", and a
tick's time is its envelope's ``occurred_at``. Replay sees the same ticks.
"""

from __future__ import annotations

from typing import ClassVar

from schemas.events.base import Event, NonNegInt, PosFloat


class Tick(Event):
    """One beat of a cell's logical clock."""

    EVENT_TYPE: ClassVar[str] = "Tick"
    seq: NonNegInt
    """Per-cell counter, strictly increasing."""
    interval_s: PosFloat
    """Nominal time between ticks."""
