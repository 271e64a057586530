"""Elastic resizing: when to grow or shrink a task that declared min/max GPUs.

Why these rules: a resize checkpoints and restarts the task, so it must pay
off and must never oscillate. Three guards do that: (1) *sustained*
conditions, utilisation above the high-water mark (or below the low-water
mark) for a whole window, not one sample; (2) *hysteresis*: the gap between
the marks, and the task's window is cleared after a resize, so the new size
must prove itself for a full window; (3) a *cooldown* after each resize.
Growth needs a free whole GPU on the task's node and an empty queue (capacity
is free); shrinking happens only while others wait (the GPU is wanted).

GPUs grown beyond what the task asked for are *borrowed*: while others wait
they are all given back at once, on the first tick anyone waits, whatever the
utilisation and the cooldown ("reclaim"; growing again needs a cooldown after it),
because a busy task that grew when the cluster was quiet must not hold the
GPUs a queued task was promised (the simulator showed queueing delay doubling
without this rule).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from streams.core.adapt.config import ElasticConfig
from streams.core.adapt.window import Window

Direction = Literal["up", "down", "reclaim"]


@dataclass(frozen=True, slots=True)
class ElasticView:
    """What the decision needs about one elastic task now."""

    gpus: int
    min_gpus: int
    max_gpus: int
    last_resize_s: float | None
    free_gpus_on_node: int
    others_waiting: bool
    base_gpus: int | None = None
    """GPUs the task asked for (None: unknown, nothing is borrowed)."""


def decide(view: ElasticView, usage: Window, now_s: float,
           cfg: ElasticConfig) -> Direction | None:
    """``"up"``, ``"down"``, ``"reclaim"`` or None; see the module docstring."""
    if view.base_gpus is not None and view.gpus > view.base_gpus and view.others_waiting:
        return "reclaim"  # no cooldown: growing again needs one after it, so no flapping
    if view.last_resize_s is not None and now_s - view.last_resize_s < cfg.cooldown_s:
        return None
    if (view.gpus < view.max_gpus and view.free_gpus_on_node > 0 and not view.others_waiting
            and usage.sustained(now_s, cfg.window_s, lambda u: u > cfg.high_pct)):
        return "up"
    if (view.gpus > view.min_gpus and view.others_waiting
            and usage.sustained(now_s, cfg.window_s, lambda u: u < cfg.low_pct)):
        return "down"
    return None
