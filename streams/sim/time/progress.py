"""A progress bar on stderr for ``hetsched simulate --mode time`` (issue 31, part 5).

Why here and not in the engine: the simulator core never reads the wall clock (runs
are functions of their inputs); the command line does, to redraw the bar at most
``REDRAW_S`` apart. The engine only calls ``Simulator.progress`` every
``engine.PROGRESS_EVENTS`` events and once at the end. Shown only when stderr is a
terminal, so tests and CI logs stay clean.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import TextIO

from streams.sim.time.engine import Simulator

REDRAW_S = 0.25
WIDTH = 30


class ProgressBar:
    """Simulated time over the horizon (then "draining") and jobs done, redrawn in place."""

    def __init__(self, label: str, horizon_s: float, jobs: int, stream: TextIO | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.label, self.horizon_s, self.jobs = label, max(horizon_s, 1e-9), jobs
        self.stream = stream if stream is not None else sys.stderr
        self.clock = clock
        self.last = -float("inf")
        self.drawn = False

    def __call__(self, sim: Simulator) -> None:
        now = self.clock()
        if now - self.last < REDRAW_S:
            return
        self.last = now
        self.draw(sim.now_s, sim.recorder.done)

    def draw(self, sim_s: float, done: int) -> None:
        frac = min(sim_s / self.horizon_s, 1.0)
        fill = int(frac * WIDTH)
        when = (f"{sim_s / 86_400:.1f}/{self.horizon_s / 86_400:.1f} d" if sim_s <= self.horizon_s
                else f"draining at {sim_s / 86_400:.1f} d")
        self.stream.write(f"\r{self.label} [{'#' * fill}{'.' * (WIDTH - fill)}] "
                          f"{100 * frac:3.0f}% {when}, {done}/{self.jobs} jobs done ")
        self.stream.flush()
        self.drawn = True

    def close(self, sim: Simulator) -> None:
        """The final figures, then a new line (nothing if never drawn)."""
        if self.drawn:
            self.draw(sim.now_s, sim.recorder.done)
            self.stream.write("\n")
            self.stream.flush()


def attach(sim: Simulator, label: str, jobs: int, stream: TextIO | None = None
           ) -> ProgressBar | None:
    """A bar on ``sim`` when ``stream`` (stderr) is a terminal; None otherwise."""
    out = stream if stream is not None else sys.stderr
    if not out.isatty():
        return None
    bar = ProgressBar(label, sim.horizon_s, jobs, out)
    sim.progress = bar
    return bar
