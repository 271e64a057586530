"""Fragmentation of a node against the expected task mix (FGD, docs/packing-benchmark.md §4).

``TypicalTasks`` is the task-shape distribution (the shapes covering 95 % of a
task list, as FGD defines it). F(v) itself, per node and after a hypothetical
placement, is computed by the compiled core (``hetsched_core.FragTable``, in
native/src/fragmentation.rs): from two per-(node, typical task) integer aggregates,
the number of GPUs with at least m_k free and the free share on GPUs with less
than m_k, with the floating-point sum in the six-bucket order of §4's bit-exact
note, so scores that differ from 50 only by rounding come out as in the published
runs. Its Python statement, the test oracle, is tests/oracle/fragmentation.py.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING

import numpy as np
from hetsched_core import FragTable

from streams.core.request import TaskRequest

if TYPE_CHECKING:
    from streams.core.state import ClusterState

DEFAULT_COVERAGE = 0.95


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

    def model_ok(self, model_names: list[str]) -> np.ndarray:
        """bool[K, models + 1]: typical task k accepts model id j (last column: no GPU)."""
        out = np.zeros((len(self), len(model_names) + 1), bool)
        for k, spec in enumerate(self.spec):
            for j, name in enumerate(model_names):
                out[k, j] = not spec or name in spec
        return out


class FragCache:
    """F(v) and its aggregates per node, in the compiled core (``hetsched_core.FragTable``).

    Shared by every fragmentation-aware policy and the simulator's metrics: F(v) does
    not depend on the task being placed. ``refresh`` recomputes only the rows of nodes
    whose version changed; ``table.delta`` gives F(v) and F(v') of a placement's options
    (``fgd.frag_delta``). The Python statement of both is tests/oracle/fragmentation.py.
    """

    def __init__(self, typical: TypicalTasks, model_names: list[str]) -> None:
        self.typical = typical
        self.table = FragTable(
            typical.cpu_milli.tolist(), typical.gpu_milli.tolist(), typical.num_gpu.tolist(),
            typical.prob.tolist(), typical.model_ok(model_names).T.tolist())

    def refresh(self, state: ClusterState, idx: np.ndarray | None = None) -> None:
        """Recompute stale rows among ``idx`` (all nodes when None)."""
        self.table.refresh(state.n, state.version, state.gpu_free, state.cpu_free,
                           state.model, idx)

    def frag(self, n: int) -> np.ndarray:
        """F(v) of the first ``n`` nodes, in milli-GPU (a copy)."""
        return self.table.frag(n)


def frag_cache(state: ClusterState, typical: TypicalTasks) -> FragCache:
    """The state's ``FragCache`` for ``typical`` (created on first use)."""
    key = ("fragmentation", id(typical), len(state.model_names))
    cache = state.cache.get(key)
    if cache is None:
        cache = FragCache(typical, state.model_names)
        state.cache[key] = cache
    return cache  # type: ignore[return-value]
