"""Fragmentation of a node against the expected task mix (FGD, docs/packing-benchmark.md §4).

``TypicalTasks`` is the task-shape distribution (the shapes covering 95 % of a
task list, as FGD defines it). ``fragmentation`` computes F(v) for many node
states at once. It works from two per-(node, typical task) integer aggregates,
the number of GPUs with at least m_k free and the free share on GPUs with less
than m_k, so that the node state after a hypothetical placement is a cheap
integer update of the current one (see ``fgd.py``) instead of a re-scan of
every GPU. The floating-point sum follows the six-bucket order of §4's
bit-exact note, so scores that differ from 50 only by rounding come out as in
the published runs.
"""

from __future__ import annotations

import bisect
import itertools
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING

import numpy as np

from streams.core.request import TaskRequest

if TYPE_CHECKING:
    from streams.core.state import ClusterState

DEFAULT_COVERAGE = 0.95

# Bucket order of the bit-exact note: lack-both, lack-GPU, lack-CPU,
# cpu-task-fits, cpu-task-lacks-CPU, wrong-model.
_LACK_BOTH, _LACK_GPU, _LACK_CPU, _CPU_FITS, _CPU_LACKS, _WRONG_MODEL = range(6)
_BUCKETS = 6
# |F(v') - F(v)| below which the exact ordered sum is used (milli-GPU; residues are ~1e-13).
_NEAR_MILLI = 1e-6
# Rows x typical tasks up to which F is summed in plain Python (``fragmentation_row``,
# ``_ordered_sum``) rather than by a dozen numpy calls: about 1 us per (row, task) against
# some 70 us of fixed numpy cost, so the service's 6-task mix stays scalar up to 16 rows
# (after one placement one node is stale) while trace mixes (35+ tasks) stay vectorized.
_SCALAR_CELLS = 96
# Node states whose F(v) row ``FragCache`` remembers (see ``FragCache.refresh``); the memo
# is emptied when full, which changes nothing but the time of the next refreshes.
ROW_MEMO_MAX = 1 << 16


@dataclass(frozen=True, eq=False)
class TypicalTasks:
    """Typical task shapes k with probabilities p_k (histogram order)."""

    cpu_milli: np.ndarray
    gpu_milli: np.ndarray
    num_gpu: np.ndarray
    spec: tuple[tuple[str, ...], ...]
    prob: np.ndarray

    @staticmethod
    def from_tasks(
        tasks: Iterable[TaskRequest], coverage: float = DEFAULT_COVERAGE
    ) -> TypicalTasks:
        """Shapes by count (ties: shape descending), shortest prefix reaching ``coverage``."""
        hist = Counter(
            (t.cpu_milli, t.gpu_milli, t.num_gpu, "|".join(t.gpu_models)) for t in tasks
        )
        if not hist:
            raise ValueError("typical tasks need at least one task")
        total = sum(hist.values())
        ordered = sorted(hist.items(), key=lambda kv: (kv[1], kv[0]), reverse=True)
        kept: list[tuple[tuple[int, int, int, str], int]] = []
        cum = 0
        for shape, count in ordered:
            kept.append((shape, count))
            cum += count
            if cum >= coverage * total:
                break
        # p_k = (count / total) / (kept / total), in this floating-point order: it is how
        # the published simulator normalises, and the last bits of p_k decide the
        # 49-or-50 scores of the bit-exact note.
        kept_share = cum / total
        return TypicalTasks(
            cpu_milli=np.array([s[0] for s, _ in kept], np.int64),
            gpu_milli=np.array([s[1] for s, _ in kept], np.int64),
            num_gpu=np.array([s[2] for s, _ in kept], np.int64),
            spec=tuple(tuple(p for p in s[3].split("|") if p) for s, _ in kept),
            prob=np.array([(c / total) / kept_share for _, c in kept], np.float64),
        )

    def __len__(self) -> int:
        return int(self.prob.shape[0])

    @cached_property
    def cpu_only(self) -> np.ndarray:
        return self.gpu_milli == 0

    @cached_property
    def columns(self) -> tuple[list[int], list[int], list[int], list[float], list[int]]:
        """(cpu_milli, gpu_milli, num_gpu, prob, 8 * cpu_only) as Python lists (scalar path)."""
        return (self.cpu_milli.tolist(), self.gpu_milli.tolist(), self.num_gpu.tolist(),
                self.prob.tolist(), (8 * self.cpu_only.astype(np.int64)).tolist())

    @cached_property
    def share_table(self) -> np.ndarray:
        """int64[1001, 2K]: what one GPU with ``f`` milli free (row ``f``) adds to a node's
        aggregates: ``f >= m_k`` (to ``cnt_ge``) then ``f`` where ``f < m_k`` (to
        ``frag_lt``). A fractional placement's change of the aggregates is then two
        row lookups (before and after) instead of a dozen array operations."""
        f = np.arange(1001, dtype=np.int64)[:, None]
        m = self.gpu_milli[None, :]
        return np.concatenate([(f >= m).astype(np.int64), f * (f < m)], axis=1)

    @cached_property
    def share_rows(self) -> list[list[int]]:
        """``share_table`` as Python lists (the scheduler's scalar path)."""
        return self.share_table.tolist()

    def model_ok(self, model_names: list[str]) -> np.ndarray:
        """bool[K, models + 1]: typical task k accepts model id j (last column: no GPU)."""
        out = np.zeros((len(self), len(model_names) + 1), bool)
        for k, spec in enumerate(self.spec):
            for j, name in enumerate(model_names):
                out[k, j] = not spec or name in spec
        return out


