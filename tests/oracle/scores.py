"""The oracle of the compiled FGD-family scores (native/src/score.rs, ``FragTable.scores``).

score = the policy's formula at y = x / scale, with x = F(v) - F(v')
(``fragmentation.frag_delta``) less, for hetsched, the growth of the free milli-GPU the
node's free CPU cannot feed at the mix's ratio (times its weight) and the scarcity
pressure of the option's model (times its weight and the milli-GPU taken). FGD's formula
is trunc(1 / (1 + exp(-y)) * 100), hetsched's trunc(100 / (1 + exp(-y))). Each is a step
function of y; its value is the number of its step points at most y, where the step
points are the smallest doubles at which it reaches 1..100, found here by bisection over
the doubles with ``math.exp``. The core holds them as constants.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Callable
from functools import cache

import numpy as np

from streams.core.policy import NodesView, Options
from streams.core.request import TaskRequest
from tests.oracle.fragmentation import frag_delta

FORMULAS: dict[str, Callable[[float], int]] = {
    "fgd": lambda y: math.trunc(1.0 / (1.0 + math.exp(-y)) * 100),
    "hetsched": lambda y: math.trunc(100 / (1.0 + math.exp(-y))),
}


def _order(x: float) -> int:
    """Doubles as integers in their numeric order (adjacent doubles differ by 1)."""
    bits = struct.unpack("<q", struct.pack("<d", x))[0]
    return bits if bits >= 0 else -(bits & 0x7FFF_FFFF_FFFF_FFFF)


def _double(order: int) -> float:
    if order >= 0:
        return float(struct.unpack("<d", struct.pack("<q", order))[0])
    return -float(struct.unpack("<d", struct.pack("<q", -order))[0])


@cache
def steps(form: str) -> np.ndarray:
    """The smallest double y at which ``FORMULAS[form]`` reaches k, for k = 1..100."""
    f = FORMULAS[form]
    out = []
    for k in range(1, 101):
        lo, hi = _order(-60.0), _order(60.0)  # f is 0 at -60 and 100 at 60
        while hi - lo > 1:
            mid = (lo + hi) // 2
            lo, hi = (lo, mid) if f(_double(mid)) >= k else (mid, hi)
        out.append(_double(hi))
    return np.array(out)


def sigmoid_centile(form: str, y: np.ndarray) -> np.ndarray:
    """The formula's value per element of y, by its steps; NaN stays NaN."""
    count = np.searchsorted(steps(form), y, side="right").astype(np.float64)
    return np.where(np.isnan(y), np.nan, count)


def stranded(cpu_free: np.ndarray, idle_milli: np.ndarray, ratio: float) -> np.ndarray:
    """Free milli-GPU the node's free CPU cannot feed at the mix's ratio."""
    return np.maximum(0.0, idle_milli - cpu_free * ratio)


def scores(task: TaskRequest, view: NodesView, options: Options, typical, form: str,  # type: ignore[no-untyped-def]
           scale: float, strand: tuple[float, float] | None = None,
           pressure: tuple[float, np.ndarray] | None = None) -> np.ndarray:
    """The score of every option (``fgd.frag_scores``'s contract)."""
    before, after = frag_delta(task, view, options, typical)
    x = before - after
    taken = task.gpu_milli if task.fractional else task.gpu_total_milli
    cpu = options.at(view.cpu_free)
    idle = options.at(view.gpu_idle_milli)
    if strand is not None:
        ratio, weight = strand
        growth = stranded(cpu - task.cpu_milli, idle - taken, ratio) - stranded(cpu, idle, ratio)
        x = x - (growth if weight == 1.0 else weight * growth)
    if pressure is not None:
        with np.errstate(invalid="ignore"):  # an infinite weight times a zero pressure
            x = x - pressure[0] * pressure[1] * taken
    return sigmoid_centile(form, x / scale)
