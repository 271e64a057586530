"""Run-time prediction from the cell's history (streams.core.predictor, issue 31).

Every expected figure is worked out by hand from the rules in the module
docstring: the closest level with ``MIN_RUNS`` runs answers, with the median
of the runs longer than what the task already ran.
"""

from __future__ import annotations

import pytest

from streams.core.cell import Cell
from streams.core.decisions import Placement
from streams.core.events import NodeAdded, TaskArrived, TaskEnded
from streams.core.predictor import DurationPredictor, TaskKind
from streams.core.profile import get_profile
from streams.core.queue import QueueConfig, TaskMeta
from streams.core.request import TaskRequest
from streams.profiles.compile import compile_profile

BESTFIT = compile_profile(get_profile("bestfit"))
RESNET = TaskKind("t", "resnet50", "train", 1)


def test_the_closest_level_with_three_runs_answers_with_its_median() -> None:
    p = DurationPredictor()
    for ran in (100.0, 300.0):                       # two runs of the job: too few
        p.learn(RESNET, ran)
    p.learn(TaskKind("t", "bert", "train", 1), 200.0)  # the third of tenant t's class
    got = p.predict(RESNET)
    assert got is not None and got.level == "class"
    assert (got.runs, got.p50_s) == ((100.0, 200.0, 300.0), 200.0)
    assert got.text() == "predicted 3 min (p50 of 3 past runs of tenant t's class 'train')"
    p.learn(RESNET, 700.0)
    got = p.predict(RESNET)
    assert got is not None and got.level == "name"
    assert got.p50_s == 300.0
    assert got.basis() == "p50 of 3 past runs of tenant t's 'resnet50'"


def test_other_tenants_count_only_at_the_class_level_and_nothing_known_is_none() -> None:
    p = DurationPredictor()
    assert p.predict(RESNET) is None
    for ran in (10.0, 20.0, 30.0):
        p.learn(TaskKind("u", "resnet50", "train", 1), ran)
    got = p.predict(RESNET)
    assert got is not None and got.level == "class of everyone" and got.p50_s == 20.0
    nameless = p.predict(TaskKind("t", "", "", 1))
    assert nameless is not None and nameless.level == "GPU count"
    eight = p.predict(TaskKind("t", "", "", 8))
    assert eight is not None and eight.level == "everyone"


def test_a_task_that_outlived_its_median_is_given_the_longer_runs_then_double() -> None:
    p = DurationPredictor()
    for ran in (60.0, 120.0, 600.0):
        p.learn(RESNET, ran)
    got = p.predict(RESNET)
    assert got is not None
    assert got.total_s(0.0) == 120.0
    assert got.total_s(120.0) == 600.0    # runs longer than 120 s: only 600
    assert got.total_s(100.0) == 360.0    # median of 120 and 600
    assert got.total_s(700.0) == 1400.0   # past every run: twice what it ran


def test_only_the_last_runs_are_kept() -> None:
    p = DurationPredictor(min_runs=3, keep=3)
    for ran in (1000.0, 10.0, 20.0, 30.0):
        p.learn(RESNET, ran)
    got = p.predict(RESNET)
    assert got is not None and got.runs == (10.0, 20.0, 30.0)
    assert p.learned == 4
    with pytest.raises(ValueError, match="keep at least min_runs"):
        DurationPredictor(min_runs=3, keep=2)
    with pytest.raises(ValueError, match=r"ran_s must be 0 or more, got -1\.0"):
        p.learn(RESNET, -1.0)


# ---- in the cell -----------------------------------------------------------------


def make_cell(predict: bool) -> Cell:
    c = Cell("c", BESTFIT, QueueConfig(predict_runtimes=predict), explain=False)
    c.add_node(NodeAdded("n/a", "a", 64_000, 262_144, 8, "V100"), now_s=0.0)
    return c


def submit(c: Cell, task: str, gpus: int, t: float, **meta: object) -> list:
    req = TaskRequest(task, 1000, 1024, gpus, 1000)
    return c.submit(TaskArrived(f"s/{task}", req), None, TaskMeta(**meta), now_s=t)  # type: ignore[arg-type]


def placed(out: list) -> list[Placement]:
    return [o for o in out if isinstance(o, Placement)]


