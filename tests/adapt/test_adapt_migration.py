"""Thermal headroom and migration: throttled nodes get no work; moves pay off or are refused."""

from __future__ import annotations

from adapt_builders import cell, draining, kinds, node, run, task, telemetry, tick

from schemas.events import TaskMigrating, TaskPlaced


def test_a_throttled_node_stops_getting_new_work_until_it_cools():
    c = cell()
    run(c, node("hot", gpus=4, t=0))
    run(c, telemetry("hot", 0, 1, temp=70, throttle=("hw_thermal_slowdown",)))
    assert not any(isinstance(p, TaskPlaced) for p in run(c, task("a", t=2)))
    run(c, node("cool", gpus=4, t=3))
    assert c.tasks["a"].node == "cool"
    run(c, telemetry("hot", 0, 4, temp=60))  # A100 throttles at 85 °C: 60 is cool
    placed = [p for p in run(c, task("b", t=5), task("c", t=6), task("d", t=7),
                             task("e", t=8)) if isinstance(p, TaskPlaced)]
    assert "hot" in {p.node_id for p in placed}


def test_near_the_throttle_temperature_counts_as_hot():
    c = cell()
    run(c, node("n1", gpus=1, t=0), telemetry("n1", 0, 1, temp=82))  # within 5 °C of 85
    assert not any(isinstance(p, TaskPlaced) for p in run(c, task("a", t=2)))


def test_migration_is_refused_when_the_cost_outweighs_the_gain():
    c = cell()
    run(c, node("n1", gpus=1, t=0), task("short", t=1, duration_s=60, memory_mib=200_000))
    run(c, node("n2", gpus=1, t=2))
    run(c, telemetry("n1", 0, 3, throttle=("hw_slowdown",)))
    assert run(c, tick(1, 10)) == []  # 60 s job: saving <30 s does not pay ~190 s of moving
    assert c.adapt.meta["counters"]["migrations_refused"] >= 1


def test_a_long_task_on_a_throttled_node_is_moved_with_cost_and_gain_in_the_reason():
    c = cell()
    run(c, node("n1", gpus=1, t=0), task("long", t=1, duration_s=36000))
    run(c, node("n2", gpus=1, t=2), telemetry("n1", 0, 3, throttle=("hw_slowdown",)))
    out = run(c, tick(1, 10))
    assert kinds(out) == ["TaskMigrating"]
    m = out[0]
    assert (m.from_node_id, m.to_node_id) == ("n1", "n2")
    assert m.reason.code == "thermal_throttled"
    assert m.reason.metrics["benefit_s"] > m.reason.metrics["cost_s"]
    assert run(c, tick(2, 20)) == []  # moved once


def test_the_migration_budget_caps_moves():
    c = cell(migration_budget=1)
    run(c, node("n1", gpus=2, t=0), task("a", t=1, duration_s=36000),
        task("b", t=1.5, duration_s=36000), node("n2", gpus=2, t=2),
        telemetry("n1", 0, 3, throttle=("hw_slowdown",)))
    out = run(c, tick(1, 10), tick(2, 20))
    assert kinds(out) == ["TaskMigrating"]
    assert c.adapt.meta["counters"]["migrations_over_budget"] >= 1


def test_a_draining_node_is_emptied_regardless_of_cost():
    c = cell()
    run(c, node("n1", gpus=1, t=0), task("a", t=1, duration_s=60), node("n2", gpus=1, t=2))
    out = run(c, draining("n1", 3))
    assert kinds(out) == ["TaskMigrating"] and out[0].reason.code == "node_draining"
    assert isinstance(out[0], TaskMigrating) and out[0].to_node_id == "n2"
