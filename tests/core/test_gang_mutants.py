"""The bounds and messages of streams/core/gang.py's checks, pinned one by one.

Written against the mutants ``./dev mutate streams/core/gang.py`` left alive: each
expected value is worked out by hand from the rule in the function's docstring.
"""

from __future__ import annotations

import numpy as np

from streams.core import gang
from streams.core.request import MILLI_PER_GPU, TaskRequest
from streams.core.state import ClusterState
from streams.core.topology import Link


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


def ranked(*nodes: tuple[str, int, str, int]) -> ClusterState:
    """Nodes as (name, GPUs, model, tie-break rank), 8 CPUs and 8 GiB each, no rack."""
    state = ClusterState(capacity=len(nodes), max_gpus=8)
    for name, gpus, model, rank in nodes:
        state.add_node(name, 8000, 8192, gpus, model, rank)
    return state


def gpus(k: int) -> tuple[int, ...]:
    return tuple(range(k))


def test_exactly_the_cpu_and_memory_asked_and_one_idle_gpu_make_a_member() -> None:
    state = cell(("a", 1000, 1024, 1, "T4"), ("b", 1000, 1024, 1, "T4"))
    found = gang.plan(state, whole(2, cpu=1000, mem=1024))
    assert found is not None and found.members == ((0, (0,)), (1, (0,)))
    # Nodes without a registered rack are each a rack of their own (here: two racks).
    assert found.why == ("gang: 2 nodes, the fewest that hold 2 GPUs, 2 of them whole nodes, "
                         "in 2 racks, one model (T4); the last member takes 1 of 1 idle GPUs "
                         "on b (best fit)")
    assert gang.plan(state, whole(2, cpu=1001, mem=1024)) is None
    assert gang.plan(state, whole(2, cpu=1000, mem=1025)) is None


def test_the_message_counts_whole_nodes_and_names_the_remainder_member() -> None:
    state = cell(("a", 8000, 8192, 4, "V100"), ("b", 8000, 8192, 4, "V100"),
                 ("c", 8000, 8192, 4, "V100"))
    found = gang.plan(state, whole(10))
    # 10 GPUs: a and b whole (4 + 4), the remaining 2 on c; model id 0 is still named.
    assert found is not None and found.members == ((0, gpus(4)), (1, gpus(4)), (2, gpus(2)))
    assert found.why == ("gang: 3 nodes, the fewest that hold 10 GPUs, 2 of them whole nodes, "
                         "in 3 racks, one model (V100); the last member takes 2 of 4 idle "
                         "GPUs on c (best fit)")


def test_a_shape_that_exactly_fits_one_rack_is_placed_and_says_so() -> None:
    state = cell(("a", 8000, 8192, 2, "V100"), ("b", 8000, 8192, 4, "T4"))
    state.topology.add_node("a", "r1")
    state.topology.add_node("b", "r1")
    found = gang.plan(state, whole(4, nodes=2, per_node=2, mixed=True))
    # Exactly two nodes hold 2 GPUs each; a is all taken (whole), b keeps 2 idle.
    assert found is not None and found.members == ((0, gpus(2)), (1, gpus(2)))
    assert found.why == ("gang: 2 x 2 GPUs as asked, 1 of them whole nodes, in 1 rack, "
                         "mixed models")


def test_the_remainder_goes_to_the_node_with_the_fewest_idle_gpus_that_hold_it() -> None:
    state = cell(("a", 8000, 8192, 8, "V100"), ("b", 8000, 8192, 4, "V100"),
                 ("c", 8000, 8192, 2, "V100"))
    found = gang.plan(state, whole(10))
    # a whole (8), the remaining 2 on c (2 idle) rather than b (4 idle, a lower slot).
    assert found is not None and found.members == ((0, gpus(8)), (2, gpus(2)))
    assert found.why == ("gang: 2 nodes, the fewest that hold 10 GPUs, 2 of them whole nodes, "
                         "in 2 racks, one model (V100); the last member takes 2 of 2 idle "
                         "GPUs on c (best fit)")


def test_between_models_the_plan_that_leaves_fewer_gpus_idle_wins() -> None:
    state = ranked(("t0", 4, "T4", 0), ("t1", 4, "T4", 1),
                   ("v0", 4, "V100", 2), ("v1", 2, "V100", 3))
    found = gang.plan(state, whole(6))
    # T4: 4 + 2 of 4 leaves 2 idle; V100: 4 + 2 of 2 leaves none (same nodes, racks, links).
    assert found is not None and found.members == ((2, gpus(4)), (3, gpus(2)))


def test_equal_plans_of_two_models_go_to_the_model_first_by_name() -> None:
    state = ranked(("v0", 4, "V100", 0), ("v1", 4, "V100", 1),
                   ("t0", 4, "T4", 0), ("t1", 4, "T4", 1))
    found = gang.plan(state, whole(8))
    # Same nodes, racks, links, idle GPUs left and ranks: T4 (first by name), not V100
    # (first registered).
    assert found is not None and found.members == ((2, gpus(4)), (3, gpus(4)))
    assert found.why.endswith("one model (T4); the last member takes 4 of 4 idle GPUs on t1 "
                              "(best fit)")


def test_equal_plans_in_two_racks_go_to_the_rack_first_by_name() -> None:
    state = ranked(("x0", 4, "V100", 0), ("x1", 4, "V100", 1),
                   ("y0", 4, "V100", 0), ("y1", 4, "V100", 1))
    for name, rack in (("x0", "rb"), ("x1", "rb"), ("y0", "ra"), ("y1", "ra")):
        state.topology.add_node(name, rack)
    found = gang.plan(state, whole(8))
    # Either rack holds the gang on two whole nodes of equal ranks: ra, first by name.
    assert found is not None and found.members == ((2, gpus(4)), (3, gpus(4)))
    assert found.why == ("gang: 2 nodes, the fewest that hold 8 GPUs, 2 of them whole nodes, "
                         "in 1 rack, one model (V100); the last member takes 4 of 4 idle GPUs "
                         "on y1 (best fit)")


def test_the_slowest_link_counts_every_pair_of_members() -> None:
    nodes = [(f"v{i}", 1, "V100", i) for i in range(4)] + [
        (f"t{i}", 1, "T4", 4 + i) for i in range(4)]
    t4 = ((4, (0,)), (5, (0,)), (6, (0,)), (7, (0,)))
    fast = ranked(*nodes)
    found = gang.plan(fast, whole(4))
    assert found is not None and found.members == ((0, (0,)), (1, (0,)), (2, (0,)), (3, (0,)))
    slow = ranked(*nodes)
    # One slow link between the first and the third V100 member: the T4 nodes, whose
    # slowest link is the default cross-rack one, are now the better choice.
    slow.topology.set_link("v0", "v2", "node", Link(10.0, 5.0))
    found = gang.plan(slow, whole(4))
    assert found is not None and found.members == t4


def test_never_fits_a_mixed_shape_counts_only_nodes_with_the_cpu_and_memory() -> None:
    state = cell(("a", 4000, 4096, 4, "V100"), ("b", 4000, 4096, 4, "V100"),
                 ("c", 4000, 2048, 4, "V100"), ("d", 2000, 4096, 4, "V100"),
                 ("e", 4000, 4096, 4, "A100"))
    mixed = whole(16, cpu=4000, mem=4096, nodes=4, per_node=4, mixed=True)
    assert gang.never_fits(state, mixed) == (
        "asks for 4 nodes with 4 GPUs each (any model); the cell has 3 such nodes")