def teach(c: Cell) -> None:
    """Three runs of tenant t's 'short' job on 4 GPUs: 100 s each."""
    for i in range(3):
        submit(c, f"h{i}", 4, 1000.0 * i, tenant="t", name="short")
        c.end(TaskEnded(f"e/h{i}", f"h{i}"), now_s=1000.0 * i + 100.0)


@pytest.mark.parametrize("predict", [True, False])
def test_backfill_trusts_the_predicted_end_of_a_running_task(predict: bool) -> None:
    # R (4 GPUs, predicted 100 s) runs from 5000; head H needs all 8 GPUs, so its
    # reservation is R's end: 5100 predicted, 5000 + 3600 without prediction. B (4 GPUs,
    # declares 500 s) arriving at 5010 would run to 5510: past 5100, it would delay H, so
    # it waits; before 8600 it does not, so without prediction it is backfilled.
    c = make_cell(predict)
    teach(c)
    (r,) = placed(submit(c, "r", 4, 5000.0, tenant="t", name="short"))
    assert (r.predicted_s, r.prediction) == ((100.0, "predicted 100 s (p50 of 3 past runs of "
                                             "tenant t's 'short')") if predict else (None, ""))
    assert placed(submit(c, "h", 8, 5005.0, tenant="t")) == []
    backfilled = placed(submit(c, "b", 4, 5010.0, tenant="t", expected_s=500.0))
    assert [p.task for p in backfilled] == ([] if predict else ["b"])
    if predict:
        assert backfilled == [] and c.tasks["b"].status == "queued"


def test_a_declared_runtime_is_not_predicted_and_failures_teach_nothing() -> None:
    c = make_cell(True)
    teach(c)
    (p,) = placed(submit(c, "d", 1, 5000.0, tenant="t", name="short", expected_s=50.0))
    assert (p.predicted_s, p.prediction) == (None, "")
    c.end(TaskEnded("e/d", "d"), now_s=9000.0, failed=True)
    c.end(TaskEnded("e/x", "x", cancelled=True), now_s=9000.0)
    assert c.predictor.learned == 3


def test_the_history_survives_a_restore_in_the_order_it_was_learned() -> None:
    c = make_cell(True)
    teach(c)
    submit(c, "late", 4, 5000.0, tenant="t", name="short")
    c.end(TaskEnded("e/late", "late"), now_s=5400.0)     # a 400 s run, learned fourth
    nodes = [(n, c.node_record(n)) for n in c.nodes]
    tasks = [(t, c.task_record(t)) for t in reversed(list(c.tasks))]  # any order in
    back = Cell.restore("c", BESTFIT, c.meta_record(), nodes, tasks,
                        QueueConfig(predict_runtimes=True))
    kind = TaskKind("t", "short", "", 4)
    before, after = c.predictor.predict(kind), back.predictor.predict(kind)
    assert before is not None and after is not None
    assert after.runs == before.runs == (100.0, 100.0, 100.0, 400.0)
    assert back.predictor.learned == c.predictor.learned == 4
    assert back.task_record("late") == c.task_record("late")


def test_the_job_csv_names_a_job_and_writes_the_name_back(tmp_path) -> None:
    from streams.sim.time.jobs import read_jobs, write_jobs

    src = tmp_path / "jobs.csv"
    src.write_text("arrival_s,duration_s,num_gpus,gpu_milli,gpu_models,tenant,priority,qos,"
                   "name\n0,60,1,1000,,t,0,burstable,resnet50\n")
    (job,) = read_jobs(src)
    assert job.meta.name == "resnet50"
    write_jobs(tmp_path / "out.csv", [job])
    assert read_jobs(tmp_path / "out.csv")[0].meta == job.meta


def test_medians_of_even_and_odd_counts_and_the_words_for_durations() -> None:
    p = DurationPredictor()
    for ran in (40.0, 10.0, 30.0, 20.0):
        p.learn(RESNET, ran)
    got = p.predict(RESNET)
    assert got is not None and got.p50_s == 25.0
    p.learn(RESNET, 50.0)
    got = p.predict(RESNET)
    assert got is not None and got.p50_s == 30.0
    words = {}
    for seconds in (119.0, 120.0, 3660.0, 7199.0, 7200.0, 8460.5):
        q = DurationPredictor(min_runs=1, keep=1)
        q.learn(RESNET, seconds)
        found = q.predict(RESNET)
        assert found is not None
        words[seconds] = found.text().split(" (")[0]
    assert words == {119.0: "predicted 119 s", 120.0: "predicted 2 min",
                     3660.0: "predicted 61 min", 7199.0: "predicted 120 min",
                     7200.0: "predicted 2.0 h", 8460.5: "predicted 2.4 h"}  # 2.35014 h


