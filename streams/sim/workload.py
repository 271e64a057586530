"""The packing benchmark's arrival sequence and node tie-break ranks (docs/packing-benchmark.md §2).

Drawn from the bit-exact Go generator in the published call order: seed; one
draw discarded; shuffle of the name-sorted tasks; inflation picks (or
removals) to reach ``tune`` x cluster GPU capacity; ten draws discarded;
``Perm(nodes)`` for the ranks.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from streams.core.request import MILLI_PER_GPU, TaskRequest
from streams.sim.gorand import GoRand

STARTUP_DISCARDED_DRAWS = 10


@dataclass(frozen=True, slots=True)
class Workload:
    arrivals: tuple[TaskRequest, ...]
    ranks: tuple[int, ...]


def build_workload(base: Sequence[TaskRequest], n_nodes: int, total_gpus: int, tune: float,
                   seed: int) -> Workload:
    """Arrival sequence and node ranks for one seed (``base`` sorted by name)."""
    rng = GoRand(seed)
    rng.int63()
    seq = list(base)
    rng.shuffle(seq)
    demand = sum(t.gpu_total_milli for t in base)
    target = tune * total_gpus * MILLI_PER_GPU
    if demand < target:
        while True:
            pick = base[rng.intn(len(base))]
            if demand + pick.gpu_milli > target:
                break
            seq.append(pick)
            demand += pick.gpu_total_milli
    elif demand > target:
        while demand > target:
            removed = seq.pop(rng.intn(len(seq)))
            demand -= removed.gpu_total_milli
    for _ in range(STARTUP_DISCARDED_DRAWS):
        rng.int63()
    ranks = rng.perm(n_nodes)
    return Workload(tuple(seq), tuple(ranks))
