"""Rack-level locality (issue 7): node, then rack, then the cheapest measured link.

Hand-made cluster: two racks of three 4-GPU nodes plus a third rack of two.
The first stage runs on ``ra-n0``; the second stage (2 GPUs) must land on
``ra-n0`` when it fits, else in rack ``ra``, else wherever ``LinkMetrics`` say
the input moves fastest, and the prices must survive a cell restore.
"""

from __future__ import annotations

import pytest

from streams.core.cell import Cell
from streams.core.decisions import Placement
from streams.core.events import LinkMeasured, NodeAdded, TaskArrived
from streams.core.profile import Profile
from streams.core.queue import QueueConfig, TaskMeta
from streams.core.request import TaskRequest
from streams.core.topology import DEFAULT_CROSS_LINK, DEFAULT_RACK_LINK, Link, default_rack
from streams.profiles.compile import compile_profile
from tests.timesched.helpers import end, running, submit

# bestfit alone would pick the fullest node; locality must outweigh it.
SCHED = compile_profile(Profile("loc", {"bestfit": 1.0, "locality": 10.0}))
NODES = [("ra-n0", "ra"), ("ra-n1", "ra"), ("ra-n2", "ra"),
         ("rb-n0", "rb"), ("rb-n1", "rb"), ("rb-n2", "rb"),
         ("rc-n0", "rc"), ("rc-n1", "rc")]


def make_cell() -> Cell:
    c = Cell("c", SCHED, QueueConfig(), explain=False)
    for i, (name, rack) in enumerate(NODES):
        c.add_node(NodeAdded(f"n{i}", name, 64_000, 262_144, 4, "A100", rack=rack), now_s=0.0)
    return c


def on(c: Cell, node: str, task: str, gpus: int, t: float, **meta: object) -> None:
    """Submit ``task`` while every other node is masked, so it must run on ``node``."""
    others = [c.state.node_index[n] for n, _ in NODES if n != node]
    for i in others:
        c.state.set_health(i, False)
    submit(c, task, gpus=gpus, t=t, **meta)
    for i in others:
        c.state.set_health(i, True)
    assert c.tasks[task].node == node


def second_stage(c: Cell, fill: dict[str, int]) -> str:
    """Run ``extract`` on ra-n0, fill nodes as given (GPUs each), then release ``train``."""
    on(c, "ra-n0", "extract", 1, 1.0)
    for k, (node, gpus) in enumerate(fill.items()):
        on(c, node, f"fill{k}", gpus, 2.0)
    submit(c, "train", gpus=2, t=4.0, depends_on=("extract",))
    out = end(c, "extract", 100.0)
    placed = [o for o in out if isinstance(o, Placement) and o.task == "train"]
    assert len(placed) == 1 and "train" in running(c)
    return placed[0].node


def test_second_stage_lands_on_the_predecessors_node_when_it_fits():
    c = make_cell()
    # bestfit alone would take rb-n0 (exactly 2 GPUs left there)
    assert second_stage(c, {"ra-n1": 3, "rb-n0": 2}) == "ra-n0"


def test_else_on_a_node_of_the_same_rack():
    c = make_cell()
    # ra-n0 cannot take 2 GPUs (3 busy); bestfit alone would prefer the fuller rb-n0.
    node = second_stage(c, {"ra-n0": 3, "rb-n0": 2})
    assert node in ("ra-n1", "ra-n2")


def test_else_where_the_measured_link_is_cheapest():
    c = make_cell()
    # The rack is full; rb and rc are both other racks (bestfit alone: rb-n0, 2 GPUs
    # left); the measurements say rc-n1 is reached at 100 Gb/s, rb's rack at 10 Gb/s.
    c.link(LinkMeasured("l1", "ra-n0", "rb", "rack", 10.0, 50.0), now_s=1.0)
    c.link(LinkMeasured("l2", "rc-n1", "ra-n0", "node", 100.0, 30.0), now_s=1.0)
    node = second_stage(c, {"ra-n0": 3, "ra-n1": 4, "ra-n2": 4, "rb-n0": 2})
    assert node == "rc-n1"
    # and the prices come back after a restore from the cell's records
    r = Cell.restore("c", SCHED, c.meta_record(),
                     [(n, c.node_record(n)) for n in c.nodes],
                     [(t, c.task_record(t)) for t in c.tasks])
    assert r.state.topology.link("ra-n0", "rc-n1") == Link(100.0, 30.0)
    assert r.state.topology.link("rb-n2", "ra-n0") == Link(10.0, 50.0)
    assert r.state.topology.same_rack("rb-n0", "rb-n2")


def test_a_link_measurement_repriced_cached_scores():
    c = make_cell()
    req = TaskRequest("probe", 1000, 1024, 1, 1000, input_node="ra-n0")
    c.state.set_health(c.state.node_index["ra-n0"], False)
    for node in ("ra-n1", "ra-n2"):
        c.state.set_health(c.state.node_index[node], False)
    from streams.core.scheduler import place
    first = place(c.state, SCHED, req, explain=False)
    assert c.state.node_names[first.node] == "rb-n0"  # default prices tie: rank order
    c.link(LinkMeasured("l", "rc-n0", "ra-n0", "node", 400.0, 1.0), now_s=5.0)
    second = place(c.state, SCHED, req, explain=False)
    assert c.state.node_names[second.node] == "rc-n0"
    c.submit(TaskArrived("s", req), None, TaskMeta(), now_s=6.0)


def test_default_topology():
    assert default_rack("rack07-node003") == "rack07"
    assert default_rack("gpu-17") == "node:gpu-17"  # no rack in the name: a rack of its own
    c = Cell("c", SCHED, explain=False)
    c.add_node(NodeAdded("a", "rack01-node000", 1000, 1024, 1, "A100"), now_s=0.0)
    c.add_node(NodeAdded("b", "rack01-node001", 1000, 1024, 1, "A100"), now_s=0.0)
    c.add_node(NodeAdded("c", "rack02-node002", 1000, 1024, 1, "A100"), now_s=0.0)
    topo = c.state.topology
    assert topo.link("rack01-node000", "rack01-node000") is None
    assert topo.link("rack01-node000", "rack01-node001") == DEFAULT_RACK_LINK
    assert topo.link("rack01-node000", "rack02-node002") == DEFAULT_CROSS_LINK
    cost = topo.transfer_s(c.state.node_names, 0, 10_240.0)
    assert cost[0] == 0.0 < cost[1] < cost[2]


def test_bad_link_measurements_are_rejected():
    c = make_cell()
    c.link(LinkMeasured("bad", "ra-n0", "rb", "zone", 10.0, 1.0))
    assert not c.state.topology.rack_links and not c.state.topology.node_links
    with pytest.raises(ValueError):
        c.state.topology.set_link("a", "b", "zone", Link(1.0, 1.0))
