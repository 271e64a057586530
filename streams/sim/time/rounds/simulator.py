"""Gavel's round-based simulator on a job list: ``gavel-las``, ``gavel-fifo``, ``las``.

Source: stanford-futuredata/gavel at c4fa400, ``scheduler/scheduler.py``,
``Scheduler.simulate`` (the continuous-arrival branch its sweep script
``scripts/sweeps/run_sweep_continuous.py`` runs), with ``_update_priorities``,
``_reset_time_run_so_far``, ``_schedule_jobs_on_workers(_helper)``,
``_get_job_steps_and_finish_times`` and ``_done_callback``. What it does, and
where this module differs:

* **Rounds.** Each round every placed job runs ``min(ROUND_S, time it has left
  on its type)``; the round ends when the last of them stops (a round in which
  every job finishes early is shorter than 360 s). Jobs that arrive during a
  round wait for its end (that wait is in their JCT); when nothing runs, the
  clock jumps to the next arrival and a round starts there. A job that finishes
  inside a round completes at its own finish time; its GPU idles until the round
  ends. Preemption and moves between rounds are free in Gavel; here a job that
  runs again after a round off, or on another type, first loses its ``restart_s``
  of the round (checkpoint and restore, as every other policy of ``simulate --mode
  time`` charges it). Gavel's files give 0, so its figures are reproduced.
* **Allocation.** Recomputed only when the job set changed since the last time
  *and* at least ``MIN_RESET_S`` = 1920 s (Gavel's
  ``minimum_time_between_allocation_resets``) passed since the last reset (or
  that was at t = 0). Until then a job that arrived has priority 0 and a
  finished job's share stays unused by the allocation (fair-share policies
  still fill free GPUs with priority-0 jobs; FIFO does not).
* **Time accounting.** ``job_time[j, t]`` starts at ``ROUND_S / 2`` for every
  type; a job that ran adds ``finish - round start`` to its own and to the
  type's ``worker_time``; a reset turns the difference between what the old
  allocation promised and what was received into ``deficits`` (the second sort
  key) and sets every ``job_time`` back to ``ROUND_S / 2`` and ``worker_time``
  to their sum. As in Gavel, the "round start" is the previous round's end, so
  after an idle gap a job's first round counts the gap too.
* **Type order.** Gavel walks ``["v100", "p100", "k80"]`` (hard-coded) for the
  heterogeneity-aware policies and a seeded shuffle of it every round for the
  agnostic ones. Here the fixed order is the node list's order of first
  appearance (``nodes-gavel-36-36-36.csv`` lists V100M16, P100, K80), and the
  shuffle uses a seeded ``numpy.random.Generator`` (Gavel: ``random.Random(seed+5)``),
  so the agnostic runs follow another, equally likely, sequence of orders.
* **Progress in time, not steps.** Gavel counts steps, ``int(throughput * 360)``
  per round, so a job advances up to one step less than 360 s per round (under
  0.8 % of a round for the slowest job type on a K80, far less for most); this
  module advances each job by exactly the seconds it ran on the type, in units
  of its run time alone there (``duration_s@MODEL``).
* **Solver.** HiGHS instead of ECOS: the max-min LP has many optima whenever
  only some jobs are at the minimum; an interior-point solver (ECOS) returns a
  point inside the optimal face, HiGHS a vertex of it, so jobs with slack get
  their time on fewer types.

Pure: inputs are arrays, no I/O, no clock; the only randomness is the seeded
shuffle of the agnostic policy.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from streams.sim.time.rounds import mechanism, policies

#: Gavel's ``time_per_iteration`` in its sweeps: a round is 360 s.
ROUND_S = 360.0
#: Gavel's ``minimum_time_between_allocation_resets`` default (scheduler.py): the
#: allocation is recomputed at most this often, on a change of the job set.
MIN_RESET_S = 1920.0
#: Work left below which a job counts as finished (float round-off of ``w -= s / d``).
DONE_EPS = 1e-9

POLICIES = ("gavel-las", "gavel-fifo", "las")


@dataclass(frozen=True)
class Workload:
    """The jobs: ``duration[i, t]`` = run time alone on type ``t`` (``inf``: cannot run)."""

    job_ids: list[str]
    arrival: np.ndarray  # (N,) seconds, non-decreasing
    duration: np.ndarray  # (N, K) seconds, inf where it cannot run
    scale_factor: np.ndarray  # (N,) GPUs per job
    in_window: np.ndarray  # (N,) bool
    type_names: list[str]  # the K GPU types, in the order of ``duration``'s columns
    restart_s: np.ndarray | None = None
    """(N,) seconds a job loses each time it runs again after a round off or on another
    type (None: nothing, as in Gavel)."""


@dataclass
class Result:
    """Completion times and what the run did."""

    policy: str
    completion: np.ndarray  # (N,) seconds, nan where not finished
    rounds: int = 0
    allocations: int = 0
    end_s: float = 0.0
    stats: dict[str, float] = field(default_factory=dict)
    # Per job, for reports that need more than the completion (``simulate --mode time``);
    # the run's figures do not read them: nan / 0 where a job never ran.
    first_start: np.ndarray = field(default_factory=lambda: np.zeros(0))
    """(N,) when the job first ran, nan if never."""
    run_s: np.ndarray = field(default_factory=lambda: np.zeros(0))
    """(N,) seconds the job held GPUs: from each round's start to its own stop in it."""
    preemptions: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    """(N,) times the job ran in a round, was not finished, and did not run the next."""
    moves: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    """(N,) times the job ran the next round on another GPU type than this one."""


