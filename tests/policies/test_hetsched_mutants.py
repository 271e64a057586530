"""hetsched against its documented rules, where ``./dev mutate`` found them unchecked.

ratio k = sum p*num_gpu*gpu_milli / sum p*cpu_milli over the mix's GPU tasks (0 without
CPU); model pressure = (constrained demand on the model / all GPU demand) / (the
model's share of the cluster's GPUs), a constrained task's demand split evenly over
its models present; score = trunc(100 * sigmoid(((F - F') - w * (S' - S)
- scarcity * pressure * taken) / scale)). The mixes are built with exact binary
probabilities, so expected values are plain arithmetic.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from streams.core.policy import NodesView, OptionRows, Options
from streams.core.request import TaskRequest
from streams.core.state import ClusterState
from streams.policies.fgd import frag_delta
from streams.policies.fragmentation import TypicalTasks
from streams.policies.hetsched import (
    Hetsched,
    factory,
    gpu_milli_per_cpu_milli,
    model_pressure,
)
from tests.oracle.scores import stranded


def mix(*rows: tuple[int, int, int, tuple[str, ...], float]) -> TypicalTasks:
    """Rows as (cpu milli, gpu milli, GPUs, models, probability)."""
    return TypicalTasks(cpu_milli=np.array([r[0] for r in rows], np.int64),
                        gpu_milli=np.array([r[1] for r in rows], np.int64),
                        num_gpu=np.array([r[2] for r in rows], np.int64),
                        spec=tuple(r[3] for r in rows),
                        prob=np.array([r[4] for r in rows], np.float64))


# GPU demand p * n * g: 250 (A100 only), 500 (any), 125 (A100 or T4), 0 (CPU only),
# 0.125 (T4 only), 62.5 (H100, not in the cluster): 937.625 in all.
MIX = mix((2000, 1000, 1, ("A100",), 0.25), (4000, 1000, 2, (), 0.25),
          (2000, 500, 1, ("A100", "T4"), 0.25), (8000, 0, 0, (), 0.125),
          (0, 2, 1, ("T4",), 0.0625), (0, 1000, 1, ("H100",), 0.0625))


def cluster() -> ClusterState:
    """a: 4 A100 (model 0); b, c: 2 T4 each (model 1); d: CPU only. GPU shares 1/2, 1/2."""
    state = ClusterState(capacity=4)
    for name, gpus, model in (("a", 4, "A100"), ("b", 2, "T4"), ("c", 2, "T4"),
                              ("d", 0, None)):
        state.add_node(name, 16000, 1 << 16, gpus, model)
    return state


def test_the_ratio_is_gpu_demand_per_cpu_demand_of_the_gpu_tasks() -> None:
    # CPU: 0.25 x (2000 + 4000 + 2000) = 2000; GPU: 937.625; the CPU-only task is left out.
    assert gpu_milli_per_cpu_milli(MIX) == 937.625 / 2000
    assert gpu_milli_per_cpu_milli(mix((0, 1000, 1, (), 1.0))) == 0.0  # no CPU asked
    assert gpu_milli_per_cpu_milli(mix((1, 1000, 1, (), 1.0))) == 1000.0  # 1 milli-CPU
    assert gpu_milli_per_cpu_milli(mix((8000, 0, 0, (), 1.0))) == 0.0  # CPU tasks only


def test_pressure_is_the_constrained_share_of_demand_over_the_share_of_gpus() -> None:
    state = cluster()
    # A100: 250 + 125 / 2; T4: 125 / 2 + 0.125; H100 has no node; GPU shares 4/8 and 4/8.
    expected = [(312.5 / 937.625) / 0.5, (62.625 / 937.625) / 0.5, 0.0]
    assert model_pressure(MIX, state).tolist() == pytest.approx(expected, rel=1e-12)
    assert model_pressure(MIX, state).tolist() == pytest.approx(expected, rel=1e-12)  # cached
    # Another mix on the same state has its own pressure: 1 milli-GPU on A100, all of it.
    tiny = mix((0, 1, 1, ("A100",), 1.0))
    assert model_pressure(tiny, state).tolist() == [2.0, 0.0, 0.0]


def test_pressure_is_zero_without_gpu_demand_and_counts_a_single_gpu_cluster() -> None:
    assert model_pressure(mix((8000, 0, 0, (), 1.0)), cluster()).tolist() == [0.0, 0.0, 0.0]
    one = ClusterState(capacity=1)
    one.add_node("a", 16000, 1 << 16, 1, "A100")
    # Only A100 is present: the A100-or-T4 task's 125 all lands on it; its share is 1.
    assert model_pressure(MIX, one).tolist() == pytest.approx([375 / 937.625, 0.0],
                                                              rel=1e-12)


def formula(pol: Hetsched, task: TaskRequest, state: ClusterState) -> list[float]:
    """The module docstring's score, term by term, for every node of ``state``."""
    view = NodesView(state, np.arange(state.n))
    options = Options.for_task(task, view)
    delta = frag_delta(task, view, options, pol.typical)
    taken = task.gpu_total_milli
    growth = (stranded(delta.cpu_free - task.cpu_milli, delta.idle_milli - taken, pol.ratio)
              - stranded(delta.cpu_free, delta.idle_milli, pol.ratio))
    pressure = model_pressure(pol.typical, state)[view.model]
    out = []
    for b, a, g, p in zip(delta.before.tolist(), delta.after.tolist(), growth.tolist(),
                          pressure.tolist(), strict=True):
        x = (b - a) - pol.strand_weight * g - pol.scarcity_weight * p * taken
        out.append(float(math.trunc(100 / (1 + math.exp(-x / pol.scale)))))
    return out


