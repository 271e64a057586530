"""Gangs (streams.core.gang, issue 30): all or nothing, where the members go, in the queue.

Each expected placement follows from the rules in the module docstring of
streams/core/gang.py, worked out by hand for the small cells below.
"""

from __future__ import annotations

from streams.core.cell import Cell, Preempted, Refused
from streams.core.decisions import Placement
from streams.core.events import LinkMeasured, NodeAdded, TaskArrived, TaskEnded
from streams.core.profile import get_profile
from streams.core.queue import QueueConfig, TaskMeta
from streams.core.request import MILLI_PER_GPU, TaskRequest
from streams.profiles.compile import compile_profile

BESTFIT = compile_profile(get_profile("bestfit"))


def make_cell(*nodes: tuple[str, int, str] | tuple[str, int, str, str],
              config: QueueConfig | None = None) -> Cell:
    """Nodes as (name, GPUs, model[, rack])."""
    c = Cell("c", BESTFIT, config or QueueConfig(), explain=False)
    for spec in nodes:
        name, gpus, model = spec[:3]
        rack = spec[3] if len(spec) > 3 else None
        c.add_node(NodeAdded(f"n/{name}", name, 64_000, 262_144, gpus, model, rack=rack),
                   now_s=0.0)
    return c


def submit(c: Cell, task: str, gpus: int, t: float = 0.0, *, nodes: int = 0,
           per_node: int = 0, models: tuple[str, ...] = (), mixed: bool = False,
           **meta: object):
    req = TaskRequest(task, 1000, 1024, gpus, 1000, models, nodes=nodes,
                      gpus_per_node=per_node, mixed_models=mixed)
    return c.submit(TaskArrived(f"s/{task}", req), None, TaskMeta(**meta), now_s=t)  # type: ignore[arg-type]


def end(c: Cell, task: str, t: float):
    return c.end(TaskEnded(f"e/{task}", task), now_s=t)


def placed(out) -> Placement:
    (p,) = [o for o in out if isinstance(o, Placement)]
    return p


def idle(c: Cell, node: str) -> int:
    s = c.state
    i = s.node_index[node]
    return int((s.gpu_free[i, : int(s.gpu_count[i])] == MILLI_PER_GPU).sum())


def test_a_gang_fills_whole_nodes_first_and_puts_the_rest_where_it_fits_best():
    c = make_cell(("a", 8, "V100"), ("b", 8, "V100"), ("c", 8, "V100"), ("d", 8, "V100"))
    submit(c, "small", 5)                      # bestfit puts it on a: 3 idle left there
    assert c.tasks["small"].node == "a"
    p = placed(submit(c, "g", 12))
    # Two nodes are the fewest for 12: one whole node (b, the first fully idle by rank),
    # then 4 on the node with the fewest idle GPUs that hold 4 (c: 8 idle; a has only 3).
    assert [n for n, _ in p.members] == ["b", "c"]
    assert [len(g) for _, g in p.members] == [8, 4]
    assert (p.node, p.gpus) == p.members[0]
    assert "2 nodes" in p.why and "best fit" in p.why
    assert idle(c, "b") == 0 and idle(c, "c") == 4 and idle(c, "d") == 8


def test_the_remainder_goes_to_the_tightest_node_not_the_emptiest():
    c = make_cell(("a", 8, "V100"), ("b", 8, "V100"), ("c", 8, "V100"))
    submit(c, "x", 4)                          # a: 4 idle
    p = placed(submit(c, "g", 12))
    # Fewest nodes: 2 (8 + 4). The 8 goes to a fully idle node; the 4 to a (exactly 4
    # idle), not to the other idle node, which stays whole for the next gang.
    assert sorted(len(g) for _, g in p.members) == [4, 8]
    assert dict((n, len(g)) for n, g in p.members)["a"] == 4
    assert idle(c, "a") == 0 and 8 in (idle(c, "b"), idle(c, "c"))


def test_a_gang_keeps_to_one_model_unless_it_allows_mixing():
    c = make_cell(("v", 8, "V100"), ("a", 8, "A100"))
    out = submit(c, "g", 16)
    (r,) = out
    assert isinstance(r, Refused) and not r.resolvable
    assert r.unschedulable.verdict.reasons == (
        "asks for 16 GPUs (any model) of one model; the cell has 8",)
    assert idle(c, "v") == 8 and idle(c, "a") == 8  # nothing booked
    p = placed(submit(c, "m", 16, mixed=True))
    assert {n for n, _ in p.members} == {"v", "a"} and "mixed models" in p.why


