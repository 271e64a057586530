"""The bounds and messages of streams/core/gang.py's checks, pinned one by one.

Written against the mutants ``./dev mutate streams/core/gang.py`` left alive: each
expected value is worked out by hand from the rule in the function's docstring.
"""

from __future__ import annotations

import numpy as np

from streams.core import gang
from streams.core.request import MILLI_PER_GPU, TaskRequest
from streams.core.state import ClusterState


def cell(*nodes: tuple[str, int, int, int, str | None]) -> ClusterState:
    """Nodes as (name, CPU milli, memory MiB, GPUs, model)."""
    state = ClusterState(capacity=len(nodes), max_gpus=8)
    for rank, (name, cpu, mem, gpus, model) in enumerate(nodes):
        state.add_node(name, cpu, mem, gpus, model, rank)
    return state


def whole(gpus: int, *models: str, cpu: int = 1000, mem: int = 1024, nodes: int = 0,
          per_node: int = 0, mixed: bool = False) -> TaskRequest:
    return TaskRequest("g", cpu, mem, gpus, MILLI_PER_GPU, tuple(models), nodes=nodes,
                       gpus_per_node=per_node, mixed_models=mixed)


def test_a_gang_is_more_whole_gpus_than_the_largest_node_of_its_models() -> None:
    ones = cell(("a", 8000, 8192, 1, "T4"), ("b", 8000, 8192, 1, "T4"))
    assert gang.is_gang(ones, whole(2))          # two 1-GPU nodes: 2 GPUs span both
    assert not gang.is_gang(ones, whole(1))
    assert not gang.is_gang(ones, TaskRequest("g", 1000, 1024, 2, 500))  # shares: no gang
    assert not gang.is_gang(ones, whole(2, "A100"))  # no node of its model: not a gang
    eights = cell(("a", 8000, 8192, 8, "V100"), ("b", 8000, 8192, 8, "V100"))
    assert not gang.is_gang(eights, whole(8)) and gang.is_gang(eights, whole(9))
    assert gang.is_gang(eights, whole(2, nodes=2, per_node=1))  # a shape is a gang


def test_the_largest_node_counts_only_gpu_nodes_of_the_asked_models() -> None:
    state = cell(("cpu", 8000, 8192, 0, None), ("t4", 8000, 8192, 4, "T4"),
                 ("v", 8000, 8192, 2, "V100"))
    assert gang.largest_node(state, whole(1)) == 4
    assert gang.largest_node(state, whole(1, "V100")) == 2
    assert gang.largest_node(state, whole(1, "A100")) == 0


def test_the_model_mask_keeps_what_it_was_given_and_only_the_asked_models() -> None:
    state = cell(("cpu", 8000, 8192, 0, None), ("one", 8000, 8192, 1, "V100"),
                 ("t4", 8000, 8192, 1, "T4"), ("v", 8000, 8192, 1, "V100"))
    everything = np.ones(4, bool)
    assert gang.model_mask(state, whole(1), everything).tolist() == [False, True, True, True]
    given = np.array([True, False, True, True])
    assert gang.model_mask(state, whole(1, "V100"), given).tolist() == [
        False, False, False, True]


def test_never_fits_counts_nodes_of_the_shape_with_enough_cpu_and_memory() -> None:
    state = cell(("a", 4000, 4096, 4, "V100"), ("b", 4000, 4096, 4, "V100"),
                 ("c", 4000, 2048, 4, "V100"),   # too little memory: not such a node
                 ("d", 2000, 4096, 4, "V100"),   # too little CPU
                 ("e", 4000, 4096, 4, "A100"))
    shaped = whole(8, cpu=4000, mem=4096, nodes=2, per_node=4)
    assert gang.never_fits(state, shaped) is None          # a and b: exactly 2, exactly 4 each
    assert gang.never_fits(state, whole(12, cpu=4000, mem=4096, nodes=3, per_node=4)) == (
        "asks for 3 nodes with 4 GPUs each (any model); the cell has 2 such nodes")
    mixed = whole(12, cpu=4000, mem=4096, nodes=3, per_node=4, mixed=True)
    assert gang.never_fits(state, mixed) is None           # a, b and the A100 e
    assert gang.never_fits(state, whole(4, "H100", nodes=1, per_node=4)) == (
        "asks for 1 nodes with 4 GPUs each (H100); the cell has 0 such nodes")
    assert gang.never_fits(state, whole(10, "A100", "V100", nodes=2, per_node=5)) == (
        "asks for 2 nodes with 5 GPUs each (A100/V100); the cell has 0 such nodes")


def test_never_fits_counts_gpus_of_one_model_unless_mixing_is_allowed() -> None:
    state = cell(("a", 4000, 4096, 4, "V100"), ("b", 4000, 4096, 4, "V100"),
                 ("c", 4000, 2048, 4, "V100"), ("e", 4000, 4096, 4, "A100"))
    assert gang.never_fits(state, whole(8, cpu=4000, mem=4096)) is None   # exactly 8 V100
    assert gang.never_fits(state, whole(9, cpu=4000, mem=4096)) == (
        "asks for 9 GPUs (any model) of one model; the cell has 8")
    assert gang.never_fits(state, whole(12, cpu=4000, mem=4096, mixed=True)) is None
    assert gang.never_fits(state, whole(13, "A100", "V100", cpu=4000, mem=4096,
                                        mixed=True)) == (
        "asks for 13 GPUs (A100/V100); the cell has 12")
    assert gang.never_fits(state, whole(2, "H100")) == (
        "asks for 2 GPUs (H100) of one model; the cell has 0")
