"""Migration: is moving a task worth it, and may the cell afford another move now?

Cost of a move (seconds of the task's progress lost): its state crosses the
network (``state_mib`` over the checkpoint bandwidth) and it restarts
(``restart_s``). Benefit: the time saved over the task's remaining run by
running at full speed instead of at the source's speed. Forced moves (the
source failed or drains) skip the comparison: staying is not an option.
A *budget* (moves per sliding window of event time) caps churn for the whole
cell, so a storm of throttling alerts cannot turn into a storm of restarts.
"""

from __future__ import annotations

from dataclasses import dataclass

from streams.core.adapt.config import AdaptConfig

MIB_PER_GB = 1e9 / 2**20


@dataclass(frozen=True, slots=True)
class Verdict:
    """``go`` and the figures behind it (they go into the decision's reason)."""

    go: bool
    cost_s: float
    benefit_s: float
    why: str


def cost_s(state_mib: float, cfg: AdaptConfig) -> float:
    """Seconds lost moving ``state_mib`` of checkpoint and restarting."""
    return state_mib / (cfg.migration_bandwidth_gbps * MIB_PER_GB) + cfg.migration_restart_s


def judge(state_mib: float, remaining_s: float, source_speed: float, dest_speed: float,
          cfg: AdaptConfig) -> Verdict:
    """Move iff the time saved exceeds the cost by ``migration_min_gain``.

    Speeds are relative throughputs (1.0 = a healthy GPU of the same kind).
    """
    cost = cost_s(state_mib, cfg)
    faster = max(0.0, 1.0 - source_speed / dest_speed) if dest_speed > 0 else 0.0
    benefit = remaining_s * faster
    if benefit <= cfg.migration_min_gain * cost:
        return Verdict(False, cost, benefit, "cost outweighs gain")
    return Verdict(True, cost, benefit, "gain outweighs cost")


def budget_left(moves_at_s: list[float], now_s: float, cfg: AdaptConfig) -> int:
    """Moves still allowed in the window ending at ``now_s``."""
    recent = sum(1 for t in moves_at_s if now_s - t < cfg.migration_budget_window_s)
    return max(0, cfg.migration_budget - recent)


def prune(moves_at_s: list[float], now_s: float, cfg: AdaptConfig) -> list[float]:
    return [t for t in moves_at_s if now_s - t < cfg.migration_budget_window_s]
