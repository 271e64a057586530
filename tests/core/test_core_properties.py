"""Invariants of the core under any sequence of submissions and finishes (hypothesis)."""

from __future__ import annotations

import dataclasses

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from streams.core import scheduler
from streams.core.decisions import Placement
from streams.core.events import NodeAdded, TaskArrived, TaskEnded
from streams.core.profile import BUILTIN_PROFILES
from streams.core.request import TaskRequest
from streams.core.state import ClusterState
from streams.core.step import step
from streams.policies.fragmentation import TypicalTasks
from streams.profiles.compile import compile_profile

MODELS = ("T4", "V100M16", "A100", "G2")
TYPICAL = TypicalTasks.from_tasks([
    TaskRequest("a", 4000, 0, 1, 500), TaskRequest("b", 8000, 0, 1, 1000),
    TaskRequest("c", 2000, 0, 0, 0), TaskRequest("d", 16000, 0, 2, 1000),
    TaskRequest("e", 4000, 0, 1, 250, ("T4",)),
], coverage=1.0)

nodes_st = st.lists(
    st.tuples(st.integers(1, 64).map(lambda c: c * 1000),
              st.integers(1, 64).map(lambda m: m * 1024),
              st.sampled_from((0, 1, 2, 4, 8)), st.sampled_from(MODELS)),
    min_size=1, max_size=6,
)
task_st = st.tuples(
    st.integers(0, 32).map(lambda c: c * 500), st.integers(0, 16).map(lambda m: m * 512),
    st.sampled_from((0, 1, 1, 1, 2, 4)), st.integers(1, 1000),
    st.sampled_from(((), ("T4",), ("V100M16", "A100"))),
)
ops_st = st.lists(st.one_of(task_st.map(lambda t: ("submit", t)),
                            st.integers(0, 40).map(lambda i: ("finish", i))),
                  min_size=1, max_size=40)
policy_st = st.sampled_from(sorted(BUILTIN_PROFILES))


def run(nodes, ops, policy, cacheable=True):
    # Cached runs also group identical nodes from 2 nodes up, so that grouping is
    # checked against the plain, uncached path.
    saved = scheduler.DEDUPE_MIN_NODES
    scheduler.DEDUPE_MIN_NODES = 2 if cacheable else saved
    try:
        return _run(nodes, ops, policy, cacheable)
    finally:
        scheduler.DEDUPE_MIN_NODES = saved


def _run(nodes, ops, policy, cacheable):
    sched = compile_profile(BUILTIN_PROFILES[policy], {"typical": TYPICAL, "seed": 7})
    if not cacheable:
        sched = dataclasses.replace(sched, cacheable=False)
    state = ClusterState(capacity=2)
    for i, (cpu, mem, gpus, model) in enumerate(nodes):
        state, _ = step(state, NodeAdded(f"n{i}", f"node-{i}", cpu, mem, gpus, model), sched)
    decisions, submitted = [], []
    for j, (kind, arg) in enumerate(ops):
        if kind == "submit":
            cpu, mem, n, m, models = arg
            req = TaskRequest(f"t{j}", cpu, mem, n, m if n else 0, models if n else ())
            submitted.append(req)
            state, out = step(state, TaskArrived(f"e{j}", req), sched)
        else:
            if not submitted:
                continue
            victim = submitted[arg % len(submitted)].task
            state, out = step(state, TaskEnded(f"e{j}", victim), sched)
        decisions.extend(out)
        check_invariants(state)
    return state, decisions, submitted


def check_invariants(state: ClusterState) -> None:
    n = state.n
    free = state.gpu_free[:n]
    assert (free >= 0).all() and (free <= 1000).all()
    absent = np.arange(state.max_gpus)[None, :] >= state.gpu_count[:n, None]
    assert (free[absent] == 0).all()
    assert (state.cpu_free[:n] >= 0).all() and (state.mem_free[:n] >= 0).all()
    assert (state.cpu_free[:n] <= state.cpu_cap[:n]).all()


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(nodes=nodes_st, ops=ops_st, policy=policy_st)
def test_resources_never_go_negative_or_over_capacity_and_models_hold(nodes, ops, policy):
    state, decisions, submitted = run(nodes, ops, policy)
    by_name = {t.task: t for t in submitted}
    for d in decisions:
        if isinstance(d, Placement):
            req = by_name[d.task]
            # A gang's GPUs are its members' (node and gpus are rank 0's); else the one node's.
            members = d.members or ((d.node, d.gpus),)
            assert members[0] == (d.node, d.gpus)
            assert sum(len(gpus) for _, gpus in members) == req.num_gpu
            for name, gpus in members:
                node = state.node_index[name]
                if req.gpu_models:
                    assert state.model_names[state.model[node]] in req.gpu_models
                assert len(set(gpus)) == len(gpus)
                assert all(g < state.gpu_count[node] for g in gpus)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(nodes=nodes_st, ops=ops_st, policy=policy_st)
def test_same_inputs_and_seed_give_identical_decisions_cached_or_not(nodes, ops, policy):
    _, first, _ = run(nodes, ops, policy)
    _, second, _ = run(nodes, ops, policy)
    _, uncached, _ = run(nodes, ops, policy, cacheable=False)
    assert first == second
    strip = [(type(d).__name__, getattr(d, "node", None), getattr(d, "gpus", None)) for d in first]
    assert strip == [(type(d).__name__, getattr(d, "node", None), getattr(d, "gpus", None))
                     for d in uncached]
