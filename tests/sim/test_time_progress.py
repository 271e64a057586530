"""The time mode's progress bar: only on a terminal, redrawn at most every REDRAW_S."""

from __future__ import annotations

import io
from types import SimpleNamespace
from typing import Any

from streams.sim.time import progress


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def _sim(now_s: float, done: int) -> Any:
    return SimpleNamespace(now_s=now_s, horizon_s=100.0, recorder=SimpleNamespace(done=done),
                           progress=None)


def test_no_bar_off_a_terminal() -> None:
    sim = _sim(0.0, 0)
    assert progress.attach(sim, "p", 10, io.StringIO()) is None
    assert sim.progress is None


def test_bar_redraws_at_most_every_interval() -> None:
    out, clock = _Tty(), [0.0]
    bar = progress.ProgressBar("p", 100.0, 10, out, clock=lambda: clock[0])
    bar(_sim(50.0, 3))
    bar(_sim(60.0, 4))  # same wall instant: not redrawn
    clock[0] += progress.REDRAW_S
    bar(_sim(150.0, 9))
    bar.close(_sim(200.0, 10))
    frames = out.getvalue().split("\r")[1:]
    assert len(frames) == 3
    assert "50%" in frames[0] and "3/10 jobs done" in frames[0]
    assert "draining" in frames[1] and frames[2].endswith("10/10 jobs done \n")
