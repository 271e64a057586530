"""hetsched's default packing policy (placeholder until tuned; see BENCHMARKS.md)."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from streams.core.request import TaskRequest
from streams.policies.base import GpuTiebreak, NodesView, Options, ScoreOnly
from streams.policies.fgd import frag_delta
from streams.policies.fragmentation import TypicalTasks

NAME = "hetsched"


class Hetsched(ScoreOnly):
    name = NAME
    gpu_tiebreak: GpuTiebreak = "least_free"
    node_local = True

    def __init__(self, typical: TypicalTasks) -> None:
        self.typical = typical

    def score(self, task: TaskRequest, view: NodesView, options: Options) -> np.ndarray:
        delta = frag_delta(task, view, options, self.typical)
        return delta.before - delta.after


def factory(args: Mapping[str, object] | None = None) -> Hetsched:
    args = dict(args or {})
    typical = args.pop("typical", None)
    if not isinstance(typical, TypicalTasks):
        raise ValueError(f"policy {NAME!r} needs 'typical': the TypicalTasks of the workload")
    if args:
        raise ValueError(f"policy {NAME!r}: unknown arguments {sorted(args)}")
    return Hetsched(typical)
