"""Placement: filter, score, combine by weights, pick; with a per-node score cache.

A ``Scheduler`` is a compiled profile (policy instances and weights; built by
``streams.profiles.compile``, above the core). ``place`` chooses a node and GPUs for one task:

1. Feasible nodes: the ``fit`` filter AND every policy's filter.
2. Each policy scores every option (node, and GPU for fractional tasks); the
   option total is the weighted sum. A node's value is its best option;
   equal options on a node are ordered by the GPU tie-break (least free GPU
   first, or lowest index) of the profile.
3. The node with the highest value wins; ties go to the smallest tie-break
   rank (random per node in the benchmark, registration order otherwise).

When every enabled policy is node-local, per-node results are cached per task
shape and only nodes whose ``version`` changed since are re-scored: after one
placement that is one node, so a decision costs a few array operations over
the nodes instead of a full scoring pass. Results are identical either way.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np
from hetsched_core import node_classes, score_feasible, top_k

from streams.core.fit import Fit
from streams.core.policy import (
    GpuTiebreak,
    NodesView,
    OptionRows,
    Options,
    Policy,
    Verdict,
)
from streams.core.profile import Profile
from streams.core.request import MILLI_PER_GPU, TaskRequest
from streams.core.state import ClusterState

DEFAULT_TOP_K = 3
DEFAULT_CACHE_SHAPES = 256
DEDUPE_MIN_NODES = 128
SCALAR_MAX_NODES = 10
SCALAR_MAX_FRACTIONAL_NODES = 5
"""Batches of at most this many nodes are scored in plain Python (``_score_feasible_py``)
when every policy of the profile can (``score_rows``): numpy's fixed cost per call
dominates there. Fewer for fractional tasks, which have an option per GPU (measured:
plain Python is cheaper up to about 12 nodes for whole-GPU tasks, 6 for fractional
ones, whose options with the same node and free share are scored once)."""
_CACHE_KEY = "scheduler.scores"


@dataclass(frozen=True, slots=True)
class Candidate:
    """One scored node: its best option, the total and each policy's term."""

    node: str
    gpus: tuple[int, ...]
    total: float
    terms: Mapping[str, float]
    rank: int


@dataclass(frozen=True, slots=True)
class Reason:
    """Why a decision went the way it did: weights and the top candidates."""

    profile: str
    weights: Mapping[str, float]
    candidates: tuple[Candidate, ...]
    feasible_nodes: int


@dataclass(frozen=True, slots=True)
class PlaceResult:
    """``node`` is -1 when nothing fits; ``verdict`` then says why (if explained)."""

    node: int
    gpus: tuple[int, ...]
    reason: Reason | None
    verdict: Verdict | None = None
    members: tuple[tuple[int, tuple[int, ...]], ...] = ()
    """A gang's members (node slot, GPUs) in rank order; ``node``/``gpus`` are rank 0's."""
    why: str = ""


