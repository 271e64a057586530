"""The version of the decision rules, recorded with every placement.

Why: a replay is only a check when the replaying code decides by the same rules as the
code that recorded the log. When the rules change on purpose, the version goes up
(once per change, in the commit that makes it), the worker writes it into each
placement's reason (metric ``ENGINE_MARK``), and ``hetsched replay`` of a log written
by an older version says so, and which rules changed, instead of reporting the
differences as mismatches. Logs from before the version was recorded carry no mark:
they are version 1.
"""

from __future__ import annotations

ENGINE_VERSION = 2
ENGINE_MARK = "engine_version"
UNMARKED = 1
"""The version of a log whose placements carry no mark."""

CHANGES: dict[int, str] = {
    2: "a reason's top candidates are the best totals, then the lowest rank, then the lowest "
       "node slot (version 1 took numpy's argpartition, whose choice among tied totals "
       "depends on the CPU); placements are unchanged",
}
"""What each version changed from the one before: what may differ in a replay of an
older log."""


def changes_since(version: int) -> list[str]:
    """What changed from ``version`` to this engine, oldest first."""
    return [CHANGES[v] for v in range(version + 1, ENGINE_VERSION + 1)]