def test_a_zero_or_short_run_is_learned_and_one_run_may_be_enough() -> None:
    p = DurationPredictor(min_runs=1, keep=1)
    p.learn(RESNET, 0.0)
    p.learn(RESNET, 0.5)
    got = p.predict(RESNET)
    assert got is not None and got.runs == (0.5,)
    with pytest.raises(ValueError, match="min_runs must be at least 1"):
        DurationPredictor(min_runs=0, keep=1)


# ---- the size-aware order ------------------------------------------------------------


def test_with_prediction_the_smaller_class_goes_first_and_the_starved_go_before_both() -> None:
    from streams.core.queue import FairQueue

    # Aging steps longer than the bound, so the level is the priority until then.
    q = FairQueue(QueueConfig(predict_runtimes=True, starvation_s=3600.0,
                              aging_interval_s=7200.0))
    meta = TaskMeta(tenant="t")
    q.push("long-old", 1, meta, 8000, 0.0, size_class=5)
    q.push("long", 2, meta, 8000, 3000.0, size_class=5)
    q.push("short", 3, meta, 1000, 3000.0, size_class=1)
    q.push("mid", 4, TaskMeta(tenant="u"), 1000, 3000.0, size_class=3)
    # At 3500 nobody waited an hour: classes 1, 3, 5, then submission order in class 5.
    assert [e.task for e in q.ordered(3500.0)] == ["short", "mid", "long-old", "long"]
    # At 3600 long-old waited an hour: the starvation bound puts it first, class or not.
    assert [e.task for e in q.ordered(3600.0)] == ["long-old", "short", "mid", "long"]
    # Among the starved, class no longer counts: submission order (same share).
    starved = FairQueue(QueueConfig(predict_runtimes=True, starvation_s=3600.0,
                                    aging_interval_s=7200.0))
    starved.push("long-old", 1, meta, 8000, 0.0, size_class=5)
    starved.push("short-old", 2, meta, 1000, 100.0, size_class=1)
    assert [e.task for e in starved.ordered(3500.0)] == ["short-old", "long-old"]
    assert [e.task for e in starved.ordered(3700.0)] == ["long-old", "short-old"]
    off = FairQueue(QueueConfig())
    for task, seq in (("a", 1), ("b", 2)):
        off.push(task, seq, meta, 1000, 0.0)
    assert [e.size_class for e in off.ordered(0.0)] == [0, 0]


def test_the_cell_classes_a_task_by_the_gpu_seconds_it_still_needs() -> None:
    c = make_cell(True)
    teach(c)                                     # 't' 'short' on 4 GPUs: 100 s
    submit(c, "block", 8, 5000.0, tenant="t")    # fills the node: the rest queue
    submit(c, "declared", 8, 5001.0, tenant="t", expected_s=1000.0)
    submit(c, "predicted", 4, 5002.0, tenant="t", name="short")
    classes = {t: c.tasks[t].size_class for t in ("declared", "predicted")}
    assert classes == {"declared": 3, "predicted": 2}   # 8,000 and 400 GPU-seconds
    fresh = make_cell(True)                      # nothing learned: least attained service
    submit(fresh, "block", 8, 0.0)
    submit(fresh, "new", 8, 1.0)
    assert fresh.tasks["new"].size_class == 0
    assert make_cell(False).tasks == {} and _class_off() == 0


def _class_off() -> int:
    c = make_cell(False)
    teach(c)
    submit(c, "block", 8, 5000.0, tenant="t")
    submit(c, "declared", 8, 5001.0, tenant="t", expected_s=1000.0)
    return c.tasks["declared"].size_class


