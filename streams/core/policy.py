"""The policy plugin contract: one small interface, data in, numpy arrays out.

A policy sees a task (``TaskRequest``) and a ``NodesView`` (the candidate
nodes' arrays, gathered once per decision) and implements two methods:

``filter(task, view) -> bool[len(view)]``
    Which candidate nodes can host the task. Called before ``score``; must be
    pure and idempotent. A policy with no constraint returns all True.

``score(task, view, options) -> float[len(options)]``
    Higher is better, one value per candidate placement (``Options``: a node
    of the view and, for fractional tasks, the GPU the share goes on). Called
    only with feasible options. Scores of the published baselines are
    integers (truncated, as in the paper's simulator) so ties are exact.

Attributes: ``name`` (registry name), ``gpu_tiebreak`` (how equal-scored GPUs
of one node are ordered: ``least_free`` or ``lowest_index``) and
``node_local`` (the score of a node depends only on that node's state, the
task and the policy's arguments; the core then caches scores per node and
re-scores only nodes that changed). Policies keep only validated arguments;
per-decision scratch data lives in the view.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal, Protocol, runtime_checkable

import numpy as np

from streams.core.request import TaskRequest

if TYPE_CHECKING:
    from streams.core.state import ClusterState

GpuTiebreak = Literal["least_free", "lowest_index"]
# the codes of DecisionReason (schemas/events/decisions.py), and "ok"
VerdictCode = Literal["ok", "unschedulable", "unschedulable_and_unresolvable", "error"]


@dataclass(frozen=True, slots=True)
class Verdict:
    """Why a task could not be placed: a code, human-readable reasons, the policy."""

    code: VerdictCode
    reasons: tuple[str, ...]
    policy: str


class _lazy:
    """Compute an attribute once per instance (a lock-free ``cached_property``).

    A non-data descriptor: after the first access the value sits in the
    instance ``__dict__`` and plain attribute lookup finds it directly.
    """

    def __init__(self, fn):  # type: ignore[no-untyped-def]
        self.fn = fn
        self.name = fn.__name__
        self.__doc__ = fn.__doc__

    def __get__(self, obj, owner=None):  # type: ignore[no-untyped-def]
        if obj is None:
            return self
        value = self.fn(obj)
        obj.__dict__[self.name] = value
        return value


class NodesView:
    """Arrays of a subset of nodes (``idx`` into the state), gathered lazily."""

    def __init__(self, state: ClusterState, idx: np.ndarray) -> None:
        self.state = state
        self.idx = idx

    def __len__(self) -> int:
        return int(self.idx.shape[0])

    @_lazy
    def cpu_free(self) -> np.ndarray:
        return self.state.cpu_free[self.idx]

    @_lazy
    def mem_free(self) -> np.ndarray:
        return self.state.mem_free[self.idx]

    @_lazy
    def gpu_free(self) -> np.ndarray:
        """Free milli-share per GPU slot, shape (nodes, max_gpus); absent GPUs are 0."""
        return self.state.gpu_free[self.idx]

    @_lazy
    def gpu_count(self) -> np.ndarray:
        return self.state.gpu_count[self.idx]

    @_lazy
    def gpu_idle_milli(self) -> np.ndarray:
        """Total free milli-GPU of each node (T in the packing benchmark)."""
        return np.add.reduce(self.gpu_free, axis=1)  # .sum(axis=1) without its wrapper

    @_lazy
    def model(self) -> np.ndarray:
        """GPU model id per node (-1: no GPU)."""
        return self.state.model[self.idx]

    @_lazy
    def healthy(self) -> np.ndarray:
        return self.state.healthy[self.idx]

    @_lazy
    def tag_count(self) -> np.ndarray:
        return self.state.tag_count[self.idx]

    @_lazy
    def rank(self) -> np.ndarray:
        return self.state.rank[self.idx]

    def per_model(self, figures: np.ndarray) -> np.ndarray:
        """Broadcast a per-model-id figure to the nodes (0 for GPU-less nodes)."""
        padded = np.append(figures, 0.0)
        return padded[self.model]


@dataclass(frozen=True, slots=True)
class Options:
    """Candidate placements: a node position in the view, and a GPU (-1: not one GPU)."""

    node: np.ndarray
    gpu: np.ndarray
    _free: np.ndarray | None = field(default=None, repr=False)
    per_node: bool = False
    """True when the options are the view's nodes themselves, in order (``node`` is
    ``arange``): then ``at`` skips the gather."""

    def __len__(self) -> int:
        return int(self.node.shape[0])

    def at(self, per_view_node: np.ndarray) -> np.ndarray:
        """A per-node array of the view, one value per option (read it, do not write it)."""
        return per_view_node if self.per_node else per_view_node[self.node]

    @staticmethod
    def for_task(task: TaskRequest, view: NodesView) -> Options:
        """One option per node, or one per fitting GPU for a fractional task."""
        nodes = np.arange(len(view))
        if not task.fractional:
            return Options(nodes, np.full(len(view), -1, np.int64), per_node=True)
        fits = view.gpu_free >= task.gpu_milli
        node, gpu = fits.nonzero()  # what np.nonzero calls, without its wrapper
        return Options(node, gpu, view.gpu_free[node, gpu])

    @property
    def free(self) -> np.ndarray:
        """Free share of the option's GPU (fractional tasks only)."""
        if self._free is None:
            raise ValueError("free share is defined only for per-GPU options")
        return self._free


@dataclass(slots=True)
class OptionRows:
    """The options of a few nodes as Python lists: the scheduler's scalar path.

    Scoring a handful of options with a dozen numpy calls costs mostly the calls'
    fixed overhead, so when few nodes are re-scored the scheduler builds the same
    options (same order as ``Options.for_task``: by node, then GPU) as plain lists
    and calls ``score_rows`` of policies that have it. ``score_rows`` must return
    exactly the floats ``score`` would (same IEEE operations in the same order; any
    batch operation such as a matrix product or ``exp`` done with numpy on the same
    batch), which tests/policies/test_scalar_scores.py checks.
    """

    state: ClusterState
    nodes: np.ndarray
    """The feasible nodes (state slots), each once, in order."""
    at: list[int]
    """Per option: its node's position in ``nodes``."""
    cpu_free: list[int]
    idle_milli: list[int]
    model: list[int]
    free: list[int] | None
    """Per option: free share of its GPU (fractional tasks), else None."""
    first: list[int]
    """Per option: the first option with the same node and free share (itself if none
    before it). Such options have the same node-local score: policies may compute it
    once and copy it (their batch operations still see every option)."""


def trunc(value: float) -> float:
    """``np.trunc`` of one float, signed zero included (-0.3 -> -0.0); inf and nan are
    kept as they are (``math.trunc`` raises on them)."""
    if not math.isfinite(value):
        return value
    return math.copysign(float(math.trunc(value)), value)


@runtime_checkable
class Policy(Protocol):
    """A filter/score plugin; see the module docstring for the contract."""

    name: str
    gpu_tiebreak: GpuTiebreak
    node_local: bool

    def filter(self, task: TaskRequest, view: NodesView) -> np.ndarray: ...

    def score(self, task: TaskRequest, view: NodesView, options: Options) -> np.ndarray: ...


class ScoreOnly:
    """Mixin for policies that add no constraint of their own."""

    def filter(self, task: TaskRequest, view: NodesView) -> np.ndarray:
        return np.ones(len(view), bool)
