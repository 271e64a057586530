"""The oracle of ``hetsched_core.FragTable``: FGD's F(v) and F(v') in numpy and Python.

F(v) (docs/packing-benchmark.md §4) is the milli-GPU of node v that each typical task
k of the mix could not use, weighted by p_k; it works from two per-(node, k) integer
aggregates, the number of GPUs with at least m_k free and the free share on GPUs with
less than m_k, so that a placement's aftermath is an integer update of them. The sum is
exactly specified: each term is the amount times p_k, added left to right within six
buckets in typical-task order, then the six totals in bucket order (§4's bit-exact
note). ``fragmentation`` states it with ``cumsum`` over many rows, ``ordered_sum`` one
row in plain Python; tests/policies/test_fragmentation_rows.py checks that both agree.
"""

from __future__ import annotations

import bisect
import itertools

import numpy as np

from streams.core.policy import NodesView, Options
from streams.core.request import MILLI_PER_GPU, TaskRequest
from streams.core.state import ClusterState
from streams.policies.fragmentation import TypicalTasks

# Bucket order of the bit-exact note: lack-both, lack-GPU, lack-CPU,
# cpu-task-fits, cpu-task-lacks-CPU, wrong-model.
_LACK_BOTH, _LACK_GPU, _LACK_CPU, _CPU_FITS, _CPU_LACKS, _WRONG_MODEL = range(6)
_BUCKETS = 6
# Row code per (node, typical task): 8*cpu_only + 4*model_ok + 2*enough_gpus + cpu_ok.
FRAG_CODE = 7  # GPU task, right model, enough GPUs, enough CPU: the fragment is frag_lt
_BUCKET_OF_CODE = np.array(
    [_WRONG_MODEL] * 4
    + [_LACK_BOTH, _LACK_GPU, _LACK_CPU, _LACK_GPU]
    + [_CPU_LACKS, _CPU_FITS] * 4,
    np.int64,
)
_BUCKET_LIST = _BUCKET_OF_CODE.tolist()


def columns(typical: TypicalTasks) -> tuple[list[int], list[int], list[int], list[float],
                                            list[int]]:
    """(cpu_milli, gpu_milli, num_gpu, prob, 8 * cpu_only) as Python lists."""
    return (typical.cpu_milli.tolist(), typical.gpu_milli.tolist(), typical.num_gpu.tolist(),
            typical.prob.tolist(), (8 * typical.cpu_only.astype(np.int64)).tolist())


def aggregates(gpu_free: np.ndarray, typical: TypicalTasks) -> tuple[np.ndarray, np.ndarray]:
    """Per node and typical task: #GPUs with free >= m_k, and free share on GPUs below m_k."""
    free = gpu_free[:, :, None]
    below = free < typical.gpu_milli[None, None, :]
    cnt_ge = gpu_free.shape[1] - below.sum(axis=1)
    frag_lt = (free * below).sum(axis=1)
    return cnt_ge, frag_lt


def base_code(model_ok: np.ndarray, typical: TypicalTasks) -> np.ndarray:
    """The node-independent part of the row code: 8*cpu_only + 4*model_ok."""
    return 8 * typical.cpu_only[None, :] + 4 * model_ok.astype(np.int64)


def fragmentation(cpu_free: np.ndarray, idle_milli: np.ndarray, code0: np.ndarray,
                  cnt_ge: np.ndarray, frag_lt: np.ndarray, typical: TypicalTasks) -> np.ndarray:
    """F(v) per row, in milli-GPU; ``code0`` is ``base_code`` of the row's model."""
    code = code0 + (cpu_free[:, None] >= typical.cpu_milli)
    code += 2 * (cnt_ge >= typical.num_gpu)
    amount = np.where(code == FRAG_CODE, frag_lt, idle_milli[:, None])
    rows, k = amount.shape
    spread = np.zeros((rows, _BUCKETS, k))
    flat = (_BUCKET_OF_CODE[code] * k + np.arange(k)) + (np.arange(rows) * (_BUCKETS * k))[:, None]
    spread.reshape(-1)[flat] = amount * typical.prob
    # cumsum adds strictly left to right (a plain sum would add pairwise): first within
    # each bucket in typical-task order, then the six bucket totals in order.
    totals = spread.cumsum(axis=2)[:, :, -1]
    return totals.cumsum(axis=1)[:, -1]


