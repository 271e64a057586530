"""Gavel's round mechanism, pure: priorities from an allocation, and who runs next round.

Source: stanford-futuredata/gavel at c4fa400, ``scheduler/scheduler.py``.
"""

from __future__ import annotations

import numpy as np

FloatArray = np.ndarray

#: Gavel's priority for a job with an allocation but no time received yet on any type
#: of its worker type's clock (``new_priority = allocation * 1e9``: "don't use inf so
#: 2*new_priority > new_priority").
UNSEEN_PRIORITY_SCALE = 1e9


def priorities(
    allocation: FloatArray,
    in_allocation: FloatArray,
    throughputs: FloatArray,
    job_time: FloatArray,
    worker_time: FloatArray,
) -> FloatArray:
    """Each (job, type) priority: its allocation over the fraction of the type's time it got.

    ``Scheduler._update_priorities`` (simulation branch): ``fraction = job_time_so_far[j][t]
    / worker_time_so_far[t]`` (0 when the type's time is 0), and the priority is 0 for a
    job the current allocation does not know (it arrived after the allocation was
    computed), 0 where its allocation or its throughput is 0, ``allocation / fraction``
    where the fraction is positive, else ``allocation * 1e9``.

    ``allocation``, ``throughputs``, ``job_time``: (m, n); ``in_allocation``: (m,) bool;
    ``worker_time``: (n,).
    """
    alloc = np.where(in_allocation[:, None], allocation, 0.0)
    wt = np.asarray(worker_time, dtype=float)[None, :]
    with np.errstate(divide="ignore", invalid="ignore"):
        fraction = np.where(wt > 0.0, job_time / np.where(wt > 0.0, wt, 1.0), 0.0)
        prio = np.where(fraction > 0.0, alloc / np.where(fraction > 0.0, fraction, 1.0),
                        alloc * UNSEEN_PRIORITY_SCALE)
    prio = np.where((alloc == 0.0) | (throughputs == 0.0), 0.0, prio)
    return np.asarray(prio, dtype=float)


def assign_round(
    type_order: list[int],
    prio: FloatArray,
    deficits: FloatArray,
    allocation: FloatArray,
    throughputs: FloatArray,
    scale_factors: FloatArray,
    num_workers: FloatArray,
    *,
    skip_zero_priority: bool,
) -> FloatArray:
    """The jobs to run next round and their type: ``-1`` where a job does not run.

    ``Scheduler._schedule_jobs_on_workers_helper`` (no global queue): for each type in
    ``type_order``, the active jobs sorted by (priority, deficit, allocation) descending
    (Python's stable sort: ties keep arrival order); the per-type lists concatenated in
    that order; then, walking the whole list, a job is placed on the entry's type if that
    type has GPUs left, the job is not placed yet, its throughput there is positive (and
    for FIFO policies its priority there is positive: ``skip_zero_priority``) and its
    scale factor fits what is left. Jobs with priority 0 are thus still placed where a
    fair-share policy leaves GPUs free.
    """
    m = prio.shape[0]
    placed = np.full(m, -1, dtype=np.int64)
    left = np.asarray(num_workers, dtype=float).copy()
    idx = np.arange(m)
    unit = bool(np.all(np.asarray(scale_factors, dtype=float) == 1.0))
    for j in type_order:
        if left[j] <= 0:
            continue
        if unit and float(left[j]).is_integer():
            # Fast path (the walk below ran for every job and type every round): with
            # one-GPU jobs on a whole number of free GPUs no job is skipped for its size,
            # so the walk takes the first ``cap`` eligible jobs in sort order. Only jobs
            # whose priority reaches the cap-th largest can be among them, so only those
            # are sorted (a subset in index order: ties still keep arrival order).
            cap = int(left[j])
            ok = (throughputs[:, j] > 0.0) & (placed < 0)
            if skip_zero_priority:
                ok &= prio[:, j] > 0.0
            cand = np.flatnonzero(ok)
            if cand.size > cap:
                p = prio[cand, j]
                cand = cand[p >= np.partition(p, p.size - cap)[p.size - cap]]
            take = cand[np.lexsort((-allocation[cand, j], -deficits[cand, j],
                                    -prio[cand, j]))][:cap]
            placed[take] = j
            left[j] -= float(take.size)
            continue
        # stable descending sort on (prio, deficit, alloc): lexsort's last key is primary
        order = np.lexsort((idx, -allocation[:, j], -deficits[:, j], -prio[:, j]))
        ok = throughputs[order, j] > 0.0
        if skip_zero_priority:
            ok &= prio[order, j] > 0.0
        for i in order[ok].tolist():
            if left[j] <= 0:
                break
            if placed[i] >= 0:
                continue
            s = scale_factors[i]
            if s > left[j]:
                continue
            left[j] -= s
            placed[i] = j
    return placed
