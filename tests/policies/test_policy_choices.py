"""Each policy on small hand-made clusters where the right answer is known."""

from __future__ import annotations

import numpy as np
import pytest

from streams.core.policy import NodesView, Options, Policy
from streams.core.profile import BUILTIN_PROFILES, Profile
from streams.core.request import TaskRequest
from streams.core.scheduler import place
from streams.core.state import ClusterState
from streams.policies import registry
from streams.policies.fragmentation import TypicalTasks
from streams.profiles.compile import compile_profile

WHOLE_GPU_MIX = TypicalTasks.from_tasks([TaskRequest("w", 1000, 0, 1, 1000)], coverage=1.0)
CTX = {"typical": WHOLE_GPU_MIX, "seed": 3}


def cluster(*nodes, used=None) -> ClusterState:
    """nodes: (name, cpu, gpus, model); used: {(node, gpu): milli taken}."""
    state = ClusterState(capacity=2)
    for name, cpu, gpus, model in nodes:
        state.add_node(name, cpu, 1 << 20, gpus, model)
    for k, ((node, gpu), milli) in enumerate((used or {}).items()):
        i = state.node_index[node]
        state.allocate(TaskRequest(f"pre{k}", 0, 0, 1, milli), i, (gpu,))
    return state


def choose(policy: str, state: ClusterState, task: TaskRequest):
    sched = compile_profile(Profile(policy, {policy: 1.0}), CTX)
    res = place(state, sched, task)
    return (state.node_names[res.node] if res.node >= 0 else None), res.gpus


FRACTIONAL = TaskRequest("t", 1000, 100, 1, 300)
CASES = [
    ("bestfit", "the node left with less free CPU and GPU wins",
     cluster(("big", 64000, 8, "G2"), ("small", 8000, 1, "T4")), FRACTIONAL, "small", (0,)),
    ("bestfit", "the fuller GPU of the chosen node takes the share",
     cluster(("n", 8000, 2, "T4"), used={("n", 1): 500}), FRACTIONAL, "n", (1,)),
    ("dotprod", "the node whose free resources align least with the request wins",
     cluster(("big", 64000, 8, "G2"), ("small", 8000, 1, "T4")), FRACTIONAL, "small", (0,)),
    ("gpupacking", "a fractional task goes to an already shared GPU",
     cluster(("idle", 8000, 1, "T4"), ("shared", 8000, 2, "T4"), used={("shared", 1): 200}),
     FRACTIONAL, "shared", (1,)),
    ("gpupacking", "a whole-GPU task prefers a partly used node over an idle one",
     cluster(("idle", 8000, 2, "T4"), ("part", 8000, 2, "T4"), used={("part", 0): 200}),
     TaskRequest("w", 1000, 1, 1, 1000), "part", (1,)),
    ("gpuclustering", "a fractional task joins the node holding only shared tasks",
     cluster(("empty", 8000, 2, "T4"), ("shared", 8000, 2, "T4"), used={("shared", 0): 100}),
     FRACTIONAL, "shared", (0,)),
    ("fgd", "FGD fills a partly used GPU rather than fragment an idle one",
     cluster(("idle", 8000, 1, "T4"), ("part", 8000, 1, "T4"), used={("part", 0): 400}),
     FRACTIONAL, "part", (0,)),
    ("hetsched", "hetsched fills a partly used GPU rather than fragment an idle one",
     cluster(("idle", 8000, 1, "T4"), ("part", 8000, 1, "T4"), used={("part", 0): 400}),
     FRACTIONAL, "part", (0,)),
    ("compute", "the compute term prefers the faster idle GPU",
     cluster(("t4", 8000, 1, "T4"), ("h100", 8000, 1, "H100")), FRACTIONAL, "h100", (0,)),
    ("data", "the data term prefers the higher-bandwidth GPU",
     cluster(("t4", 8000, 1, "T4"), ("a100", 8000, 1, "A100")), FRACTIONAL, "a100", (0,)),
    ("data", "the data term avoids moving inputs off their node when bandwidth is equal",
     cluster(("a", 8000, 1, "T4"), ("b", 8000, 1, "T4")),
     TaskRequest("t", 1000, 1, 1, 300, input_node="b"), "b", (0,)),
    ("bestfit", "a model constraint rules out the otherwise best node",
     cluster(("small", 8000, 1, "T4"), ("big", 64000, 8, "G2")),
     TaskRequest("t", 1000, 1, 1, 300, ("G2",)), "big", (0,)),
    ("bestfit", "a multi-GPU task needs that many idle GPUs",
     cluster(("two", 8000, 2, "T4"), ("four", 32000, 4, "T4"), used={("four", 0): 1}),
     TaskRequest("t", 1000, 1, 3, 1000), "four", (1, 2, 3)),
    ("bestfit", "nothing fits: the task is dropped",
     cluster(("n", 8000, 1, "T4")), TaskRequest("t", 9000, 1, 0, 0), None, ()),
    ("fgd", "a CPU-only task takes no GPU",
     cluster(("n", 8000, 1, "T4")), TaskRequest("t", 1000, 1, 0, 0), "n", ()),
]