def test_a_gang_larger_than_the_cell_is_refused_with_both_numbers_and_books_nothing():
    c = make_cell(("a", 8, "V100"), ("b", 8, "V100"))
    (r,) = submit(c, "huge", 24, models=("V100",))
    assert isinstance(r, Refused) and not r.resolvable
    assert r.unschedulable.verdict.reasons == (
        "asks for 24 GPUs (V100) of one model; the cell has 16",)
    assert c.tasks["huge"].status == "done" and not c.tasks["huge"].ok
    (r,) = submit(c, "shaped", 6, nodes=3)
    assert r.unschedulable.verdict.reasons == (
        "asks for 3 nodes with 2 GPUs each (any model); the cell has 2 such nodes",)


def test_a_gang_that_cannot_fit_now_waits_with_nothing_booked_then_starts_whole():
    c = make_cell(("a", 8, "V100"), ("b", 8, "V100"))
    submit(c, "x", 2)
    (r,) = submit(c, "g", 16, t=1.0)
    assert isinstance(r, Refused) and r.resolvable
    assert c.tasks["g"].status == "queued"
    assert idle(c, "a") + idle(c, "b") == 14  # only x's 2 GPUs are taken
    out = end(c, "x", 5.0)
    p = placed(out)
    assert p.task == "g" and sorted(n for n, _ in p.members) == ["a", "b"]
    assert idle(c, "a") == idle(c, "b") == 0
    end(c, "g", 9.0)
    assert idle(c, "a") == idle(c, "b") == 8  # every member released


def test_a_shaped_gang_takes_exactly_its_shape_on_the_best_fitting_nodes():
    c = make_cell(("a", 8, "V100"), ("b", 8, "V100"), ("c", 8, "V100"))
    submit(c, "x", 4)                          # a: 4 idle
    p = placed(submit(c, "g", 8, nodes=2))     # 2 x 4
    assert [len(g) for _, g in p.members] == [4, 4]
    # Best fit: a (exactly 4 idle) first, then a fully idle node by rank.
    assert p.members[0][0] == "a"
    assert "2 x 4 GPUs as asked" in p.why


def test_a_gang_stays_in_one_rack_when_one_rack_holds_it():
    c = make_cell(("a", 8, "V100", "r1"), ("b", 8, "V100", "r2"), ("c", 8, "V100", "r2"))
    p = placed(submit(c, "g", 16))
    # a+b and b+c are both two nodes; only b+c share a rack.
    assert sorted(n for n, _ in p.members) == ["b", "c"] and "in 1 rack" in p.why


def test_between_equal_racks_the_faster_measured_link_wins():
    c = make_cell(("a", 8, "V100", "r1"), ("b", 8, "V100", "r1"),
                  ("c", 8, "V100", "r2"), ("d", 8, "V100", "r2"))
    c.link(LinkMeasured("l1", "a", "b", "node", 50.0, 5.0))    # slower than the default
    p = placed(submit(c, "g", 16))
    assert sorted(n for n, _ in p.members) == ["c", "d"]


def test_a_gang_at_the_head_gets_a_reservation_that_backfill_cannot_delay():
    c = make_cell(("a", 8, "V100"), ("b", 8, "V100"))
    submit(c, "long", 4, expected_s=100.0)     # a: 4 idle until t=100
    (r,) = submit(c, "g", 16, t=1.0, expected_s=50.0)
    assert isinstance(r, Refused) and r.resolvable
    # A job that would run past t=100 must not take the gang's GPUs on a or b ...
    out = submit(c, "late", 2, t=2.0, expected_s=500.0)
    assert not [o for o in out if isinstance(o, Placement)]
    assert c.tasks["late"].status == "queued"
    # ... a job done before t=100 may use them meanwhile.
    p = placed(submit(c, "quick", 2, t=3.0, expected_s=10.0))
    assert p.task == "quick"
    end(c, "quick", 13.0)
    out = end(c, "long", 100.0)
    assert placed(out).task == "g"              # the gang first, "late" still waits
    assert c.tasks["late"].status == "queued"


def test_a_preempted_gang_is_stopped_and_released_whole():
    cfg = QueueConfig(preemption=True)
    c = make_cell(("a", 8, "V100"), ("b", 8, "V100"), config=cfg)
    placed(submit(c, "g", 16, qos="best_effort"))
    out = submit(c, "urgent", 8, t=10.0, qos="guaranteed")
    pre = [o for o in out if isinstance(o, Preempted)]
    assert [o.task for o in pre] == ["g"]      # one stop for the whole gang
    assert placed(out).task == "urgent"
    assert c.tasks["g"].status == "queued" and c.tasks["g"].members == ()
    assert idle(c, "a") + idle(c, "b") == 8    # the gang holds nothing; urgent holds 8