def aggregates(gpu_free: np.ndarray, typical: TypicalTasks) -> tuple[np.ndarray, np.ndarray]:
    """Per node and typical task: #GPUs with free >= m_k, and free share on GPUs below m_k."""
    free = gpu_free[:, :, None]
    below = free < typical.gpu_milli[None, None, :]
    cnt_ge = gpu_free.shape[1] - below.sum(axis=1)
    frag_lt = (free * below).sum(axis=1)
    return cnt_ge, frag_lt


# Row code per (node, typical task): 8*cpu_only + 4*model_ok + 2*enough_gpus + cpu_ok.
_FRAG_CODE = 7  # GPU task, right model, enough GPUs, enough CPU: the fragment is frag_lt
_BUCKET_OF_CODE = np.array(
    [_WRONG_MODEL] * 4
    + [_LACK_BOTH, _LACK_GPU, _LACK_CPU, _LACK_GPU]
    + [_CPU_LACKS, _CPU_FITS] * 4,
    np.int64,
)


def base_code(model_ok: np.ndarray, typical: TypicalTasks) -> np.ndarray:
    """The node-independent part of the row code: 8*cpu_only + 4*model_ok."""
    return 8 * typical.cpu_only[None, :] + 4 * model_ok.astype(np.int64)


def fragmentation(
    cpu_free: np.ndarray,
    idle_milli: np.ndarray,
    code0: np.ndarray,
    cnt_ge: np.ndarray,
    frag_lt: np.ndarray,
    typical: TypicalTasks,
) -> np.ndarray:
    """F(v) per row, in milli-GPU; ``code0`` is ``base_code`` of the row's model."""
    code = code0 + (cpu_free[:, None] >= typical.cpu_milli)
    code += 2 * (cnt_ge >= typical.num_gpu)
    amount = np.where(code == _FRAG_CODE, frag_lt, idle_milli[:, None])
    rows, k = amount.shape
    spread = np.zeros((rows, _BUCKETS, k))
    flat = (_BUCKET_OF_CODE[code] * k + np.arange(k)) + (np.arange(rows) * (_BUCKETS * k))[:, None]
    spread.reshape(-1)[flat] = amount * typical.prob
    # cumsum adds strictly left to right (a plain sum would add pairwise): first within
    # each bucket in typical-task order, then the six bucket totals in order.
    # (ndarray.cumsum is what np.cumsum calls, without its Python wrapper.)
    totals = spread.cumsum(axis=2)[:, :, -1]
    return totals.cumsum(axis=1)[:, -1]


