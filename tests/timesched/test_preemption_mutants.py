"""Preemption's rules one at a time, as ``streams/core/preemption.py`` documents them.

``./dev mutate`` found these held only through whole-cell scenarios, which never
reached their edges: a node that fits exactly, victims freeing part of a shared GPU,
a GPU model list, a node whose victims cannot make room before one whose can, two
nodes of equal cost, a victim the fit does not need, and ``empty_fit_mask`` at all.
"""

from __future__ import annotations

import numpy as np
import pytest

from streams.core.preemption import (
    VICTIM_OVERHEAD,
    Victim,
    choose_victims,
    empty_fit_mask,
    fits_after,
    is_preemptor,
    may_preempt,
    victim_cost,
)
from streams.core.queue import QueueConfig, TaskMeta
from streams.core.request import TaskRequest
from streams.core.state import ClusterState

CONFIG = QueueConfig()  # preempt_priority 500


def victim(state: ClusterState, task: str, cost: float) -> Victim:
    a = state.allocation(task)
    assert a is not None
    return Victim(task, a.node, a.gpus, a.share_milli, a.cpu_milli, a.memory_mib, cost)


# ---- who may preempt whom ------------------------------------------------------------

def test_a_best_effort_task_is_never_a_preemptor_whatever_its_priority():
    assert not is_preemptor(TaskMeta(priority=900, qos="best_effort"), CONFIG)
    assert is_preemptor(TaskMeta(priority=500, qos="burstable"), CONFIG)
    assert not is_preemptor(TaskMeta(priority=499, qos="burstable"), CONFIG)
    assert is_preemptor(TaskMeta(priority=0, qos="guaranteed"), CONFIG)


def test_only_a_preemptor_stops_only_lower_priority_best_effort_tasks():
    urgent = TaskMeta(priority=500, qos="burstable")
    assert may_preempt(urgent, TaskMeta(priority=499, qos="best_effort"), CONFIG)
    assert not may_preempt(urgent, TaskMeta(priority=500, qos="best_effort"), CONFIG)
    assert not may_preempt(urgent, TaskMeta(priority=0, qos="burstable"), CONFIG)
    plain = TaskMeta(priority=0, qos="burstable")  # not a preemptor
    assert not may_preempt(plain, TaskMeta(priority=-1, qos="best_effort"), CONFIG)
    assert not may_preempt(plain, TaskMeta(priority=-1, qos="burstable"), CONFIG)


# ---- cost ----------------------------------------------------------------------------

def test_victim_cost_is_gpu_milli_held_times_seconds_run_plus_the_overhead():
    assert victim_cost(1000, 1, 0.0) == VICTIM_OVERHEAD
    assert victim_cost(250, 1, 0.5) == 125.0 + VICTIM_OVERHEAD
    assert victim_cost(1000, 2, 10.0) == 20_000.0 + VICTIM_OVERHEAD
    assert victim_cost(1000, 1, -5.0) == VICTIM_OVERHEAD  # a clock skew redoes nothing
    # a CPU-only task counts a tenth of a GPU, so stopping it is not free
    assert victim_cost(0, 0, 10.0) - VICTIM_OVERHEAD == pytest.approx(
        (victim_cost(1000, 1, 10.0) - VICTIM_OVERHEAD) / 10)


# ---- fits_after ----------------------------------------------------------------------

def two_gpu_node(healthy: bool = True) -> ClusterState:
    state = ClusterState(capacity=2, max_gpus=4)
    state.add_node("a", 8000, 16384, 2, "A100")
    state.set_health(0, healthy)
    return state


def test_fits_after_adds_the_victims_cpu_memory_and_gpu_share():
    state = two_gpu_node()
    state.allocate(TaskRequest("v", 6000, 12000, 1, 300), 0, (0,))
    state.allocate(TaskRequest("w", 0, 0, 1, 1000), 0, (1,))
    v = victim(state, "v", 1.0)
    # 2000 CPU and 4384 MiB free, GPU 0 has 700 free: a whole GPU needs v's 300 back
    whole = TaskRequest("x", 8000, 16384, 1, 1000)
    assert fits_after(state, 0, whole, [v])
    assert not fits_after(state, 0, whole, [])
    assert not fits_after(state, 0, TaskRequest("x", 8001, 0), [v])
    assert not fits_after(state, 0, TaskRequest("x", 0, 16385), [v])
    assert not fits_after(state, 0, TaskRequest("x", 8001, 16385), [v])
    assert fits_after(state, 0, TaskRequest("cpu", 2000, 4384), [])  # exactly what is free
    assert not fits_after(state, 0, TaskRequest("cpu", 2001, 0), [])
    # a fractional task fits a GPU with exactly its share free
    assert fits_after(state, 0, TaskRequest("f", 0, 0, 1, 700), [])
    assert not fits_after(state, 0, TaskRequest("f", 0, 0, 1, 701), [])


def test_an_unhealthy_node_fits_nothing():
    state = two_gpu_node(healthy=False)
    assert not fits_after(state, 0, TaskRequest("cpu", 1, 1), [])