def test_a_queued_tasks_class_survives_a_restore() -> None:
    c = make_cell(True)
    teach(c)
    submit(c, "block", 8, 5000.0, tenant="t")
    submit(c, "declared", 8, 5001.0, tenant="t", expected_s=1000.0)
    nodes = [(n, c.node_record(n)) for n in c.nodes]
    tasks = [(t, c.task_record(t)) for t in c.tasks]
    back = Cell.restore("c", BESTFIT, c.meta_record(), nodes, tasks,
                        QueueConfig(predict_runtimes=True))
    assert back.tasks["declared"].size_class == 3
    assert back.queue.entries["declared"].size_class == 3


# ---- shorter first: bounded preemption --------------------------------------------


def _gang_cell() -> Cell:
    """Two 8-GPU nodes; tenant t's 16-GPU gang 'sg' ran three times for 100 s."""
    c = make_cell(True)
    c.add_node(NodeAdded("n/b", "b", 64_000, 262_144, 8, "V100"), now_s=0.0)
    teach(c)
    for i in range(3):
        submit(c, f"g{i}", 16, 4000.0 + 100.0 * i, tenant="t", name="sg")
        c.end(TaskEnded(f"e/g{i}", f"g{i}"), now_s=4000.0 + 100.0 * i + 50.0)
    return c


def _running_long(predict: bool, expected_s: float, priority: int = 0) -> Cell:
    """A cell whose 8 GPUs one long task ("long", declared ``expected_s``) holds from 5000."""
    c = make_cell(predict)
    teach(c)                                       # 't' 'short' on 4 GPUs: 100 s
    placed(submit(c, "long", 8, 5000.0, tenant="u", expected_s=expected_s,
                  priority=priority))
    return c


def test_a_much_shorter_task_stops_a_long_one_which_resumes_with_its_progress() -> None:
    from streams.core.cell import Preempted

    c = _running_long(True, 10_000.0)
    out = submit(c, "s", 4, 5010.0, tenant="t", name="short")
    # long needs 9,990 s more; s needs 100 s: 9,990 >= 2 x (100 + 60).
    stopped = [o for o in out if isinstance(o, Preempted)]
    assert [(o.task, o.by_task) for o in stopped] == [("long", "s")]
    assert [p.task for p in placed(out)] == ["s"]
    long = c.tasks["long"]
    assert (long.status, long.progress_s, long.size_preemptions) == ("queued", 10.0, 1)
    back = Cell.restore("c", BESTFIT, c.meta_record(),
                        [(n, c.node_record(n)) for n in c.nodes],
                        [(t, c.task_record(t)) for t in c.tasks],
                        QueueConfig(predict_runtimes=True))
    assert back.tasks["long"].size_preemptions == 1
    # s ends: long runs again; a second short task now waits, as long was stopped once.
    c.ack_preempted("long")
    assert [p.task for p in placed(c.end(TaskEnded("e/s", "s"), now_s=5110.0))] == ["long"]
    out = submit(c, "s2", 4, 5200.0, tenant="t", name="short")
    assert placed(out) == [] and not [o for o in out if isinstance(o, Preempted)]
    # Once long ran RESTART_S / RESTART_SHARE = 1,200 s since it started again, a restart
    # costs it at most 5 % of that: s2 may stop it a second time.
    assert c.tick("t/1", 1, now_s=5110.0 + 1199.0) == []
    out = c.tick("t/2", 2, now_s=5110.0 + 1200.0)
    assert [(o.task, o.by_task) for o in out if isinstance(o, Preempted)] == [("long", "s2")]
    assert [p.task for p in placed(out)] == ["s2"] and long.size_preemptions == 2


@pytest.mark.parametrize(("predict", "expected_s", "priority"), [
    (True, 300.0, 0),       # long needs 290 s more: under 2 x (100 + 60) = 320
    (True, 10_000.0, 1),    # long has a higher priority than s
    (False, 10_000.0, 0),   # prediction off: only urgent tasks preempt, best-effort victims
])
def test_no_shorter_first_stop_below_the_gain_above_the_priority_or_when_off(
        predict: bool, expected_s: float, priority: int) -> None:
    from streams.core.cell import Preempted

    c = _running_long(predict, expected_s, priority)
    out = submit(c, "s", 4, 5010.0, tenant="t", name="short")
    assert not [o for o in out if isinstance(o, Preempted)] and placed(out) == []
    assert c.tasks["long"].status == "running"