def scores(pol: Hetsched, task: TaskRequest, state: ClusterState) -> list[float]:
    view = NodesView(state, np.arange(state.n))
    return pol.score(task, view, Options.for_task(task, view)).tolist()


def rows_scores(pol: Hetsched, task: TaskRequest, state: ClusterState) -> list[float]:
    """``score_rows`` of one option per node (a whole-GPU task)."""
    n = state.n
    idle = (state.gpu_free[:n].sum(axis=1)).tolist()
    rows = OptionRows(state, np.arange(n), list(range(n)), state.cpu_free[:n].tolist(),
                      idle, state.model[:n].tolist(), None, list(range(n)))
    return pol.score_rows(task, rows)


def starved() -> ClusterState:
    """Two 4-GPU nodes, a with little CPU left (its GPUs are stranded after a task)."""
    state = ClusterState(capacity=2)
    state.add_node("a", 4000, 1 << 16, 4, "A100")
    state.add_node("b", 64000, 1 << 16, 4, "A100")
    return state


def test_a_strand_weight_of_two_doubles_the_stranding_term() -> None:
    task = TaskRequest("t", 3000, 0, 1, 1000)
    one, two = Hetsched(MIX, 2000.0, 1.0, 0.0), Hetsched(MIX, 2000.0, 2.0, 0.0)
    state = starved()
    assert scores(two, task, state) == formula(two, task, state)
    assert rows_scores(two, task, state) == formula(two, task, state)
    assert scores(two, task, state)[0] < scores(one, task, state)[0]  # a strands more


def test_the_scarcity_term_lowers_the_score_of_a_model_under_pressure() -> None:
    task = TaskRequest("t", 1000, 0, 1, 1000)
    state = cluster()
    on, off = Hetsched(MIX, 500.0, 1.0, 2.0), Hetsched(MIX, 500.0, 1.0, 0.0)
    assert scores(on, task, state)[:3] == formula(on, task, state)[:3]
    assert rows_scores(on, task, state)[:3] == formula(on, task, state)[:3]
    assert scores(on, task, state)[0] < scores(off, task, state)[0]


def test_scale_must_be_positive_and_the_factory_names_the_policy() -> None:
    assert Hetsched(MIX, 1.0, 1.0, 1.0).scale == 1.0
    for bad in (0.0, -1.0):
        with pytest.raises(ValueError, match="policy 'hetsched': scale_milli must be > 0"):
            Hetsched(MIX, bad, 1.0, 1.0)
    with pytest.raises(ValueError, match="policy 'hetsched' needs 'typical': the "
                                         "TypicalTasks of the workload"):
        factory({})
    with pytest.raises(ValueError, match=r"policy 'hetsched': unknown arguments \['x'\]"):
        factory({"typical": MIX, "x": 1})
    pol = factory({"typical": MIX, "scale_milli": 250.0})
    assert (pol.scale, pol.strand_weight, pol.scarcity_weight) == (250.0, 1.0, 1.0)


@pytest.mark.filterwarnings("ignore:invalid value encountered in multiply:RuntimeWarning")
def test_an_infinite_scarcity_weight_is_applied_even_without_pressure() -> None:
    # No model under pressure: the term is skipped as 0.0 only for a finite weight;
    # inf x 0 is nan, which the score keeps rather than silently dropping the term.
    flexible = mix((2000, 1000, 1, (), 1.0))
    pol = Hetsched(flexible, 500.0, 1.0, math.inf)
    task = TaskRequest("t", 1000, 0, 1, 1000)
    state = cluster()
    assert all(math.isnan(s) for s in scores(pol, task, state)[:3])
    assert all(math.isnan(s) for s in rows_scores(pol, task, state)[:3])

