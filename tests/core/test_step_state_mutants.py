"""A gang through ``step`` and the cluster state's small promises, as documented.

``./dev mutate`` found that no test of the fast selection sent a gang through
``core.step`` (``_decide_gang`` had no test at all: the gang tests call
``streams.core.gang`` directly and the cell has its own path), and that nothing held
these promises of ``ClusterState``: ``touch_all`` marks every node changed with a
clock and a ``free_version`` never seen before (caches and memos compare them for
equality), ``copy`` is a deep snapshot that leaves the original's cache alone,
``members``/``allocation`` name the task and keep rank order, and ``nbytes`` counts
the numpy arrays and not the caches.
"""

from __future__ import annotations

import numpy as np

from streams.core import gang
from streams.core.decisions import Placement, Unschedulable
from streams.core.events import NodeAdded, TaskArrived
from streams.core.policy import Verdict
from streams.core.profile import Profile
from streams.core.request import TaskRequest
from streams.core.state import ClusterState
from streams.core.step import step
from streams.profiles.compile import compile_profile

SCHED = compile_profile(Profile("bf", {"bestfit": 1.0}))


def two_nodes() -> ClusterState:
    state = ClusterState()
    for i, name in enumerate(("a", "b")):
        state, out = step(state, NodeAdded(f"n{i}", name, 8000, 65536, 4, "A100"), SCHED)
        assert out == []
    return state


def test_a_gang_that_fits_is_one_placement_of_every_member():
    state = two_nodes()
    req = TaskRequest("g", 1000, 2048, 8, 1000, nodes=2)
    plan = gang.plan(state, req)
    assert plan is not None
    state, out = step(state, TaskArrived("e7", req), SCHED)
    (p,) = out
    assert isinstance(p, Placement)
    members = tuple((state.node_names[n], g) for n, g in plan.members)
    assert sorted(m[0] for m in members) == ["a", "b"]
    assert all(g == (0, 1, 2, 3) for _, g in members)
    assert p == Placement(decision_id="e7/0", cause_id="e7", task="g", node=members[0][0],
                          gpus=members[0][1], share_milli=1000, cpu_milli=1000,
                          memory_mib=2048, fractional=False, reason=None, members=members,
                          why=plan.why)
    assert p.why
    # evolved: every member holds its node's GPUs, rank 0 first
    assert [(state.node_names[m.node], m.gpus) for m in state.members("g")] == list(members)


def test_a_gang_no_empty_cell_could_hold_is_unresolvable():
    state = two_nodes()
    req = TaskRequest("g", 1000, 2048, 12, 1000, nodes=3)
    why = gang.never_fits(state, req)
    assert why
    state, out = step(state, TaskArrived("e9", req), SCHED)
    assert out == [Unschedulable("e9/0", "e9", "g",
                                 Verdict("unschedulable_and_unresolvable", (why,), "gang"),
                                 None)]
    assert state.allocation("g") is None


def test_a_gang_that_must_wait_is_unschedulable_now():
    state = two_nodes()
    state, _ = step(state, TaskArrived("e3", TaskRequest("t", 0, 0, 1, 1000)), SCHED)
    state, out = step(state, TaskArrived("e4", TaskRequest("g", 0, 0, 8, 1000, nodes=2)),
                      SCHED)
    assert out == [Unschedulable("e4/0", "e4", "g", Verdict(
        "unschedulable", ("no set of nodes holds the whole gang now",), "gang"), None)]


def test_gang_members_keep_rank_order_and_name_the_task():
    state = ClusterState(capacity=4)
    for name in ("a", "b", "c"):
        state.add_node(name, 8000, 65536, 2, "A100")
    state.allocate_gang("g", 100, 200, [(2, (0, 1)), (0, (0, 1)), (1, (1,))])
    alloc = state.allocation("g")
    assert alloc is not None and (alloc.task, alloc.node, alloc.gpus) == ("g", 2, (0, 1))
    assert [(m.task, m.node, m.gpus) for m in state.members("g")] == [
        ("g", 2, (0, 1)), ("g", 0, (0, 1)), ("g", 1, (1,))]
    state.allocate_gang("h", 0, 0, [(1, (0,)), (0, ())])
    assert [m.node for m in state.members("h")] == [1, 0]


def test_a_single_node_task_has_one_member():
    state = ClusterState(capacity=1)
    state.add_node("a", 8000, 65536, 2, "A100")
    state.allocate(TaskRequest("t", 100, 200, 1, 500), 0, (1,))
    (m,) = state.members("t")
    assert (m.task, m.node, m.gpus, m.share_milli) == ("t", 0, (1,), 500)
    assert state.members("nothing") == []


def test_touch_all_marks_every_node_changed_with_values_never_seen_before():
    state = ClusterState(capacity=4)
    seen_versions, seen_free = set(), {state.free_version}
    for name in ("a", "b", "c"):
        state.add_node(name, 1, 1, 0, None)
        seen_versions.add(int(state.version[state.n - 1]))
        seen_free.add(state.free_version)
    before = state.version[: state.n].copy()
    state.touch_all()
    after = state.version[: state.n]
    assert (after != before).all()
    assert len(set(after.tolist())) == 1 and int(after[0]) == state.clock
    assert int(after[0]) not in seen_versions
    assert state.free_version not in seen_free
    assert state.version[state.n:].tolist() == [0] * (state.version.shape[0] - state.n)
    # the next change of one node is newer still
    state.set_health(0, False)
    assert int(state.version[0]) > int(after[1])
    assert state.free_version not in seen_free


def test_copy_is_a_deep_snapshot_that_leaves_the_original_cache():
    state = ClusterState(capacity=2)
    state.add_node("a", 8000, 65536, 2, "A100")
    state.cache["memo"] = 1
    dup = state.copy()
    assert state.cache == {"memo": 1}
    assert dup.cache == {}
    assert dup.catalog is state.catalog
    dup.allocate(TaskRequest("t", 100, 200, 1, 1000), 0, (0,))
    assert state.allocation("t") is None
    assert state.gpu_free[0, :2].tolist() == [1000, 1000]
    assert int(state.cpu_free[0]) == 8000
    dup.add_node("b", 1, 1, 1, "H100")  # a model first seen in the copy: catalog figures
    assert dup.model_fp32_tflops[dup.model_ids["H100"]] > 0
    assert "H100" not in state.model_ids


def test_nbytes_counts_the_state_arrays_and_not_the_caches():
    state = ClusterState(capacity=4, max_gpus=2)
    # per node (4 rows): nine int64 columns and one bool, 2 GPU slots, 3 tag columns;
    # per task (4 rows): four int64 columns and 2 GPU slots; no model figures yet
    expected = 4 * (9 * 8 + 1 + 2 * 8 + 3 * 8) + 4 * (4 * 8 + 2 * 8)
    assert state.nbytes() == expected
    state.cache["big"] = np.zeros(1000)
    assert state.nbytes() == expected


def test_gang_placement_carries_the_reason_it_is_given():
    from streams.core.step import gang_placement

    state = two_nodes()
    req = TaskRequest("g", 0, 0, 8, 1000, nodes=2)
    plan = gang.plan(state, req)
    assert plan is not None
    reason = object()
    p = gang_placement(state, req, plan, "d/3", "c", reason)  # type: ignore[arg-type]
    assert (p.decision_id, p.cause_id, p.reason, p.fractional) == ("d/3", "c", reason, False)
