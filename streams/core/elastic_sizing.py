"""How many GPUs an elastic task runs on, by how its class scales (issue 35). Pure.

A task that declares a range (``TaskMeta.elastic``: min_gpus, max_gpus) may run on any
whole-GPU count in it. Two rules of the cell use what this module works out:

- **start smaller rather than wait** (``Cell._place_smaller``): a task that does not
  fit at its count starts on the most GPUs that fit now, down to its ``min_gpus``.
  Progress on fewer GPUs beats none, and since training scales sub-linearly (in
  Gavel's measured throughputs a 4-GPU job runs 1.1x to 4x as fast as on one GPU),
  fewer GPUs each do more of the job's work: while tasks wait, the cluster does more
  work with small counts.
- **grow into idle GPUs** (``Cell._grow_elastic``): when nothing waits, a running task
  below its ``max_gpus`` takes the idle GPUs of its node when what the growth saves,
  its remaining run time x ``1 - 1 / scaling``, beats restarts (a resize stops the task
  and starts it again from its checkpoint). ``scaling`` is the learned one: the speed
  book's rate of the task's class on the larger count over its rate on the current one
  (both rows learned from progress reports, which count work in the class's own units
  whatever the GPU count, so rows of one class compare). A count the book has never
  seen the class on is taken to scale linearly: optimistic, so the first task of a
  class that may grow does, and its run then teaches the book what the class really
  gains (the probe of a GPU count); a class that does not scale then stops growing.
- **shrink when others wait** (``Cell._shrink_for``): when the head of the queue fits
  nowhere, elastic tasks above their ``min_gpus`` on one node give it the GPUs it lacks
  when its wait for a reservation is at least twice what the shrink costs them
  (``shrink_cost_s``: the rest of their run at the smaller count's rate, and a
  restart). Growth takes GPUs only while nothing waits; this gives them back, and a
  class that scales badly gives them cheaply.

Why grow on the task's own node only: a resize keeps the node (the task's data and
checkpoint are there), and the GPUs a growth takes on one node are ones no queued
task wanted (nothing waits).
"""

from __future__ import annotations

from streams.core.speed_book import SpeedBook

LINEAR = "linear scaling assumed (no run of the class on {k2} GPUs yet)"
"""The basis of ``scaling`` when the book has not seen both counts."""


def smaller_counts(asked: int, elastic: tuple[int, ...]) -> range:
    """The counts to try, most first, for a task of ``asked`` GPUs that does not fit:
    below ``asked`` down to the range's minimum (empty for a task of a fixed count)."""
    if not elastic:
        return range(0)
    return range(min(asked, elastic[1] + 1) - 1, elastic[0] - 1, -1)


def scaling(book: SpeedBook, row_class: str, model: str, k: int, k2: int
            ) -> tuple[float, str]:
    """How many times as fast the class runs on ``k2`` GPUs of ``model`` as on ``k``, and
    the basis in words (for the decision's reason): learned where the book knows both
    rows, else ``k2 / k`` (module docstring)."""
    if row_class and book.knows(row_class, k) and book.knows(row_class, k2):
        here, there = book.estimate(row_class, k, model), book.estimate(row_class, k2, model)
        if here is not None and there is not None and here.rate > 0:
            return there.rate / here.rate, (f"learned: {there.basis} on {k2} GPUs, "
                                            f"{here.basis} on {k}")
    return k2 / k, LINEAR.format(k2=k2)


def shrink_cost_s(left_s: float, factor: float, restart_s: float) -> float:
    """Seconds a shrink adds to a task that runs ``factor`` times as fast on its count as
    on the smaller one, with ``left_s`` still to run there: the slower rest of its run
    and the restart the resize is."""
    return left_s * max(factor - 1.0, 0.0) + restart_s


def saving_s(left_s: float, factor: float) -> float:
    """Seconds a growth that makes the task ``factor`` times as fast saves of the
    ``left_s`` it has still to run (0 when it makes it no faster)."""
    return left_s * (1.0 - 1.0 / factor) if factor > 1.0 else 0.0
