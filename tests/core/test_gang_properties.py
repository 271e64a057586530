"""Random streams of gangs and one-node tasks (issue 30): no GPU booked twice, never part
of a gang, and the recorded decisions rebuild the same state and are decided again alike."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from streams.core.cell import Cell, Preempted
from streams.core.decisions import Placement
from streams.core.events import NodeAdded, TaskArrived, TaskEnded
from streams.core.profile import get_profile
from streams.core.queue import QueueConfig, TaskMeta
from streams.core.request import MILLI_PER_GPU, TaskRequest
from streams.core.state import ClusterState
from streams.core.step import evolve
from streams.profiles.compile import compile_profile

BESTFIT = compile_profile(get_profile("bestfit"))

nodes_st = st.lists(st.tuples(st.sampled_from([1, 2, 4, 8]), st.sampled_from(["V100", "A100"]),
                              st.sampled_from(["r1", "r2", None])), min_size=2, max_size=6)
op_st = st.one_of(
    st.tuples(st.just("gang"), st.integers(2, 24), st.sampled_from([0, 0, 2, 3]),
              st.sampled_from(["best_effort", "burstable", "guaranteed"])),
    st.tuples(st.just("one"), st.integers(1, 4), st.sampled_from([250, 500, 1000]),
              st.sampled_from(["best_effort", "burstable", "guaranteed"])),
    st.tuples(st.just("end"), st.integers(0, 50), st.just(0), st.just("")),
    st.tuples(st.just("tick"), st.just(0), st.just(0), st.just("")),
)


def _request(i: int, op: tuple) -> TaskRequest | None:
    kind, gpus, extra, _ = op
    if kind == "one":
        return TaskRequest(f"t{i}", 500, 512, 1 if extra < 1000 else gpus, extra)
    nodes = extra if extra and gpus % extra == 0 else 0
    return TaskRequest(f"t{i}", 500, 512, gpus, 1000, nodes=nodes)


def run(nodes: list[tuple], ops: list[tuple]) -> tuple[Cell, list, list]:
    """Play the stream; return the cell, every outcome, and the nodes' events."""
    cell = Cell("p", BESTFIT, QueueConfig(preemption=True), explain=False)
    added = [NodeAdded(f"n{i}", f"node{i}", 8000, 8192, g, m, rack=r)
             for i, (g, m, r) in enumerate(nodes)]
    out: list = []
    for ev in added:
        out += cell.add_node(ev, now_s=0.0)
    for i, op in enumerate(ops):
        t = float(i)
        if op[0] == "end":
            running = sorted(n for n, r in cell.tasks.items() if r.status == "running")
            if running:
                task = running[op[1] % len(running)]
                out += cell.end(TaskEnded(f"e{i}", task), now_s=t)
        elif op[0] == "tick":
            out += cell.tick(f"k{i}", i, now_s=t)
        else:
            req = _request(i, op)
            out += cell.submit(TaskArrived(f"s{i}", req), None, TaskMeta(qos=op[3]), now_s=t)
        for o in out:
            if isinstance(o, Preempted):
                cell.ack_preempted(o.task)
        check_bookings(cell)
    return cell, out, added


def check_bookings(cell: Cell) -> None:
    """What the running tasks hold, counted from the cell's records, is what the state books,
    and no GPU is over-booked; every running gang holds all its members."""
    s = cell.state
    booked = np.zeros_like(s.gpu_free)
    for task, rec in cell.tasks.items():
        if rec.status != "running":
            continue
        members = rec.members or ((rec.node, rec.gpus),)
        if rec.members:
            assert sum(len(g) for _, g in rec.members) == rec.request.num_gpu
            assert len({n for n, _ in rec.members}) == len(rec.members)
            assert len(s.members(task)) == len(rec.members)
        for node, gpus in members:
            for g in gpus:
                booked[s.node_index[node], g] += rec.request.gpu_milli
    for i in range(s.n):
        count = int(s.gpu_count[i])
        assert (booked[i, :count] <= MILLI_PER_GPU).all(), "a GPU booked twice"
        assert (s.gpu_free[i, :count] == MILLI_PER_GPU - booked[i, :count]).all()


@settings(max_examples=100, deadline=None)
@given(nodes_st, st.lists(op_st, min_size=5, max_size=40))
def test_gangs_and_tasks_never_double_book_and_replay_alike(nodes, ops):
    cell, out, added = run(nodes, ops)
    # Every placement is whole: a gang's members add up to its request, all at once.
    for o in out:
        if isinstance(o, Placement) and o.members:
            assert sum(len(g) for _, g in o.members) == cell.tasks[o.task].request.num_gpu
            assert (o.node, o.gpus) == o.members[0]
    # Folding the recorded placements and stops rebuilds the cell's state exactly.
    state = ClusterState()
    for ev in added:
        state = evolve(state, ev)
    for o in out:
        if isinstance(o, Placement):
            state = evolve(state, o)
        elif isinstance(o, Preempted):
            state.release(o.task)
    for task, rec in cell.tasks.items():
        if rec.status == "done" and state.allocation(task) is not None:
            state.release(task)  # ended: the cell's Released is implicit in end()
    n = state.n
    assert (state.gpu_free[:n] == cell.state.gpu_free[:n]).all()
    # The same inputs give the same decisions.
    _, again, _ = run(nodes, ops)
    assert again == out