def test_a_gang_is_stopped_whole_for_a_much_shorter_task() -> None:
    from streams.core.cell import Preempted

    c = make_cell(True)
    c.add_node(NodeAdded("n/b", "b", 64_000, 262_144, 8, "V100"), now_s=0.0)
    teach(c)
    (g,) = placed(submit(c, "gang", 16, 5000.0, tenant="u", expected_s=50_000.0))
    assert len(g.members) == 2
    out = submit(c, "s", 4, 5010.0, tenant="t", name="short")
    assert [o.task for o in out if isinstance(o, Preempted)] == ["gang"]
    assert [p.task for p in placed(out)] == ["s"]
    assert c.state.members("gang") == [] and c.tasks["gang"].status == "queued"


def test_a_short_gang_at_the_head_stops_a_much_longer_gang_whole() -> None:
    from streams.core.cell import Preempted

    c = _gang_cell()
    placed(submit(c, "long", 16, 5000.0, tenant="u", expected_s=50_000.0))
    out = submit(c, "s", 16, 5010.0, tenant="t", name="sg")
    # s needs 50 s; long 49,990 s more: its reservation is that far, one victim.
    assert [(o.task, o.by_task) for o in out if isinstance(o, Preempted)] == [("long", "s")]
    (p,) = placed(out)
    assert p.task == "s" and len(p.members) == 2
    assert c.tasks["long"].status == "queued" and c.tasks["long"].size_preemptions == 1
    assert make_cell(False).config.predict_runtimes is False


@pytest.mark.parametrize(("expected_s", "stops"), [
    (1_000.0, True),    # reservation 990 s away >= 2 x 2 victims x (50 + 60) = 440
    (400.0, False),     # 390 s away: under 440, though each victim passes shorter-first
])
def test_a_gang_stops_k_victims_only_when_its_wait_exceeds_k_times_its_cost(
        expected_s: float, stops: bool) -> None:
    from streams.core.cell import Preempted

    c = _gang_cell()
    placed(submit(c, "l1", 8, 5000.0, tenant="u", expected_s=expected_s))
    placed(submit(c, "l2", 8, 5000.0, tenant="u", expected_s=expected_s))
    out = submit(c, "s", 16, 5010.0, tenant="t", name="sg")
    stopped = sorted(o.task for o in out if isinstance(o, Preempted))
    assert stopped == (["l1", "l2"] if stops else [])
    assert [p.task for p in placed(out)] == (["s"] if stops else [])


def test_a_gang_keeps_running_the_victims_it_does_not_need() -> None:
    from streams.core.cell import Preempted

    c = _gang_cell()
    c.add_node(NodeAdded("n/c", "c", 64_000, 262_144, 8, "V100"), now_s=0.0)
    placed(submit(c, "big", 16, 5000.0, tenant="u", expected_s=50_000.0))
    placed(submit(c, "one", 8, 5000.0, tenant="u", expected_s=40_000.0))
    out = submit(c, "s", 16, 5010.0, tenant="t", name="sg")
    # Largest first: stopping big frees two whole nodes, enough; one keeps running.
    assert [o.task for o in out if isinstance(o, Preempted)] == ["big"]
    assert c.tasks["one"].status == "running"


def test_a_task_predicted_to_run_long_ages_slower_and_keeps_its_class() -> None:
    from streams.core.queue import FairQueue

    c = make_cell(True)
    teach(c)
    submit(c, "block", 8, 5000.0, tenant="t")
    for task, expected in (("hour", 3600.0), ("over", 3601.0), ("four", 4 * 3600.0)):
        submit(c, task, 8, 5001.0, tenant="t", expected_s=expected)
    assert {t: c.tasks[t].age_class for t in ("hour", "over", "four")} == {
        "hour": 0, "over": 1, "four": 2}
    back = Cell.restore("c", BESTFIT, c.meta_record(),
                        [(n, c.node_record(n)) for n in c.nodes],
                        [(t, c.task_record(t)) for t in c.tasks],
                        QueueConfig(predict_runtimes=True))
    assert back.queue.entries["four"].age_class == 2
    assert make_cell(False).config.predict_runtimes is False
    off = make_cell(False)
    submit(off, "block", 8, 0.0)
    submit(off, "four", 8, 1.0, expected_s=4 * 3600.0)
    assert off.tasks["four"].age_class == 0
    # In the queue: "four" counts a quarter of its wait; starved after 4 h, not 1 h.
    q = FairQueue(QueueConfig(predict_runtimes=True, starvation_s=3600.0,
                              aging_interval_s=7200.0))
    meta = TaskMeta(tenant="t")
    q.push("four", 1, meta, 8000, 0.0, size_class=5, age_class=2)
    q.push("short", 2, meta, 1000, 3000.0, size_class=1)
    assert [e.task for e in q.ordered(3 * 3600.0)] == ["short", "four"]
    assert q.level(q.entries["four"], 4 * 3600.0 - 1.0) == 0
    assert [e.task for e in q.ordered(4 * 3600.0)] == ["four", "short"]