@pytest.mark.parametrize(("policy", "state", "task", "node", "gpus"),
                         [pytest.param(p, s, t, n, g, id=f"{p}: {why}")
                          for p, why, s, t, n, g in CASES])
def test_policy_picks_the_known_best_placement(policy, state, task, node, gpus):
    assert choose(policy, state, task) == (node, gpus)


def test_ties_go_to_the_smallest_rank_not_the_first_node():
    state = ClusterState()
    state.add_node("a", 8000, 1024, 1, "T4", rank=5)
    state.add_node("b", 8000, 1024, 1, "T4", rank=2)
    assert choose("bestfit", state, FRACTIONAL)[0] == "b"


def test_random_is_uniform_over_feasible_nodes_and_seeded():
    state = cluster(*[(f"n{i}", 8000, 1, "T4") for i in range(4)], ("tiny", 100, 1, "T4"))
    seen = set()
    for i in range(60):
        state.arrivals = i
        seen.add(choose("random", state, FRACTIONAL)[0])
    assert seen == {"n0", "n1", "n2", "n3"}
    state.arrivals = 7
    assert choose("random", state, FRACTIONAL) == choose("random", state, FRACTIONAL)


def test_fgd_scores_follow_the_sigmoid_of_the_fragmentation_change():
    state = cluster(("part", 8000, 1, "T4"), used={("part", 0): 400})
    pol = registry.build("fgd", None, CTX)
    view = NodesView(state, np.arange(1))
    # F before: the 600 free milli cannot host a whole GPU -> 600. After 300: 300.
    s = pol.score(FRACTIONAL, view, Options.for_task(FRACTIONAL, view))
    assert s.tolist() == [int(100 / (1 + np.exp(-0.3)))]


@pytest.mark.parametrize("name", sorted(registry.REGISTRY))
def test_every_registered_policy_satisfies_the_protocol(name):
    policy = registry.build(name, None, CTX)
    assert isinstance(policy, Policy)
    assert policy.name == name
    assert policy.gpu_tiebreak in ("least_free", "lowest_index")


@pytest.mark.parametrize(
    ("name", "args"),
    [("bestfit", {"nope": 1}), ("dotprod", {"cpu_norm_milli": "x"}), ("gpupacking", {"a": 1}),
     ("fgd", {}), ("hetsched", {"typical": 3}), ("random", {"seed": True})],
    ids=lambda v: str(v),
)
def test_factories_reject_bad_arguments(name, args):
    with pytest.raises(ValueError):
        registry.REGISTRY[name][0](args)


def test_profiles_validate_weights_and_args():
    with pytest.raises(ValueError):
        Profile("x", {})
    with pytest.raises(ValueError):
        Profile("x", {"bestfit": -1})
    with pytest.raises(ValueError):
        Profile("x", {"bestfit": 1}, args={"fgd": {}})
    p = Profile.from_config({"name": "mix", "weights": {"fgd": 1, "compute": 0.1}})
    assert dict(p.weights) == {"fgd": 1.0, "compute": 0.1}
    assert set(BUILTIN_PROFILES) >= {"random", "dotprod", "gpuclustering", "gpupacking",
                                     "bestfit", "fgd", "hetsched"}


def test_weights_combine_terms_and_reasons_show_them():
    state = cluster(("t4", 8000, 1, "T4"), ("h100", 64000, 8, "H100"))
    sched = compile_profile(Profile("mix", {"bestfit": 1.0, "compute": 2.0}), CTX)
    res = place(state, sched, FRACTIONAL)
    top = res.reason.candidates[0]
    assert res.reason.weights == {"bestfit": 1.0, "compute": 2.0}
    assert top.total == pytest.approx(top.terms["bestfit"] + 2.0 * top.terms["compute"], rel=1e-6)