def ordered_sum(cpu_free: int, idle_milli: int, code0: list[int], cnt_ge: list[int],
                frag_lt: list[int], typical: TypicalTasks) -> float:
    """``fragmentation`` of one row in plain Python, to the last bit: each product is the
    same IEEE multiplication, each bucket adds left to right from 0.0 as ``cumsum`` does
    (the zeros it adds for other buckets' slots change nothing, every term being >= 0),
    then the six totals in bucket order."""
    cpu_k, _, num_k, prob_k, _ = columns(typical)
    totals = [0.0] * _BUCKETS
    for c0, ck, nk, pk, cnt, frag in zip(code0, cpu_k, num_k, prob_k, cnt_ge, frag_lt,
                                         strict=True):
        code = c0 + (cpu_free >= ck) + 2 * (cnt >= nk)
        totals[_BUCKET_LIST[code]] += (frag if code == FRAG_CODE else idle_milli) * pk
    f = 0.0
    for t in totals:
        f += t
    return f


def fragmentation_row(gpu_free: list[int], cpu_free: int, model_ok: list[bool],
                      typical: TypicalTasks) -> tuple[list[int], list[int], list[int], float]:
    """One node's (cnt_ge, frag_lt, code0, F(v)) in plain Python, equal to ``aggregates``,
    ``base_code`` and ``fragmentation`` for that row."""
    _, gpu_k, _, _, cpu_only8 = columns(typical)
    slots = len(gpu_free)
    ordered = sorted(gpu_free)
    prefix = [0, *itertools.accumulate(ordered)]
    cnt_ge: list[int] = []
    frag_lt: list[int] = []
    for m in gpu_k:
        below = bisect.bisect_left(ordered, m)
        cnt_ge.append(slots - below)
        frag_lt.append(prefix[below])
    code0 = [c + (4 if ok else 0) for c, ok in zip(cpu_only8, model_ok, strict=True)]
    return cnt_ge, frag_lt, code0, ordered_sum(cpu_free, sum(gpu_free), code0, cnt_ge,
                                               frag_lt, typical)


class OracleFragCache:
    """F(v) and its aggregates for every node of a state, recomputed in full each time."""

    def __init__(self, typical: TypicalTasks, model_names: list[str]) -> None:
        self.typical = typical
        self.model_ok = typical.model_ok(model_names)
        self.cnt_ge = self.frag_lt = self.code0 = np.zeros((0, len(typical)), np.int64)
        self.frag = np.zeros(0)

    def refresh(self, state: ClusterState) -> None:
        n = state.n
        self.cnt_ge, self.frag_lt = aggregates(state.gpu_free[:n], self.typical)
        self.code0 = base_code(self.model_ok[:, state.model[:n]].T, self.typical)
        self.frag = fragmentation(state.cpu_free[:n], state.gpu_free[:n].sum(axis=1),
                                  self.code0, self.cnt_ge, self.frag_lt, self.typical)


def frag_delta(task: TaskRequest, view: NodesView, options: Options,
               typical: TypicalTasks) -> tuple[np.ndarray, np.ndarray]:
    """F(v) and F(v') for every option (node, GPU) of the task."""
    state = view.state
    cache = OracleFragCache(typical, state.model_names)
    cache.refresh(state)
    slots = options.at(view.idx)
    cnt_after = cache.cnt_ge[slots].copy()
    frag_after = cache.frag_lt[slots].copy()
    idle = options.at(view.gpu_idle_milli)
    idle_after = idle
    if task.fractional:
        # The option's GPU goes from a to a - share free.
        a = options.free[:, None]
        b = a - task.gpu_milli
        m = typical.gpu_milli[None, :]
        cnt_after += (b >= m).astype(np.int64) - (a >= m)
        frag_after += b * (b < m) - a * (a < m)
        idle_after = idle - task.gpu_milli
    elif task.num_gpu:
        # n idle GPUs drop from 1000 to 0 free: they leave every "free >= m_k" count.
        cnt_after -= task.num_gpu
        idle_after = idle - task.num_gpu * MILLI_PER_GPU
    cpu = options.at(view.cpu_free)
    after = fragmentation(cpu - task.cpu_milli, idle_after, cache.code0[slots], cnt_after,
                          frag_after, typical)
    return cache.frag[slots], after