def test_a_run_started_by_the_same_input_is_no_victim() -> None:
    """The blocker ends: the queue's order starts 'long', which waited past the
    starvation bound, and the much shorter 's' behind it, which cannot fit, must not
    stop it in the same pass (a start and a kill sent at once)."""
    from streams.core.cell import Preempted

    c = make_cell(True)
    teach(c)                                       # busy until 2,100
    placed(submit(c, "blocker", 8, 2200.0, tenant="v", expected_s=100.0))
    submit(c, "long", 8, 2201.0, tenant="u", expected_s=3000.0)
    submit(c, "s", 8, 6000.0, tenant="t", expected_s=100.0)
    out = c.end(TaskEnded("e/blocker", "blocker"), now_s=6001.0)   # long waited 3,800 s
    assert [p.task for p in placed(out)] == ["long"]
    assert not [o for o in out if isinstance(o, Preempted)]
    # At a later input the same run is a victim like any other: 2,999 s left against
    # 2 x (s's 100 s + a 60 s restart).
    out = c.tick("t/1", 1, now_s=6002.0)
    assert [(o.task, o.by_task) for o in out if isinstance(o, Preempted)] == [("long", "s")]


def test_a_restored_cell_keeps_the_reservation_the_running_cell_backfills_by() -> None:
    # As above: H's reservation is worked out at 5010 from R's predicted end, 5100. At
    # 5200 R has outlived its prediction (now twice what it ran: it ends at 5400), but
    # the cell keeps the reservation while R's node is unchanged. B (4 GPUs, 150 s)
    # arriving at 5200 would end at 5350, past 5100: it waits. A worker rebuilt from the
    # records at that point must decide the same, so the reservation is in the records;
    # rebuilt without it, the cell worked out 5400 anew and backfilled B.
    c = Cell("c", BESTFIT, QueueConfig(predict_runtimes=True))  # explains, as restored
    c.add_node(NodeAdded("n/a", "a", 64_000, 262_144, 8, "V100"), now_s=0.0)
    teach(c)
    placed(submit(c, "r", 4, 5000.0, tenant="t", name="short"))
    assert placed(submit(c, "h", 8, 5005.0, tenant="t")) == []
    # X (6 GPUs, 50 s) does not fit; trying it works out H's reservation, and since X
    # would end before 5100 it is tried on H's node too (not masked: the node unchanged).
    assert placed(submit(c, "x", 6, 5010.0, tenant="t", expected_s=50.0)) == []
    assert c.meta_record()["reservation"] == ["h", [0], 5100.0]
    meta = c.meta_record()
    nodes = [(n, c.node_record(n)) for n in c.nodes]
    tasks = [(t, c.task_record(t)) for t in c.tasks]

    def rebuilt(meta: dict[str, object]) -> Cell:
        return Cell.restore("c", BESTFIT, meta, nodes, tasks,
                            config=QueueConfig(predict_runtimes=True))

    again = rebuilt(meta)
    forgetful = rebuilt({k: v for k, v in meta.items() if k != "reservation"})
    ours, theirs, forgot = (submit(x, "b", 4, 5200.0, tenant="t", expected_s=150.0)
                            for x in (c, again, forgetful))
    assert placed(ours) == [] and ours == theirs
    assert [p.task for p in placed(forgot)] == ["b"]  # what the records must prevent