def fragmentation_near(
    before: np.ndarray,
    cpu_free: np.ndarray,
    idle_milli: np.ndarray,
    code0: np.ndarray,
    cnt_ge: np.ndarray,
    frag_lt: np.ndarray,
    typical: TypicalTasks,
) -> np.ndarray:
    """F(v') per row, exact where it matters for comparisons with ``before`` = F(v).

    A plain vectorized sum is several times cheaper than the ordered six-bucket
    sum but may differ from it in the last bits. That matters only when F(v')
    is within rounding of F(v) (the 49-or-50 cases of the bit-exact note), so
    those rows, and only those, are recomputed with the ordered sum (in Python
    when they are few, see ``_SCALAR_CELLS``).
    """
    # code == _FRAG_CODE (7) exactly when code0 == 4 (a GPU task, right model) and both
    # the CPU and the GPU-count bits are set: three masks instead of building the code.
    frag_rows = (code0 == 4) & (cpu_free[:, None] >= typical.cpu_milli)
    frag_rows &= cnt_ge >= typical.num_gpu
    amount = np.where(frag_rows, frag_lt, idle_milli[:, None])
    fast = amount @ typical.prob
    rows = (np.abs(fast - before) <= _NEAR_MILLI).nonzero()[0]
    if rows.shape[0]:
        if rows.shape[0] * len(typical) <= _SCALAR_CELLS:
            # One gather and one conversion per array for all near rows, not per row.
            for v, cpu, idle, c0, cnt, frag in zip(
                    rows.tolist(), cpu_free[rows].tolist(), idle_milli[rows].tolist(),
                    code0[rows].tolist(), cnt_ge[rows].tolist(), frag_lt[rows].tolist(),
                    strict=True):
                fast[v] = _ordered_sum(cpu, idle, c0, cnt, frag, typical)
        else:
            fast[rows] = fragmentation(cpu_free[rows], idle_milli[rows], code0[rows],
                                       cnt_ge[rows], frag_lt[rows], typical)
    return fast


_BUCKET_LIST = _BUCKET_OF_CODE.tolist()


def fragmentation_row(gpu_free: list[int], cpu_free: int, model_ok: list[bool],
                      typical: TypicalTasks) -> tuple[list[int], list[int], list[int], float]:
    """One node's (cnt_ge, frag_lt, code0, F(v)) in plain Python, bit-identical to
    ``aggregates``, ``base_code`` and ``fragmentation`` for that row (the
    aggregates are integers; F is summed by ``_ordered_sum``). ``model_ok``: the
    node's model column of ``TypicalTasks.model_ok``.
    """
    _, gpu_k, _, _, cpu_only8 = typical.columns
    slots = len(gpu_free)
    # The GPUs sorted once: those below m_k are a prefix (found by bisection) and their
    # free share a prefix sum; mixes repeat m_k (the service's has 3 distinct of 6).
    ordered = sorted(gpu_free)
    prefix = [0, *itertools.accumulate(ordered)]
    cnt_ge: list[int] = []
    frag_lt: list[int] = []
    for m in gpu_k:
        below = bisect.bisect_left(ordered, m)
        cnt_ge.append(slots - below)
        frag_lt.append(prefix[below])
    code0 = [c + (4 if ok else 0) for c, ok in zip(cpu_only8, model_ok, strict=True)]
    return cnt_ge, frag_lt, code0, _ordered_sum(cpu_free, sum(gpu_free), code0, cnt_ge,
                                                frag_lt, typical)


def _ordered_sum(cpu_free: int, idle_milli: int, code0: list[int], cnt_ge: list[int],
                 frag_lt: list[int], typical: TypicalTasks) -> float:
    """``fragmentation`` of one row in plain Python, to the last bit.

    Why identical: each product is the same IEEE multiplication of the integer
    amount by p_k; each bucket adds its products left to right from 0.0 as
    ``cumsum`` does (the zeros ``cumsum`` adds for the other buckets' slots
    change nothing, every term being >= 0); the six totals are then added in
    bucket order.
    """
    cpu_k, _, num_k, prob_k, _ = typical.columns
    totals = [0.0] * _BUCKETS
    for c0, ck, nk, pk, cnt, frag in zip(code0, cpu_k, num_k, prob_k, cnt_ge, frag_lt,
                                         strict=True):
        code = c0 + (cpu_free >= ck) + 2 * (cnt >= nk)
        totals[_BUCKET_LIST[code]] += (frag if code == _FRAG_CODE else idle_milli) * pk
    f = 0.0
    for t in totals:
        f += t
    return f