def test_fits_after_follows_the_requested_gpu_models():
    state = two_gpu_node()  # A100 is model id 0
    state.add_node("t", 8000, 16384, 2, "T4")
    assert fits_after(state, 0, TaskRequest("x", 0, 0, 1, 1000, ("A100",)), [])
    assert not fits_after(state, 1, TaskRequest("x", 0, 0, 1, 1000, ("A100",)), [])
    assert fits_after(state, 1, TaskRequest("x", 0, 0, 1, 1000, ("T4", "A100")), [])


def test_a_node_without_gpus_fits_no_gpu_task_even_with_no_model_registered():
    state = ClusterState(capacity=1)
    state.add_node("cpu", 8000, 16384, 0, None)
    assert not fits_after(state, 0, TaskRequest("x", 0, 0, 1, 1000, ("A100",)), [])
    assert fits_after(state, 0, TaskRequest("x", 8000, 16384), [])


# ---- choose_victims ------------------------------------------------------------------

def full_cluster(ranks: tuple[int, int] = (0, 1)) -> ClusterState:
    state = ClusterState(capacity=2, max_gpus=2)
    for i, name in enumerate("ab"):
        state.add_node(name, 8000, 16384, 2, "A100", rank=ranks[i])
        state.allocate(TaskRequest(f"{name}0", 1000, 1024, 1, 1000), i, (0,))
        state.allocate(TaskRequest(f"{name}1", 1000, 1024, 1, 1000), i, (1,))
    return state


def test_a_node_whose_victims_cannot_make_room_is_skipped_not_the_end():
    state = full_cluster()
    req = TaskRequest("x", 0, 0, 2, 1000)
    # node a offers one GPU's victim only; node b both
    got = choose_victims(state, req, [victim(state, "a0", 1.0), victim(state, "b0", 5.0),
                                      victim(state, "b1", 5.0)])
    assert got is not None
    node, chosen = got
    assert node == 1
    assert [v.task for v in chosen] == ["b0", "b1"]


def test_the_cheapest_node_wins_and_victims_the_fit_does_not_need_are_dropped():
    state = full_cluster(ranks=(1, 0))  # cost decides before the tie-break rank
    state.allocate(TaskRequest("a-cpu", 100, 100), 0, ())
    req = TaskRequest("x", 0, 0, 2, 1000)
    vs = [victim(state, "a-cpu", 1.0), victim(state, "a0", 2.0), victim(state, "a1", 3.0),
          victim(state, "b0", 4.0), victim(state, "b1", 4.0)]
    node, chosen = choose_victims(state, req, vs)
    assert node == 0  # 2 + 3 < 4 + 4
    assert [v.task for v in chosen] == ["a0", "a1"]  # the CPU-only one frees no GPU


def test_equal_cost_fewer_victims_then_the_tie_break_rank_then_the_first_node():
    req = TaskRequest("x", 0, 0, 1, 1000)
    state = full_cluster(ranks=(5, 2))
    node, chosen = choose_victims(state, req, [victim(state, "a0", 3.0),
                                               victim(state, "b0", 3.0)])
    assert (node, [v.task for v in chosen]) == (1, ["b0"])  # lower rank
    state = full_cluster(ranks=(3, 3))
    node, chosen = choose_victims(state, req, [victim(state, "a0", 3.0),
                                               victim(state, "b0", 3.0)])
    assert (node, [v.task for v in chosen]) == (0, ["a0"])  # same rank: the first node


def test_no_node_can_make_room():
    state = full_cluster()
    assert choose_victims(state, TaskRequest("x", 0, 0, 3, 1000),
                          [victim(state, "a0", 1.0), victim(state, "a1", 1.0)]) is None


# ---- empty_fit_mask ------------------------------------------------------------------

def test_empty_fit_mask_is_the_nodes_whose_capacity_holds_the_request():
    state = ClusterState(capacity=8, max_gpus=4)
    for name, cpu, mem, gpus, model in (("big", 8000, 16384, 4, "A100"),
                                        ("low-cpu", 3999, 16384, 4, "A100"),
                                        ("low-mem", 8000, 8191, 4, "A100"),
                                        ("t4", 8000, 16384, 4, "T4"),
                                        ("two", 8000, 16384, 2, "A100"),
                                        ("sick", 8000, 16384, 4, "A100"),
                                        ("cpu", 4000, 8192, 0, None)):
        state.add_node(name, cpu, mem, gpus, model)
    state.set_health(state.node_index["sick"], False)
    # a full node is still a candidate: the mask is about capacity, not free room
    state.allocate(TaskRequest("busy", 8000, 16384, 4, 1000), 0, (0, 1, 2, 3))

    def mask(req: TaskRequest) -> list[str]:
        ok = empty_fit_mask(state, req)
        assert ok.dtype == np.bool_ and ok.shape == (state.n,)
        return [state.node_names[i] for i in np.flatnonzero(ok)]

    assert mask(TaskRequest("c", 4000, 8192)) == ["big", "t4", "two", "cpu"]
    assert mask(TaskRequest("e", 8000, 16384)) == ["big", "t4", "two"]
    assert mask(TaskRequest("g", 4000, 8192, 3, 1000)) == ["big", "t4"]
    assert mask(TaskRequest("m", 4000, 8192, 1, 1000, ("A100",))) == ["big", "two"]
    assert mask(TaskRequest("m", 4000, 8192, 1, 1000, ("A100", "H100"))) == ["big", "two"]
    assert mask(TaskRequest("m", 4000, 8192, 1, 1000, ("H100",))) == []
