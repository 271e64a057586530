"""How fast each class of task runs on each GPU model, learned from what tasks report. Pure.

No datasheet figure says where a job runs best: in Gavel's measured throughputs a
V100 runs a job 0.66x to 11.6x as fast as a K80 depending on the job, and 8 of
26 job types run faster on a P100 than on a V100 (issue 35). So the cell learns
it. A *row* is what runs alike: a task class at a GPU count. A row's rate on a
model (the task's own units per second, from its progress reports or from its
work over its run time) is the median of the last :data:`KEEP` observations
there: a rate measured while a GPU throttled or a neighbour hogged the memory bus
must not move the estimate far.

A row never seen on a model gets a *filled* estimate, as Gavel's estimator fills
its throughput matrix: a rank-1 model of the logarithms,
``log rate(row, model) = a(row) + b(model)``, fitted to every measured cell, so
what other classes showed of two models' ratio carries over. Each model's
``b`` is pulled toward the catalog's figure (its prior, with the weight of
:data:`PRIOR_WEIGHT` observations), so a model no class has run yet is ranked
by its datasheet until tasks say otherwise, and one measured many times
follows the measurements. A row with no observation at all has no estimate:
nothing is known of how *its* unit of work compares across models, and the
scheduler treats every model alike for it (the probe is what gets a first one).

Only ratios within a row mean anything (rows count in their own units), which
is what :meth:`SpeedBook.relative` gives: each model's speed against the row's
fastest, with the basis of each figure for ``explain``.

No clock and no randomness: the estimates depend only on the order in which
the cell saw the observations, which replay restores.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

KEEP = 50
"""Observations kept per (row, model): enough for a robust median, bounded memory, and
a class whose code changed is soon measured by its new runs."""
PRIOR_WEIGHT = 1.0
"""The catalog's figure counts as this many observations of a model's column: a
datasheet is a guess about deep-learning throughput, so one measured class outweighs
it, yet it still ranks a model nothing has run on yet."""
FIT_ROUNDS = 30
"""Alternating least-squares rounds of the rank-1 fit: each round is exact for one
factor given the other, and 30 settles a matrix of a few hundred rows to well under
a percent (the fill is a ranking aid, not a measurement)."""


Row = tuple[str, int]
"""What runs alike: (task class, GPU count)."""


@dataclass(frozen=True, slots=True)
class Estimate:
    """One row's rate on one model, and where it comes from."""

    rate: float
    """The task's own units per second (only ratios within a row mean anything)."""
    observations: int
    """How many measurements of this row on this model it rests on (0: filled)."""
    basis: str
    """Why we believe it, for ``explain``: measured, or filled and from what."""


def catalog_speeds(catalog: Mapping[str, Any]) -> dict[str, float]:
    """Each catalog model's prior speed: sqrt(FP16 TFLOPS x memory bandwidth), as the
    simulated node side runs work (deep-learning steps are partly compute-, partly
    memory-bound; the geometric mean ranks catalog GPUs as published training
    benchmarks do). ``catalog``: name -> ``GpuModelSpec``."""
    return {name: math.sqrt(spec.fp16_tflops * spec.mem_bandwidth_gbps)
            for name, spec in catalog.items()}