def simulate(
    wl: Workload,
    num_workers: np.ndarray,
    policy: str,
    *,
    type_order: list[int] | None = None,
    seed: int = 0,
    until_window: bool = True,
    round_s: float = ROUND_S,
    min_reset_s: float = MIN_RESET_S,
) -> Result:
    """Run ``policy`` on ``wl`` over ``num_workers[t]`` GPUs of each type.

    ``type_order``: the order in which the per-type queues are walked (default: the
    columns' order). Stops when every window job finished (``until_window`` and some
    job is in the window) or every job did.
    """
    if policy not in POLICIES:
        raise ValueError(f"unknown policy {policy!r}; known: {', '.join(POLICIES)}")
    n_jobs, k = wl.duration.shape
    nw = np.asarray(num_workers, dtype=float)
    order0 = list(range(k)) if type_order is None else list(type_order)
    aware = policy != "las"
    shuffle = not aware  # Gavel shuffles when neither 'Perf' nor 'Packing' is in the name
    fifo = policy == "gavel-fifo"
    rng = np.random.default_rng(seed)
    lp_cache = policies.LPCache()

    runnable = np.isfinite(wl.duration)
    # throughput in "jobs per second" on each type; a row's scale cancels in Gavel's LP
    tput_all = np.where(runnable, 1.0 / np.where(runnable, wl.duration, 1.0), 0.0)
    restart = np.zeros(n_jobs) if wl.restart_s is None else np.asarray(wl.restart_s, float)
    work = np.ones(n_jobs)  # fraction of the job left
    completion = np.full(n_jobs, np.nan)
    job_time = np.zeros((n_jobs, k))
    deficits = np.zeros((n_jobs, k))
    alloc = np.zeros((n_jobs, k))
    in_alloc = np.zeros(n_jobs, dtype=bool)
    worker_time = np.zeros(k)

    # arrival order = Gavel's priority-dict insertion order; an array, rebuilt only when
    # a job arrives or finishes (most rounds change neither)
    active = np.zeros(0, dtype=np.int64)
    next_arrival = 0
    window_left = int(np.count_nonzero(wl.in_window)) if until_window else 0
    stop_on_window = until_window and window_left > 0
    left_total = n_jobs

    now = float(wl.arrival[0]) if n_jobs else 0.0
    last_reset = 0.0
    need_update = False
    round_start = 0.0
    round_end: float | None = None
    # this round's placed jobs, their types and finish times: arrays, so that the
    # per-round accounting below is vectorised (it ran once per job per round)
    run_jobs = np.zeros(0, dtype=np.int64)
    run_types = np.zeros(0, dtype=np.int64)
    run_finish = np.zeros(0)
    run_lost = np.zeros(0)  # the seconds of this round each job loses to its restart
    dispatched = 0.0  # when this round's jobs started
    res = Result(policy=policy, completion=completion, first_start=np.full(n_jobs, np.nan),
                 run_s=np.zeros(n_jobs), preemptions=np.zeros(n_jobs, dtype=np.int64),
                 moves=np.zeros(n_jobs, dtype=np.int64))
    # the last round's unfinished jobs and their types (preemptions and moves)
    stopped = np.zeros(0, dtype=np.int64)
    stopped_types = np.zeros(0, dtype=np.int64)
    ran_jobs, ran_types = stopped, stopped_types  # the same, kept for the restart check
    now_type = np.full(n_jobs, -1, dtype=np.int64)  # scratch: this round's type per job

    while True:
        if stop_on_window and window_left == 0:
            break
        if not stop_on_window and left_total == 0:
            break
        # the round's end is its last finish; else jump to the next arrival
        if run_jobs.size:
            if round_end is not None:
                round_start = round_end
            round_end = float(run_finish.max())
            now = round_end
        elif next_arrival < n_jobs:
            now = max(now, float(wl.arrival[next_arrival]))
        elif active.size and need_update:
            # nothing runs and nothing arrives: Gavel's trace mode forces a reset here
            last_reset = 0.0
        elif active.size:
            break  # what is left can run nowhere: nothing would ever change
        else:
            break

        # account the round that just ended (Scheduler._done_callback); a job runs on
        # one type at a time, so (job, type) pairs are unique and fancy-index updates
        # are exact; np.add.at adds each type's times in the jobs' order, as a loop would
        if run_jobs.size:
            ran = run_finish - round_start
            work[run_jobs] -= (np.maximum(run_finish - dispatched - run_lost, 0.0)
                               / wl.duration[run_jobs, run_types])
            job_time[run_jobs, run_types] += ran
            np.add.at(worker_time, run_types, ran)
            done = work[run_jobs] <= DONE_EPS
            finished = run_jobs[done]
            completion[finished] = run_finish[done]
            res.run_s[run_jobs] += run_finish - dispatched
            stopped, stopped_types = run_jobs[~done], run_types[~done]
            ran_jobs, ran_types = stopped, stopped_types
            run_jobs = run_jobs[:0]
            if finished.size:
                active = active[~np.isin(active, finished)]
                left_total -= finished.size
                window_left -= int(np.count_nonzero(wl.in_window[finished]))
                need_update = True
                if stop_on_window and window_left == 0:
                    break

        # arrivals up to now (Scheduler.add_job)
        upto = max(next_arrival, int(np.searchsorted(wl.arrival, now, side="right")))
        if upto > next_arrival:
            new_jobs = np.arange(next_arrival, upto, dtype=np.int64)
            next_arrival = upto
            active = np.concatenate([active, new_jobs])
            job_time[new_jobs, :] = round_s / 2.0
            deficits[new_jobs, :] = 0.0
            need_update = True
        if not active.size:
            continue

        a = active
        # Scheduler._update_priorities: reset and recompute on a change, at most every 1920 s
        if need_update and (now - last_reset >= min_reset_s or last_reset == 0.0):
            elapsed = now - last_reset
            received = job_time[a] - round_s / 2.0
            should = np.where(in_alloc[a, None], alloc[a], 0.0) * elapsed
            deficits[a] += should - received
            job_time[a] = round_s / 2.0
            worker_time[:] = round_s / 2.0 * len(a)
            last_reset = now
            in_alloc[:] = False
            if fifo:
                new = policies.fifo_perf(tput_all[a], wl.scale_factor[a], nw, wl.type_names)
            else:
                new = policies.max_min_fairness(
                    tput_all[a], wl.scale_factor[a], np.ones(len(a)), nw, aware=aware,
                    cache=lp_cache,
                )
            alloc[a] = new
            in_alloc[a] = True
            need_update = False
            res.allocations += 1

        prio = mechanism.priorities(alloc[a], in_alloc[a], tput_all[a], job_time[a], worker_time)
        order = [order0[j] for j in rng.permutation(k)] if shuffle else order0
        placed = mechanism.assign_round(
            order, prio, deficits[a], np.where(in_alloc[a, None], alloc[a], 0.0), tput_all[a],
            wl.scale_factor[a], nw, skip_zero_priority=fifo,
        )
        sel = np.flatnonzero(placed >= 0)
        if stopped.size:  # who of last round's unfinished jobs runs on, where
            now_type[a[sel]] = placed[sel]
            nt = now_type[stopped]
            res.preemptions[stopped[nt < 0]] += 1
            res.moves[stopped[(nt >= 0) & (nt != stopped_types)]] += 1
            now_type[a[sel]] = -1
            stopped = stopped[:0]
        if sel.size:
            jobs = a[sel]
            types = placed[sel]
            fresh = np.isnan(res.first_start[jobs])
            res.first_start[jobs[fresh]] = now
            # a restart: it ran before, but not last round on this type
            now_type[ran_jobs] = ran_types
            resumed = (res.run_s[jobs] > 0) & (now_type[jobs] != types)
            now_type[ran_jobs] = -1
            run_lost = np.where(resumed, restart[jobs], 0.0)
            left_s = work[jobs] * wl.duration[jobs, types]
            run_finish = now + np.minimum(round_s, run_lost + left_s)
            run_jobs, run_types = jobs, types
            dispatched = now
            res.rounds += 1
        ran_jobs = ran_jobs[:0]  # a round that placed nothing: next round all restart

    res.end_s = now
    res.stats.update(lp_solved=lp_cache.misses, lp_reused=lp_cache.hits)
    return res


__all__ = ["POLICIES", "ROUND_S", "Result", "Workload", "simulate"]
