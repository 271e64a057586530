"""How long a task will run, learned from the tasks that finished before it. Pure.

Users' declared runtimes are rare and poor (most tasks declare none; those
that do overstate them), while a cluster's history is rich: the same tenant
runs the same job again and again. So the cell keeps the run times of the
tasks that finished well, by who ran what, and predicts a new task's run
time from its closest peers (Tsafrir, Etsion and Feitelson, "Backfilling
using system-generated predictions rather than user runtime estimates",
IEEE TPDS 2007, which predicts from the same user's last runs):

1. the same tenant's runs of the same job name;
2. the same tenant's runs of the same task class;
3. everyone's runs of that class;
4. everyone's runs with that GPU count;
5. everyone's runs.

The first level with at least ``MIN_RUNS`` runs answers. Each level keeps
the last ``KEEP`` runs of each key, so a prediction follows a job that
changed and memory stays bounded.

A prediction is a distribution, not a point: a running task that outlived
its median is predicted the median of the past runs that lasted longer
still (what the history says of runs that got this far), and, past the
longest one, twice what it ran so far (the doubling of Tsafrir et al.'s
underprediction correction, so its end keeps moving ahead of now).

No clock and no randomness: what is learned depends only on the order in
which the cell saw tasks finish, which replay restores.
"""

from __future__ import annotations

import bisect
from collections import deque
from dataclasses import dataclass, field

MIN_RUNS = 3
"""Fewer runs than this at a level and the next, coarser level answers: one or two runs
are anecdotes (a crash, a debug run), three give a median that one outlier cannot move."""
KEEP = 50
"""Runs kept per key: enough for a p90, few enough that a job whose input grew last week
is predicted from last week, and memory per key is bounded."""
LEVELS = ("name", "class", "class of everyone", "GPU count", "everyone")


@dataclass(frozen=True, slots=True)
class TaskKind:
    """What a task's peers share: who submits it, its job name, class and GPU count."""

    tenant: str
    name: str
    task_class: str
    num_gpu: int
    levels: tuple[tuple[str, tuple[object, ...]], ...] = field(
        init=False, repr=False, compare=False, hash=False)
    """The level and key of each level of peers, closest first (empty parts skipped);
    built once, since the cell asks for predictions on every reservation."""

    def __post_init__(self) -> None:
        levels: list[tuple[str, tuple[object, ...]]] = []
        if self.name:
            levels.append((LEVELS[0], (0, self.tenant, self.name)))
        if self.task_class:
            levels.append((LEVELS[1], (1, self.tenant, self.task_class)))
            levels.append((LEVELS[2], (2, self.task_class)))
        levels += [(LEVELS[3], (3, self.num_gpu)), (LEVELS[4], (4,))]
        object.__setattr__(self, "levels", tuple(levels))


@dataclass(frozen=True, slots=True)
class Prediction:
    """The past run times (seconds, sorted) a task's prediction comes from, and whose."""

    runs: tuple[float, ...]
    level: str
    kind: TaskKind

    @property
    def p50_s(self) -> float:
        return _median(self.runs)

    def total_s(self, ran_s: float = 0.0) -> float:
        """Its whole run time, given it already ran ``ran_s``: the median of the past runs
        longer than that (all of them at the start), else twice ``ran_s``."""
        longer = self.runs[bisect.bisect_right(self.runs, ran_s):]
        return _median(longer) if longer else 2.0 * ran_s

    def basis(self) -> str:
        """Where the prediction comes from, in words (``hetsched explain`` prints it)."""
        k = self.kind
        whose = {
            LEVELS[0]: f"tenant {k.tenant}'s {k.name!r}",
            LEVELS[1]: f"tenant {k.tenant}'s class {k.task_class!r}",
            LEVELS[2]: f"class {k.task_class!r} (all tenants)",
            LEVELS[3]: f"{k.num_gpu}-GPU tasks (all tenants)",
            LEVELS[4]: "all tasks",
        }[self.level]
        return f"p50 of {len(self.runs)} past runs of {whose}"

    def text(self) -> str:
        return f"predicted {_duration(self.p50_s)} ({self.basis()})"


class DurationPredictor:
    """The run times of finished tasks by kind; see the module docstring."""

    def __init__(self, min_runs: int = MIN_RUNS, keep: int = KEEP) -> None:
        if min_runs < 1 or keep < min_runs:
            raise ValueError(f"min_runs must be at least 1 and keep at least min_runs, got "
                             f"min_runs={min_runs}, keep={keep}")
        self.min_runs, self.keep = min_runs, keep
        self._runs: dict[tuple[object, ...], deque[float]] = {}
        self._sorted: dict[tuple[object, ...], tuple[float, ...]] = {}
        self.learned = 0
        """Runs learned so far: the order number of the next one (kept in its record)."""

    def learn(self, kind: TaskKind, ran_s: float) -> None:
        """A task of ``kind`` finished well after running ``ran_s`` seconds."""
        if ran_s < 0:
            raise ValueError(f"ran_s must be 0 or more, got {ran_s!r}")
        for _, key in kind.levels:
            runs = self._runs.get(key)
            if runs is None:
                runs = self._runs[key] = deque(maxlen=self.keep)
            runs.append(ran_s)
            self._sorted.pop(key, None)
        self.learned += 1

    def predict(self, kind: TaskKind) -> Prediction | None:
        """From the closest level with enough runs, or None: nothing is known yet."""
        for level, key in kind.levels:
            runs = self._runs.get(key)
            if runs is not None and len(runs) >= self.min_runs:
                ordered = self._sorted.get(key)
                if ordered is None:
                    ordered = self._sorted[key] = tuple(sorted(runs))
                return Prediction(ordered, level, kind)
        return None


def _median(values: tuple[float, ...]) -> float:
    mid = len(values) // 2
    return values[mid] if len(values) % 2 else (values[mid - 1] + values[mid]) / 2.0


def _duration(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"