class SpeedBook:
    """Rates per (row, model): measured where observed, filled where not."""

    def __init__(self, prior: Mapping[str, float]) -> None:
        """``prior``: each known model's catalog speed (any unit; only ratios count)."""
        bad = {m: v for m, v in prior.items() if not (math.isfinite(v) and v > 0)}
        if bad:
            raise ValueError(f"prior: a catalog speed must be a positive number: {bad}")
        self._log_prior = {m: math.log(v) for m, v in sorted(prior.items())}
        self._seen: dict[Row, dict[str, deque[float]]] = {}
        self._medians: dict[tuple[Row, str], float] = {}
        """The median of each ``_seen`` deque, worked out when it changes (``observe``)
        rather than at each read: ``measured`` answers every placement's speed note."""
        self._fit: tuple[dict[Row, float], dict[str, float]] | None = None
        self._relative: dict[tuple[Row, tuple[str, ...]],
                             dict[str, tuple[float, Estimate]]] = {}
        """Answers of ``relative`` until an observation changes them (derived only)."""
        self._filled: set[tuple[Row, tuple[str, ...]]] = set()
        """The keys of ``_relative`` whose answer has a filled estimate: the fit, which
        any observation changes, is in them."""
        self._generation: dict[Row, int] = {}
        """Per row, how many times its remembered answers were dropped (``generation``)."""
        self._rates_generation: dict[Row, int] = {}
        """Per row, how many times its rates may have changed (``rates_generation``)."""
        self._filled_rows: set[Row] = set()
        """Rows that had an answer with a filled estimate since their rates generation
        last changed: a caller may still hold its rates (``_recount`` drops the answer
        itself), which move with the fit."""

    def observe(self, task_class: str, num_gpu: int, model: str, rate: float) -> bool:
        """Record a measured rate; False (and nothing recorded) when it cannot be one:
        not a positive finite number, or a model the catalog does not know."""
        if not (math.isfinite(rate) and rate > 0) or model not in self._log_prior:
            return False
        row = (task_class, num_gpu)
        runs = self._seen.setdefault(row, {})
        before = self._medians.get((row, model))
        runs.setdefault(model, deque(maxlen=KEEP)).append(rate)
        after = self._medians[(row, model)] = _median(runs[model])
        if before is not None and after == before:
            self._recount(row)
        else:
            self._fit = None
            self._forget(row)
        return True

    def _recount(self, row: Row) -> None:
        """Drop ``row``'s own remembered answers after an observation that left every
        median as it was (a cell measured before, its median the same): only that cell's
        count, and so its estimate's ``observations`` and ``basis``, changed. The fit reads
        the measured cells' medians alone, and other rows' answers (filled ones too) read
        the fit, their own runs and which cells are measured: all the same, so they stay.

        Why: a class's runs report the same rate on a model run after run (the simulator's
        always do), and dropping every filled answer and the fit at each of them had the
        cell work out every class's speeds again, thousands of times a run."""
        stale = [key for key in self._relative if key[0] == row]
        for key in stale:
            self._relative.pop(key, None)
        self._filled.difference_update(stale)
        self._generation[row] = self._generation.get(row, 0) + 1

    def _forget(self, row: Row) -> None:
        """Drop the remembered ``relative`` answers an observation of ``row`` may change:
        ``row``'s own, and every one with a filled estimate (the fit moved). An answer of
        measured estimates only is a function of its row's observations alone."""
        stale = [key for key in self._relative if key[0] == row]
        stale.extend(self._filled)
        for key in stale:
            self._relative.pop(key, None)
        self._filled.clear()
        changed = {row, *(key[0] for key in stale)}
        for r in changed:
            self._generation[r] = self._generation.get(r, 0) + 1
        for r in changed | self._filled_rows:
            self._rates_generation[r] = self._rates_generation.get(r, 0) + 1
        self._filled_rows.clear()

    def generation(self, task_class: str, num_gpu: int) -> int:
        """A number that changes whenever the row's ``relative`` or ``knows`` may answer
        otherwise than before (its answers were dropped): a caller's memo of them keyed
        by it needs no other invalidation, and an observation of one class leaves the
        memos of classes it cannot change alone."""
        return self._generation.get((task_class, num_gpu), 0)

    def rates_generation(self, task_class: str, num_gpu: int) -> int:
        """``generation`` for what ``knows`` and the rates of ``relative`` answer, without
        the estimates' counts and bases: it stays when an observation left every median
        as it was (``_recount``), so a memo of rates alone survives the many runs that
        report what their class already showed."""
        return self._rates_generation.get((task_class, num_gpu), 0)

    def knows(self, task_class: str, num_gpu: int) -> bool:
        """Has some run taught this row (else every estimate of it is None)?"""
        return (task_class, num_gpu) in self._seen

    def rows(self) -> list[Row]:
        """Every (class, GPU count) some run taught, sorted."""
        return sorted(self._seen)

    def measured(self, task_class: str, num_gpu: int, model: str) -> Estimate | None:
        runs = self._seen.get((task_class, num_gpu), {}).get(model)
        if not runs:
            return None
        n = len(runs)
        return Estimate(self._medians[((task_class, num_gpu), model)], n,
                        f"p50 of {n} measurement{'s' if n != 1 else ''}")

    def estimate(self, task_class: str, num_gpu: int, model: str) -> Estimate | None:
        """The row's rate on ``model``: measured if it ran there, else filled; None when
        the row was never measured anywhere or the model is unknown."""
        measured = self.measured(task_class, num_gpu, model)
        if measured is not None:
            return measured
        row = (task_class, num_gpu)
        if row not in self._seen or model not in self._log_prior:
            return None
        a, b = self._fitted()
        return Estimate(math.exp(a[row] + b[model]), 0, self._fill_basis(row, model))

    def relative(
        self, task_class: str, num_gpu: int, models: list[str]
    ) -> dict[str, tuple[float, Estimate]]:
        """Each of ``models``' speed against the fastest of them for this row (1.0
        there), with its estimate; empty when the row has none.

        Remembered until an observation may change it (``_forget``): the cell asks for
        every running task's row at each of its ticks, and medians and the fill change
        only when a run is learned. The answer is shared: callers must not change it."""
        key = ((task_class, num_gpu), tuple(sorted(set(models))))
        known = self._relative.get(key)
        if known is not None:
            return known
        found = {m: e for m in key[1]
                 if (e := self.estimate(task_class, num_gpu, m)) is not None}
        top = max((e.rate for e in found.values()), default=0.0)
        known = self._relative[key] = {m: (e.rate / top, e) for m, e in found.items()}
        if any(e.observations == 0 for e in found.values()):
            self._filled.add(key)
            self._filled_rows.add(key[0])
        return known

    # -- the rank-1 fill ---------------------------------------------------------------

    def _fitted(self) -> tuple[dict[Row, float], dict[str, float]]:
        if self._fit is None:
            self._fit = self._solve()
        return self._fit

    def _solve(self) -> tuple[dict[Row, float], dict[str, float]]:
        """Alternating least squares on the log-rates, columns ridge-pulled to the prior.

        Sorted iteration everywhere, so the same observations give the same bits."""
        cells = [(row, model, math.log(self._medians[(row, model)]))
                 for row in sorted(self._seen) for model in sorted(self._seen[row])]
        prior = dict(self._log_prior)  # shifted below; the book's own stays as given
        b = dict(prior)
        a: dict[Row, float] = {}
        for _ in range(FIT_ROUNDS):
            sums: dict[Row, list[float]] = {}
            for row, model, y in cells:
                acc = sums.setdefault(row, [0.0, 0.0])
                acc[0] += y - b[model]
                acc[1] += 1.0
            a = {row: s / n for row, (s, n) in sums.items()}
            col: dict[str, list[float]] = {m: [PRIOR_WEIGHT * p, PRIOR_WEIGHT]
                                           for m, p in prior.items()}
            for row, model, y in cells:
                col[model][0] += y - a[row]
                col[model][1] += 1.0
            b = {m: s / n for m, (s, n) in col.items()}
            # The prior's level is arbitrary (catalog units): shift it to where the
            # data put the measured columns, so the pull is on ratios, not on units.
            measured = {m for _, m, _ in cells}
            shift = sum(b[m] - prior[m] for m in measured) / len(measured)
            prior = {m: p + shift for m, p in prior.items()}
        return a, b

    def _fill_basis(self, row: Row, model: str) -> str:
        others = sum(1 for r, runs in self._seen.items() if r != row and model in runs
                     and any(m in runs for m in self._seen[row]))
        if others:
            return (f"filled from {others} other class{'es' if others != 1 else ''} "
                    f"measured on {model} and on a model this one ran on")
        if any(model in runs for runs in self._seen.values()):
            return f"filled from classes measured on {model} and the catalog"
        return f"filled from the catalog's figures for {model}"


def _median(values: deque[float] | list[float]) -> float:
    s = sorted(values)
    n = len(s)
    return s[n // 2] if n % 2 else (s[n // 2 - 1] + s[n // 2]) / 2