class FragCache:
    """F(v) and its aggregates per node, refreshed only for nodes whose version changed.

    Shared by every fragmentation-aware policy and the simulator's metrics:
    F(v) does not depend on the task being placed.

    A row is a pure function of the node's GPU free shares, free CPU and model
    (``fragmentation_row``, or ``fragmentation`` for many rows at once, to the
    same bit), so rows refreshed one by one are remembered per node state: nodes
    keep returning to states seen before (empty, one task of a common shape),
    about half of the one-by-one refreshes of the replay benchmark.
    """

    def __init__(self, typical: TypicalTasks, model_names: list[str]) -> None:
        self.typical = typical
        self.model_ok = typical.model_ok(model_names)
        self.version = np.zeros(0, np.int64)
        self.frag = np.zeros(0)
        k = len(typical)
        self.cnt_ge = np.zeros((0, k), np.int64)
        self.frag_lt = np.zeros((0, k), np.int64)
        self.code0 = np.zeros((0, k), np.int64)
        self._rows: dict[tuple[bytes, int, int],
                         tuple[list[int], list[int], list[int], float]] = {}
        """(GPU free row bytes, free CPU, model id) -> ``fragmentation_row`` of it."""

    def _grow(self, n: int) -> None:
        old = self.version.shape[0]
        if n <= old:
            return
        size = max(n, 2 * old)
        k = len(self.typical)
        self.version = np.concatenate([self.version, np.full(size - old, -1, np.int64)])
        self.frag = np.concatenate([self.frag, np.zeros(size - old)])
        for name in ("cnt_ge", "frag_lt", "code0"):
            arr = getattr(self, name)
            setattr(self, name, np.concatenate([arr, np.zeros((size - old, k), np.int64)]))

    def refresh(self, state: ClusterState, idx: np.ndarray | None = None) -> None:
        """Recompute stale rows among ``idx`` (all nodes when None)."""
        n = state.n
        self._grow(n)
        if idx is None:
            stale = (self.version[:n] != state.version[:n]).nonzero()[0]
        else:
            stale = idx[self.version[idx] != state.version[idx]]
        if stale.shape[0] == 0:
            return
        if stale.shape[0] * len(self.typical) <= _SCALAR_CELLS:
            memo = self._rows
            gpu_free, cpu_free, model = state.gpu_free, state.cpu_free, state.model
            for v in stale.tolist():
                key = (gpu_free[v].tobytes(), int(cpu_free[v]), int(model[v]))
                row = memo.get(key)
                if row is None:
                    if len(memo) >= ROW_MEMO_MAX:
                        memo.clear()
                    row = memo[key] = fragmentation_row(
                        gpu_free[v].tolist(), key[1], self.model_ok[:, key[2]].tolist(),
                        self.typical)
                self.cnt_ge[v], self.frag_lt[v], self.code0[v], self.frag[v] = row
                self.version[v] = state.version[v]
            return
        cnt, frag = aggregates(state.gpu_free[stale], self.typical)
        code0 = base_code(self.model_ok[:, state.model[stale]].T, self.typical)
        self.cnt_ge[stale] = cnt
        self.frag_lt[stale] = frag
        self.code0[stale] = code0
        self.frag[stale] = fragmentation(state.cpu_free[stale], state.gpu_free[stale].sum(axis=1),
                                         code0, cnt, frag, self.typical)
        self.version[stale] = state.version[stale]


def frag_cache(state: ClusterState, typical: TypicalTasks) -> FragCache:
    """The state's ``FragCache`` for ``typical`` (created on first use)."""
    key = ("fragmentation", id(typical), len(state.model_names))
    cache = state.cache.get(key)
    if cache is None:
        cache = FragCache(typical, state.model_names)
        state.cache[key] = cache
    return cache  # type: ignore[return-value]
