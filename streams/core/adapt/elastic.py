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
they are all given back at once, whatever the utilisation and the cooldown
("reclaim"; growing again needs a cooldown after it), because a busy task that
grew when the cluster was quiet must not hold the GPUs a queued task was
promised (the simulator showed queueing delay doubling without this rule).

Growth must not fragment (``AdaptConfig.elastic_keep_slots``): an empty queue
says nothing about the next arrival, and every free pair or quad a task grows
into is one an arriving 2- or 4-GPU job no longer finds on a busy node, so it
opens an idle one, and the 8-GPU jobs that need a whole node wait. So growth
takes only a GPU that breaks no free slot of a typical multi-GPU shape
(``keeps_slots``: an odd one out), and the reclaim waits until a queued task
would actually fit on the node with the borrowed GPUs (``needed``): giving
them back to a queue whose tasks cannot use them only starts a shrink/regrow
cycle.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from streams.core.adapt.config import ElasticConfig
from streams.core.adapt.window import Window

Direction = Literal["up", "down", "reclaim"]
SLOT_SHAPES = (2, 4, 8)
"""Whole-GPU shapes of the typical multi-GPU job (``streams.profiles.service.DEFAULT_MIX``)."""


def keeps_slots(free_whole: int, shapes: tuple[int, ...] = SLOT_SHAPES) -> bool:
    """Taking one of ``free_whole`` free whole GPUs of a node leaves as many free slots
    of every shape (e.g. 3 -> 2 keeps one pair; 2 -> 1 loses it)."""
    return free_whole > 0 and all((free_whole - 1) // k == free_whole // k for k in shapes)


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
    needed: bool = True
    """A queued task would fit on the node with the borrowed GPUs (reclaim only then)."""


def decide(view: ElasticView, usage: Window, now_s: float,
           cfg: ElasticConfig) -> Direction | None:
    """``"up"``, ``"down"``, ``"reclaim"`` or None; see the module docstring."""
    if (view.base_gpus is not None and view.gpus > view.base_gpus and view.others_waiting
            and view.needed):
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
