"""Summary figures of a round-simulator run."""

from __future__ import annotations

import numpy as np

from streams.sim.time.rounds.simulator import Result, Workload


def summary(wl: Workload, res: Result) -> dict[str, float | int | None]:
    """Mean JCT (completion minus arrival) of the window jobs and of all finished jobs.

    ``window_jct_mean_s`` is Gavel's measured figure (``Scheduler.get_average_jct`` over
    ``jobs_to_complete``); it is ``None`` if a window job did not finish.
    """
    jct = res.completion - wl.arrival
    done = np.isfinite(jct)
    win = wl.in_window
    win_done = done & win
    out: dict[str, float | int | None] = {
        "jobs": len(jct),
        "jobs_finished": int(np.count_nonzero(done)),
        "jct_mean_s": float(np.mean(jct[done])) if done.any() else None,
        "window_jobs": int(np.count_nonzero(win)),
        "window_jobs_finished": int(np.count_nonzero(win_done)),
        "window_jct_mean_s": (float(np.mean(jct[win]))
                              if win.any() and bool(np.all(done[win])) else None),
        "rounds": res.rounds,
        "allocations": res.allocations,
        "end_s": res.end_s,
    }
    return out