def test_a_running_gang_survives_a_restore_from_its_records():
    c = make_cell(("a", 8, "V100"), ("b", 8, "V100"), ("c", 8, "V100"))
    placed(submit(c, "g", 12))
    submit(c, "w", 16, t=1.0)                  # queued gang
    nodes = [(n, c.node_record(n)) for n in c.nodes]
    tasks = [(t, c.task_record(t)) for t in c.tasks]
    back = Cell.restore("c", BESTFIT, c.meta_record(), nodes, tasks, QueueConfig())
    assert back.tasks["g"].members == c.tasks["g"].members
    assert (back.state.gpu_free[: back.state.n] == c.state.gpu_free[: c.state.n]).all()
    assert back.tasks["w"].request == c.tasks["w"].request
    assert end(back, "g", 5.0) == end(c, "g", 5.0)  # the same next decisions
    assert (back.state.gpu_free[: back.state.n] == c.state.gpu_free[: c.state.n]).all()


def test_a_draining_or_failing_member_node_requeues_the_whole_gang():
    from streams.core.adapt import engine
    from streams.core.adapt.outcomes import Evicted

    for react in (lambda c: engine.on_draining(c, "d1", "b", 5.0),
                  lambda c: engine.on_node_down(c, "d1", "b", "node_failed")):
        c = make_cell(("a", 8, "V100"), ("b", 8, "V100"), ("c", 8, "V100"))
        placed(submit(c, "g", 16))
        members = {n for n, _ in c.tasks["g"].members}
        assert "b" in members
        out = react(c)
        evicted = [o for o in out if isinstance(o, Evicted)]
        assert [(o.task, o.requeue) for o in evicted] == [("g", True)]  # once, whole
        assert idle(c, "b") == 8                  # nothing of the gang is left on b
        # Placed again whole on the two healthy nodes, in the reaction or the next pass.
        (again,) = [o for o in out if isinstance(o, Placement)] or [
            o for o in c.tick("k1", 1, now_s=6.0) if isinstance(o, Placement)]
        assert sorted(n for n, _ in again.members) == ["a", "c"]
        assert idle(c, "a") == idle(c, "c") == 0


def test_an_elastic_or_unknown_gang_is_neither_probed_nor_resized():
    from streams.core.adapt import engine

    c = make_cell(("a", 8, "V100"), ("b", 8, "V100"))
    req = TaskRequest("g", 1000, 1024, 16, 1000)
    facts: dict = {"kind": None}
    assert engine.prepare_submit(c, req, facts) is req and "probe" not in facts


def test_a_gang_with_speeds_goes_to_its_fastest_model_that_holds_it() -> None:
    """Without speeds the K80 pair wins (two whole nodes hold 12 on one model either way;
    K80 comes first by name); told the V100 runs the class 3x as fast, the gang takes
    the V100s; the book learns the same from the class's runs (``Cell._book_speeds``)."""
    def cell() -> Cell:
        return make_cell(("k1", 8, "K80"), ("k2", 8, "K80"), ("v1", 8, "V100M16"),
                         ("v2", 8, "V100M16"))

    blind = placed(submit(cell(), "g", 12))
    assert {m for m, _ in blind.members} == {"k1", "k2"}
    c = cell()
    req = TaskRequest("g", 1000, 1024, 12, 1000, speeds=(("K80", 0.33), ("V100M16", 1.0)))
    told = placed(c.submit(TaskArrived("s/g", req), None, TaskMeta(), now_s=0.0))
    assert {m for m, _ in told.members} == {"v1", "v2"}
    assert told.why.endswith("the fastest model for it that holds it now (1.00 of its "
                             "fastest's speed)")
    learned = cell()
    assert learned.speeds.observe("bert", 12, "K80", 1.0)
    assert learned.speeds.observe("bert", 12, "V100M16", 3.0)
    learned.speed_seq = 2
    p = placed(submit(learned, "g", 12, name="bert"))
    assert {m for m, _ in p.members} == {"v1", "v2"}
    busy = cell()  # the V100s hold too little now: the gang goes to the K80s, not waits
    assert placed(submit(busy, "v-job", 8, models=("V100M16",))).node == "v1"
    p = placed(busy.submit(TaskArrived("s/g", req), None, TaskMeta(), now_s=1.0))
    assert {m for m, _ in p.members} == {"k1", "k2"}
