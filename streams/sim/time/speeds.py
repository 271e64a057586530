"""A job's true speed on each GPU model and GPU count (issue 35), from the job CSV.

Why: measured speeds of real training jobs say no datasheet figure predicts where
a job runs best (Gavel's throughputs: a V100 runs a job 0.66x to 11.6x as fast
as a K80, by job type). The generic job CSV can therefore give each job its run
time per model, and the simulator runs the job at that speed on the model it
holds, whatever the scheduler believes.

Columns (docs/simulation.md, "Speeds per GPU model"):

* ``duration_s@MODEL``: run time alone on ``num_gpus`` GPUs of MODEL; a blank cell
  means the job cannot run there. Once a file has any such column, a job runs only
  on the models its row gives a value for (a model without a column is unknown,
  and the simulator cannot run a job at a speed it does not know);
* ``duration1_s@MODEL``: run time alone on one GPU of MODEL (elastic jobs);
* ``min_gpus``, ``max_gpus``: the counts an elastic job may run on.

The rate on ``k`` GPUs is linear between the one-GPU rate (``1 / duration1_s``,
else ``1 / (num_gpus x duration_s)``: linear scaling when nothing says otherwise)
and the ``num_gpus`` rate, and does not grow past the ``num_gpus`` rate.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

DURATION_AT = "duration_s@"
DURATION1_AT = "duration1_s@"
BLIND, ORACLE, LEARNED = "blind", "oracle", "learned"
MODES = (BLIND, ORACLE, LEARNED)
"""``--speeds``: what the scheduler is told of a job's speeds (``told``). Blind (the
default): nothing, every model alike, as before issue 35; oracle: the truth, a
reference no deployed scheduler has; learned: nothing from the simulator, while every
run reports its progress rate to the cell as a node's executor does, and the cell's
speed book (``streams.core.speed_book``) fills ``TaskRequest.speeds`` from what runs
taught, as in the service."""
TOLD_STEP = 0.01
"""Speeds are told rounded to 1 %: measured throughputs are noisier than that, and jobs
of one type then share one request shape (``TaskRequest.key``), which the placement
caches and the cell's memos key on."""


@dataclass(frozen=True, slots=True)
class Speeds:
    """Run times of one job by model, and its range of GPU counts (module docstring).

    ``by_model``: model -> run time alone on ``num_gpus`` GPUs, for the models the job
    may run on. ``default_s``: the run time on a model ``by_model`` does not name
    (the file has no ``duration_s@`` column: every model runs the job at its
    ``duration_s``), None when such a model cannot run it.
    """

    by_model: Mapping[str, float]
    num_gpus: int
    default_s: float | None = None
    one_gpu: Mapping[str, float] = field(default_factory=dict)
    min_gpus: int = 0
    max_gpus: int = 0

    def __post_init__(self) -> None:
        if not self.min_gpus:
            object.__setattr__(self, "min_gpus", self.num_gpus)
        if not self.max_gpus:
            object.__setattr__(self, "max_gpus", self.num_gpus)

    @property
    def models(self) -> tuple[str, ...]:
        """The models the job may run on when the file names them (sorted); () = any."""
        return () if self.default_s is not None else tuple(sorted(self.by_model))

    @property
    def elastic(self) -> bool:
        """The job may run on another count than ``num_gpus``."""
        return self.min_gpus != self.max_gpus

    def one_gpu_s(self) -> float:
        """Run time alone on one GPU of the job's fastest model there: the unit an elastic
        job reports its progress in, so that its runs on different counts (and the runs
        of other jobs of its type, whatever count they asked for) measure alike, as a
        real task's steps per second do."""
        models = self.by_model or {"": self.default_s or 0.0}
        return min(1.0 / self.rate(m, 1) if m else self.num_gpus * t
                   for m, t in models.items())

    def runs_on(self, model: str) -> bool:
        return model in self.by_model or self.default_s is not None

    def run_s(self, model: str) -> float:
        """Run time alone on ``num_gpus`` GPUs of ``model``; KeyError if it cannot run there."""
        d = self.by_model.get(model, self.default_s)
        if d is None:
            raise KeyError(f"the job cannot run on {model!r} (runs on: "
                           f"{', '.join(self.models)})")
        return d

    def rate(self, model: str, gpus: int | None = None) -> float:
        """Share of the job's work done per second on ``gpus`` GPUs of ``model``
        (``num_gpus`` when None); see the module docstring for the interpolation."""
        n = self.num_gpus
        rate_n = 1.0 / self.run_s(model)
        k = n if gpus is None else gpus
        if n <= 1 or k >= n:
            return rate_n  # never faster than on num_gpus GPUs
        one = self.one_gpu.get(model)
        rate_1 = 1.0 / one if one else rate_n / n
        return rate_1 + (rate_n - rate_1) * (max(k, 1) - 1) / (n - 1)



def told(speeds: Speeds | None, mode: str) -> tuple[tuple[str, float], ...]:
    """What a scheduler in ``mode`` is told of a job's speeds (``TaskRequest.speeds``):
    nothing when blind, learned (the cell fills it) or when the job's row names no
    model; else each model's speed against the job's fastest one, rounded to
    ``TOLD_STEP``."""
    if mode not in MODES:
        raise ValueError(f"speeds {mode!r}: one of {', '.join(MODES)}")
    if mode in (BLIND, LEARNED) or speeds is None or not speeds.by_model:
        return ()
    best = min(speeds.by_model.values())
    return tuple((m, round(round(best / d / TOLD_STEP) * TOLD_STEP, 6))
                 for m, d in sorted(speeds.by_model.items()))
