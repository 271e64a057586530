"""Failures and membership: lost nodes, failed GPUs, returning nodes, stale reports."""

from __future__ import annotations

from adapt_builders import (
    cell,
    finished,
    gpu_failed,
    heartbeat,
    killed,
    kinds,
    node,
    node_failed,
    run,
    run_envs,
    task,
    telemetry,
    tick,
)

from schemas.events import TaskPlaced, TaskPreempted


def _two_nodes_one_task() -> tuple:
    c = cell()
    out = run(c, node("n1", gpus=2, t=0), node("n2", gpus=2, t=0), task("job", t=1))
    placed = [p for p in out if isinstance(p, TaskPlaced)]
    assert len(placed) == 1
    return c, placed[0].node_id


def test_a_failed_nodes_tasks_are_re_placed_once_on_another_node():
    c, first = _two_nodes_one_task()
    out = run(c, node_failed(first, t=5))
    assert kinds(out) == ["TaskPreempted", "TaskPlaced"]
    assert out[0].requeue and out[0].reason.code.startswith("node_failed")
    assert out[1].node_id != first
    assert run(c, node_failed(first, t=6), tick(1, 7), tick(2, 8)) == []


def test_a_node_that_stops_heartbeating_is_lost_after_the_timeout_on_a_tick():
    c, first = _two_nodes_one_task()
    other = "n2" if first == "n1" else "n1"
    assert run(c, heartbeat(first, 2), heartbeat(other, 2), tick(1, 11)) == []
    out = run(c, heartbeat(other, 12), tick(2, 13))
    assert kinds(out) == ["TaskPreempted", "TaskPlaced"]
    assert out[0].reason.code == "heartbeat_timeout" and out[1].node_id == other
    assert run(c, heartbeat(other, 14), tick(3, 15)) == []


def test_a_node_without_an_agent_is_never_timed_out():
    c, _ = _two_nodes_one_task()
    assert run(c, tick(1, 1000), tick(2, 5000)) == []


def test_a_returning_node_is_reconciled_and_gets_work_again():
    c, first = _two_nodes_one_task()
    other = "n2" if first == "n1" else "n1"
    run(c, heartbeat(first, 2), heartbeat(other, 12), tick(1, 13))
    out = run(c, heartbeat(first, 20, running=("job",)))
    assert kinds(out) == ["TaskPreempted"]
    assert out[0].node_id == first and not out[0].requeue and out[0].reason.code == "reconcile"
    # the other node is full (2 GPUs: job + filler); new work lands on the returned node
    placed = [p for p in run(c, task("filler", t=21), task("new", t=22))
              if isinstance(p, TaskPlaced)]
    assert [p.node_id for p in placed][-1] == first


def test_the_stale_report_of_an_evicted_run_is_ignored_and_the_task_finishes_elsewhere():
    c = cell()
    envs = run_envs(c, node("n1", gpus=1, t=0), node("n2", gpus=1, t=0), task("job", t=1))
    first = envs[0].payload
    moved = run_envs(c, node_failed(first.node_id, t=5))
    new = moved[1].payload
    assert run(c, killed("job", first.node_id, envs[0].event_id, t=6)) == []
    assert c.tasks["job"].status == "running"
    run(c, finished("job", new.node_id, moved[1].event_id, t=9))
    assert c.tasks["job"].status == "done"


def test_a_failed_gpu_re_queues_its_tasks_and_is_never_offered_again():
    c = cell()
    out = run(c, node("n1", gpus=2, t=0), task("a", t=1))
    gpu = out[0].gpus[0].index
    out = run(c, gpu_failed("n1", gpu, t=2))
    assert kinds(out) == ["TaskPreempted", "TaskPlaced"]
    assert out[1].gpus[0].index != gpu
    later = run(c, task("b", t=3), task("c", t=4))
    assert all(not isinstance(p, TaskPlaced) for p in later)  # one GPU left, taken by a


def test_a_fatal_xid_in_telemetry_takes_the_gpu_out():
    c = cell()
    run(c, node("n1", gpus=2, t=0))
    assert run(c, telemetry("n1", 1, 1, xids=(79,))) == []
    placed = run(c, task("a", t=2), task("b", t=3))
    assert [p.gpus[0].index for p in placed if isinstance(p, TaskPlaced)] == [0]


def test_a_node_joining_mid_run_gets_queued_work_at_once():
    c = cell()
    run(c, node("n1", gpus=1, t=0), task("a", t=1), task("b", t=2))
    out = run(c, node("n2", gpus=1, t=3))
    assert kinds(out) == ["TaskPlaced"] and out[0].node_id == "n2"


def test_replaying_the_same_log_gives_byte_identical_decisions():
    def scenario() -> list[bytes]:
        from schemas import encode

        c = cell()
        evs = [node("n1", gpus=2, t=0), node("n2", gpus=2, t=0), task("x", t=1),
               heartbeat("n1", 1), heartbeat("n2", 1), heartbeat("n2", 12), tick(1, 13)]
        return [encode(d) for e in evs for d in run_envs(c, e)]

    import adapt_builders

    adapt_builders._seq = __import__("itertools").count()
    a = scenario()
    adapt_builders._seq = __import__("itertools").count()
    assert a == scenario()
    assert any(b"TaskPreempted" in x for x in a)
    assert TaskPreempted  # the re-placement above is preceded by an eviction