@dataclass(frozen=True)
class Scheduler:
    """A compiled profile: policy instances, weights and cache settings."""

    profile: Profile
    fit: Fit
    policies: tuple[Policy, ...]
    weights: tuple[float, ...]
    gpu_tiebreak: GpuTiebreak
    cacheable: bool
    top_k: int = DEFAULT_TOP_K
    cache_shapes: int = DEFAULT_CACHE_SHAPES
    filters: tuple[Policy, ...] = field(default=())
    scalar: bool = False
    """Every policy has ``score_rows`` and none filters: a few nodes are scored in plain
    Python (``_score_feasible_py``), with the same results."""
    native: bool = field(init=False)
    """Every policy is in the compiled core (``native_term``: fgd, hetsched, bestfit, speed,
    locality) and none filters: every batch is scored by ``hetsched_core.score_feasible``, with the
    same results as the Python paths, which remain for policies written in Python.
    Derived from the policies (also by ``dataclasses.replace``), never passed."""
    located: Scheduler | None = None
    """Used instead for a task that names its input's node (``input_node``: a workflow
    stage after its predecessor, a located input), e.g. this profile plus ``locality``
    (``streams.profiles.service``); None: this one for every task."""
    speedy: Scheduler | None = None
    """Used instead for a task the scheduler is told speeds of (``TaskRequest.speeds``,
    learned by the cell: ``streams.core.speed_book``), e.g. this profile plus ``speed``
    (``streams.profiles.service``); None: this one. Tasks told nothing keep this
    profile, so their decisions (candidate terms included) are unchanged."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "native", bool(self.policies) and not self.filters and all(
            hasattr(p, "native_term") for p in self.policies))

    @property
    def key(self) -> int:
        return id(self)


class _Entry:
    """Per-node best option of one task shape, valid for the recorded node versions."""

    __slots__ = ("gpu", "terms", "total", "version")

    def __init__(self, n: int, n_policies: int) -> None:
        self.version = np.full(n, -1, np.int64)
        self.total = np.full(n, -np.inf)
        self.gpu = np.full(n, -1, np.int16)
        self.terms = np.zeros((n_policies, n), np.float32)

    def copy(self) -> _Entry:
        """An independent copy (``place_on_copy`` seeds a trial state's cache with one)."""
        dup = object.__new__(_Entry)
        dup.version, dup.total = self.version.copy(), self.total.copy()
        dup.gpu, dup.terms = self.gpu.copy(), self.terms.copy()
        return dup

    def grow(self, n: int) -> None:
        old = self.version.shape[0]
        if n <= old:
            return
        size = max(n, 2 * old)
        self.version = np.concatenate([self.version, np.full(size - old, -1, np.int64)])
        self.total = np.concatenate([self.total, np.full(size - old, -np.inf)])
        self.gpu = np.concatenate([self.gpu, np.full(size - old, -1, np.int16)])
        pad = np.zeros((self.terms.shape[0], size - old), np.float32)
        self.terms = np.concatenate([self.terms, pad], axis=1)


def _entry(state: ClusterState, sched: Scheduler, task: TaskRequest) -> _Entry:
    # get before setdefault: no new dict and OrderedDict built per placement only to be dropped
    caches: dict | None = state.cache.get(_CACHE_KEY)  # type: ignore[assignment]
    if caches is None:
        caches = state.cache[_CACHE_KEY] = {}
    per_sched: OrderedDict | None = caches.get(sched.key)
    if per_sched is None:
        per_sched = caches[sched.key] = OrderedDict()
    key = task.key
    entry = per_sched.get(key)
    if entry is None:
        entry = _Entry(max(state.n, 1), len(sched.policies))
        per_sched[key] = entry
        if len(per_sched) > sched.cache_shapes:
            per_sched.popitem(last=False)
    else:
        per_sched.move_to_end(key)
    entry.grow(state.n)
    return entry


def _score_feasible(state: ClusterState, sched: Scheduler, task: TaskRequest,
                    idx: np.ndarray) -> tuple[np.ndarray, np.ndarray | None, np.ndarray,
                                              list[np.ndarray]]:
    """Best option of each feasible node of ``idx``: (positions in ``idx``, GPU or None
    for one option per node, total, each policy's score)."""
    if sched.native:
        return _score_feasible_native(state, sched, task, idx)
    return _score_feasible_python(state, sched, task, idx)


def _score_feasible_python(state: ClusterState, sched: Scheduler, task: TaskRequest,
                           idx: np.ndarray) -> tuple[np.ndarray, np.ndarray | None,
                                                     np.ndarray, list[np.ndarray]]:
    """``_score_feasible`` for profiles with policies written in Python (and, in tests,
    the oracle of the core's pass): plain Python for a few nodes, numpy for more."""
    if sched.scalar and idx.shape[0] <= (SCALAR_MAX_NODES if not task.fractional
                                         else SCALAR_MAX_FRACTIONAL_NODES):
        return _score_feasible_py(state, sched, task, idx)
    return _score_feasible_np(state, sched, task, idx)


def _score_feasible_native(state: ClusterState, sched: Scheduler, task: TaskRequest,
                           idx: np.ndarray) -> tuple[np.ndarray, np.ndarray | None,
                                                     np.ndarray, list[np.ndarray]]:
    """``_score_feasible`` in the compiled core, for a profile of core policies only."""
    allowed = ([state.model_ids[m] for m in task.gpu_models if m in state.model_ids]
               if task.num_gpu and task.gpu_models else None)
    terms = [(w, p.native_term(task, state))  # type: ignore[attr-defined]
             for p, w in zip(sched.policies, sched.weights, strict=True)]
    return score_feasible(
        state.n, state.version, state.cpu_free, state.mem_free, state.healthy, state.model,
        state.gpu_free, idx,
        (task.cpu_milli, task.memory_mib, task.num_gpu, task.gpu_milli, task.fractional,
         allowed),
        terms, sched.gpu_tiebreak == "least_free", state.max_gpus + 1)


def _score_feasible_np(state: ClusterState, sched: Scheduler, task: TaskRequest,
                       idx: np.ndarray) -> tuple[np.ndarray, np.ndarray | None, np.ndarray,
                                                 list[np.ndarray]]:
    """``_score_feasible`` with numpy arrays over the nodes (any batch size)."""
    view = NodesView(state, idx)
    feasible = sched.fit.filter(task, view)
    for policy in sched.filters:
        feasible &= policy.filter(task, view)
    pos = feasible.nonzero()[0]
    if pos.shape[0] == 0:
        return pos, None, pos, []
    fview = view if pos.shape[0] == idx.shape[0] else NodesView(state, idx[pos])
    options = Options.for_task(task, fview)
    scores = [p.score(task, fview, options) for p in sched.policies]
    if not scores:
        total = np.zeros(len(options))
    else:
        # x * 1.0 is x (and only ever read): skip that pass for the usual single weight 1.
        total = scores[0] if sched.weights[0] == 1.0 and scores[0].dtype == np.float64 else (
            scores[0] * sched.weights[0])
    for s, w in zip(scores[1:], sched.weights[1:], strict=True):
        total = total + s * w
    if not task.fractional:
        # One option per node, in node order: the scores are already per node.
        return pos, None, total, scores
    if sched.gpu_tiebreak == "least_free":
        tb = options.free * (state.max_gpus + 1) + options.gpu
    else:
        tb = options.gpu
    order = np.lexsort((tb, -total, options.node))
    nodes = options.node[order]
    first = np.ones(order.shape[0], bool)
    first[1:] = nodes[1:] != nodes[:-1]
    best = order[first]
    return pos[options.node[best]], options.gpu[best], total[best], [s[best] for s in scores]


def _score_feasible_py(state: ClusterState, sched: Scheduler, task: TaskRequest,
                       idx: np.ndarray) -> tuple[np.ndarray, np.ndarray | None, np.ndarray,
                                                 list[np.ndarray]]:
    """``_score_feasible`` of a few nodes in plain Python (see ``OptionRows``).

    The same feasibility as ``Fit.filter``, the same options in the same order as
    ``Options.for_task``, each policy's ``score_rows`` (equal to its ``score``), the
    same weighted total and, for fractional tasks, the same best option per node
    (highest total, then the GPU tie-break), as the lexsort of the array path picks.
    """
    cpu = state.cpu_free[idx].tolist()
    mem = state.mem_free[idx].tolist()
    healthy = state.healthy[idx].tolist()
    model = state.model[idx].tolist()
    gpus = state.gpu_free[idx].tolist()
    c, m, n_gpu, share = task.cpu_milli, task.memory_mib, task.num_gpu, task.gpu_milli
    fractional = task.fractional
    ids = ({state.model_ids[x] for x in task.gpu_models if x in state.model_ids}
           if n_gpu and task.gpu_models else None)
    pos: list[int] = []
    for i in range(len(cpu)):
        if cpu[i] < c or mem[i] < m or not healthy[i]:
            continue
        if n_gpu:
            if ids is not None and model[i] not in ids:
                continue
            free = gpus[i]
            if fractional:
                if not any(f >= share for f in free):
                    continue
            elif sum(1 for f in free if f == MILLI_PER_GPU) < n_gpu:
                continue
        pos.append(i)
    if not pos:
        return np.zeros(0, np.intp), None, np.zeros(0), []
    at: list[int] = []
    opt_gpu: list[int] = []
    opt_free: list[int] = []
    first: list[int] = []
    for j, i in enumerate(pos):
        if fractional:
            seen: dict[int, int] = {}
            for g, f in enumerate(gpus[i]):
                if f >= share:
                    first.append(seen.setdefault(f, len(at)))
                    at.append(j)
                    opt_gpu.append(g)
                    opt_free.append(f)
        else:
            first.append(len(at))
            at.append(j)
    rows = OptionRows(state, idx[pos], at, [cpu[pos[a]] for a in at],
                      [sum(gpus[pos[a]]) for a in at], [model[pos[a]] for a in at],
                      opt_free if fractional else None, first)
    scores = [p.score_rows(task, rows) for p in sched.policies]  # type: ignore[attr-defined]
    if not scores:
        total = [0.0] * len(at)
    else:
        w0 = sched.weights[0]
        total = list(scores[0]) if w0 == 1.0 else [s * w0 for s in scores[0]]
        for sc, w in zip(scores[1:], sched.weights[1:], strict=True):
            total = [t + s * w for t, s in zip(total, sc, strict=True)]
    if not fractional:
        return (np.array(pos, np.intp), None, np.array(total, np.float64),
                [np.array(s, np.float64) for s in scores])
    least_free = sched.gpu_tiebreak == "least_free"
    width = state.max_gpus + 1
    best: dict[int, int] = {}
    best_key: dict[int, tuple[float, int]] = {}
    for o, a in enumerate(at):
        if first[o] != o and total[o] == total[first[o]]:
            continue  # ties an earlier option of its node (same share, lower GPU index)
        key = (-total[o], opt_free[o] * width + opt_gpu[o] if least_free else opt_gpu[o])
        if a not in best or key < best_key[a]:
            best[a], best_key[a] = o, key
    chosen = [best[a] for a in sorted(best)]
    return (np.array([pos[at[o]] for o in chosen], np.intp),
            np.array([opt_gpu[o] for o in chosen], np.intp),
            np.array([total[o] for o in chosen], np.float64),
            [np.array([s[o] for o in chosen], np.float64) for s in scores])


def _score_nodes(state: ClusterState, sched: Scheduler, task: TaskRequest,
                 idx: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Best option per node of ``idx``: (total, GPU, terms); total -inf where infeasible."""
    total_out = np.full(idx.shape[0], -np.inf)
    gpu_out = np.full(idx.shape[0], -1, np.int16)
    terms_out = np.zeros((len(sched.policies), idx.shape[0]), np.float32)
    at, gpu, total, scores = _score_feasible(state, sched, task, idx)
    if at.shape[0]:
        total_out[at] = total
        if gpu is not None:
            gpu_out[at] = gpu
        for i, s in enumerate(scores):
            terms_out[i, at] = s
    return total_out, gpu_out, terms_out


def _node_classes(state: ClusterState, idx: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Nodes of ``idx`` with identical scoring state: (representatives, class of each).

    Grouped by the exact columns a node-local score reads (``hetsched_core.node_classes``),
    classes in the order their first node appears, that node their representative.
    """
    return node_classes(idx.astype(np.int64, copy=False), state.model, state.cpu_free,
                        state.mem_free, state.healthy, state.gpu_count, state.gpu_free,
                        state.tag_count)


def _evaluate(state: ClusterState, sched: Scheduler, task: TaskRequest, idx: np.ndarray,
              entry: _Entry, at_idx: np.ndarray | slice) -> None:
    """Score nodes ``idx`` into ``entry``; ``at_idx`` indexes the same entries (``idx``,
    or the slice of every node when ``idx`` is all of them: writing through a slice
    costs half what a gather does, which counts when a new task shape scores 20,000
    nodes).

    Many nodes usually share one state (same model, free CPU, memory and GPU
    shares), and node-local policies score them identically, so large batches
    are scored once per distinct state. Node identity reaches scores only
    through ``input_node``, which turns this off.
    """
    if idx.shape[0] >= DEDUPE_MIN_NODES and sched.cacheable and task.input_node is None:
        reps, cls = _node_classes(state, idx)
        total, gpu, terms = _score_nodes(state, sched, task, reps)
        entry.total[at_idx] = total[cls]
        entry.gpu[at_idx] = gpu[cls]
        entry.terms[:, at_idx] = terms[:, cls]
        return
    # Reset the batch, then write the feasible nodes' best options straight into the
    # entry (same values, same float32 rounding of the terms as through a scratch row).
    # Rows all feasible (``at`` is then 0..n-1) are overwritten whole: no reset needed.
    at, gpu_best, total_best, scores = _score_feasible(state, sched, task, idx)
    some_infeasible = at.shape[0] < idx.shape[0]
    if some_infeasible:
        entry.total[at_idx] = -np.inf
        entry.terms[:, at_idx] = 0.0
    if gpu_best is None or some_infeasible:
        entry.gpu[at_idx] = -1
    if at.shape[0]:
        rows = idx[at] if some_infeasible else at_idx
        entry.total[rows] = total_best
        if gpu_best is not None:
            entry.gpu[rows] = gpu_best
        for i, s in enumerate(scores):
            entry.terms[i, rows] = s


def _gpus_for(state: ClusterState, task: TaskRequest, node: int, entry: _Entry) -> tuple[int, ...]:
    if task.fractional:
        return (int(entry.gpu[node]),)
    if task.num_gpu:
        # tolist: one conversion instead of a numpy scalar per GPU (hot in replay).
        return tuple((state.gpu_free[node] == MILLI_PER_GPU).nonzero()[0][: task.num_gpu].tolist())
    return ()


def _gpus_of(state: ClusterState, task: TaskRequest, nodes: list[int],
             entry: _Entry) -> list[tuple[int, ...]]:
    """``_gpus_for`` of several nodes with one numpy call (the reason's candidates)."""
    if task.fractional:
        return [(g,) for g in entry.gpu[nodes].tolist()]
    if task.num_gpu:
        # A row per node (a handful): plain rows beat gathering them into a new array.
        n, free = task.num_gpu, state.gpu_free
        return [tuple([g for g, f in enumerate(free[v].tolist()) if f == MILLI_PER_GPU][:n])
                for v in nodes]
    return [()] * len(nodes)


def _reason(state: ClusterState, sched: Scheduler, task: TaskRequest, entry: _Entry,
            total: np.ndarray, feasible: int) -> Reason:
    """The reason of a placement: the profile's weights and its top candidates.

    The candidates are the ``top_k`` nodes with a finite total: highest total, then
    lowest rank, then lowest node slot (``hetsched_core.top_k``; engine version 2, see
    ``streams.core.engine_version``). The placed node heads them: it is chosen by the
    same total and rank. Python numbers are gathered once per array (tolist) rather than
    one numpy scalar per field: the same values (float32 terms widen exactly)."""
    top = top_k(total, state.rank[: total.shape[0]], min(sched.top_k, feasible))
    names = _names(sched)
    cands = tuple([
        Candidate(state.node_names[v], gpus, t, dict(zip(names, row, strict=True)), r)
        for v, t, r, row, gpus in zip(top, total[top].tolist(), state.rank[top].tolist(),
                                      entry.terms[:, top].T.tolist(),
                                      _gpus_of(state, task, top, entry), strict=True)
    ])
    return Reason(sched.profile.name, dict(zip(names, sched.weights, strict=True)), cands,
                  feasible)


def _names(sched: Scheduler) -> list[str]:
    return [p.name for p in sched.policies]


def _variant(sched: Scheduler, task: TaskRequest) -> Scheduler:
    """The scheduler that places ``task``: ``located`` or ``speedy`` where they apply."""
    if task.input_node is not None and sched.located is not None:
        sched = sched.located
    if task.speeds and sched.speedy is not None:
        sched = sched.speedy
    return sched


def place_on_copy(trial: ClusterState, base: ClusterState, sched: Scheduler,
                  task: TaskRequest, explain: bool = True) -> PlaceResult:
    """``place(trial, sched, task, explain)``, the same answer, for ``trial``: a
    ``ClusterState.copy`` of ``base`` changed since through its own methods only, with
    ``base`` unchanged since the copy.

    ``trial``'s cache starts from ``base``'s per-node results for the shape, so one
    scoring pass covers the nodes ``trial`` changed and those ``base`` changed since it
    last scored the shape, instead of every node; the results of the nodes ``trial`` did
    not change are then written back to ``base``'s cache, where they hold too.

    Why: the cell weighs each swap on a fresh copy of its state (``Cell._swap_places``),
    and scoring every node of two empty caches per swap was a fifth of a Gavel run.
    Sound because a copy keeps ``base``'s node versions and clock, and each change of
    ``trial`` gives its node a version above any ``base`` had (the clock only grows):
    a node whose version is the same in both is the same node, and its results are
    stale in the copied entry exactly when they were in ``base``'s."""
    variant = _variant(sched, task)
    if not variant.cacheable:
        return place(trial, sched, task, explain)
    kept = _entry(base, variant, task)
    seeded = kept.copy()
    caches: dict = trial.cache.setdefault(_CACHE_KEY, {})  # type: ignore[assignment]
    caches.setdefault(variant.key, OrderedDict())[task.key] = seeded
    found = place(trial, sched, task, explain)
    n = base.n
    same = (trial.version[:n] == base.version[:n]).nonzero()[0]
    kept.version[same] = seeded.version[same]
    kept.total[same] = seeded.total[same]
    kept.gpu[same] = seeded.gpu[same]
    kept.terms[:, same] = seeded.terms[:, same]
    return found


def place(state: ClusterState, sched: Scheduler, task: TaskRequest,
          explain: bool = True) -> PlaceResult:
    """Choose a node and GPUs for ``task`` (pure: reads the state, changes only caches)."""
    sched = _variant(sched, task)
    n = state.n
    if sched.cacheable:
        entry = _entry(state, sched, task)
        dirty = (entry.version[:n] != state.version[:n]).nonzero()[0]
    else:
        entry = _Entry(max(n, 1), len(sched.policies))
        dirty = np.arange(n)
    if dirty.shape[0]:
        # ``dirty`` is sorted and distinct: as long as the state, it is every node.
        at_dirty = slice(0, n) if dirty.shape[0] == n else dirty
        _evaluate(state, sched, task, dirty, entry, at_dirty)
        entry.version[at_dirty] = state.version[at_dirty]
    total = entry.total[:n]
    # The value at argmax is the max (argmax is one C call; ndarray.max goes through a
    # Python wrapper): same number, a few microseconds less per placement.
    best = total[total.argmax()] if n else -np.inf
    if best == -np.inf:
        if not explain:
            return PlaceResult(-1, (), None, None)
        verdict = sched.fit.explain(task, NodesView(state, np.arange(n)))
        return PlaceResult(-1, (), Reason(sched.profile.name, {}, (), 0), verdict)
    cand = (total == best).nonzero()[0]
    # ndarray.argmin is what np.argmin calls (through a Python wrapper): the same node.
    node = int(cand[0]) if cand.shape[0] == 1 else int(cand[state.rank[cand].argmin()])
    reason = None
    if explain:
        feasible = int(np.count_nonzero(np.isfinite(total)))
        reason = _reason(state, sched, task, entry, total, feasible)
        first = reason.candidates[0] if reason.candidates else None
        if first is not None and first.node == state.node_names[node]:
            return PlaceResult(node, first.gpus, reason)  # the winner heads the candidates
    return PlaceResult(node, _gpus_for(state, task, node, entry), reason)
