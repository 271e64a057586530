"""The Go math/rand port and the benchmark workload reproduce the documented check values."""

from __future__ import annotations

import pytest

from streams.sim.gorand import GoRand
from streams.sim.traces import traces_dir


def test_first_draw_for_seed_42_matches_go():
    assert GoRand(42).int63() == 3440579354231278675


def test_seed_zero_and_modulus_seed_give_the_same_stream():
    assert GoRand(0).int63() == GoRand(2**31 - 1).int63()


def test_intn_perm_and_shuffle_stay_in_range():
    r = GoRand(7)
    assert all(0 <= r.intn(k) < k for k in (1, 2, 3, 7, 1000, 2**31 - 1))
    assert sorted(r.perm(50)) == list(range(50))
    items = list(range(30))
    r.shuffle(items)
    assert sorted(items) == list(range(30))


needs_traces = pytest.mark.skipif(
    not (traces_dir() / "openb" / "openb_pod_list_default.csv").exists(),
    reason="openb traces not found (../shared/traces or $HETSCHED_TRACES)",
)


@needs_traces
def test_default_workload_matches_the_documented_check_values():
    from streams.policies.fragmentation import TypicalTasks
    from streams.sim.traces import read_nodes, read_tasks
    from streams.sim.workload import build_workload

    nodes = read_nodes("openb_node_list_gpu_node.csv")
    tasks = read_tasks("openb_pod_list_default.csv")
    assert (len(nodes), sum(n.gpu_count for n in nodes)) == (1213, 6212)
    w = build_workload(tasks, len(nodes), 6212, 1.3, 42)
    assert [t.task for t in w.arrivals[:3]] == ["openb-pod-0255", "openb-pod-1685",
                                                "openb-pod-6784"]
    assert w.ranks[:3] == (601, 815, 450)
    assert len(w.arrivals) == 10866
    typical = TypicalTasks.from_tasks(tasks)
    assert len(typical) == 35
    assert (typical.cpu_milli[0], typical.gpu_milli[0]) == (3152, 810)
    assert round(float(typical.prob[0]), 3) == 0.135
