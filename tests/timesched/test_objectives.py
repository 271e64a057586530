"""Multi-objective weights from configuration, switched by event time and load (issue 7).

Cluster: an empty A100 node and a T4 node that already runs a task. The
completion-time objective wants the fastest free GPU (A100); the energy
objective wants the most TFLOPS per watt on a powered node (T4). Which one
a task gets must follow the hour of its event time and the cell's load, as
the configuration file says, and the fairness weights of a rule must steer
the queue while the rule is in force.
"""

from __future__ import annotations

import argparse
import json

import pytest

from streams.core.cell import Cell
from streams.core.events import NodeAdded, TaskArrived
from streams.core.objectives import WeightSchedule
from streams.core.profile import get_profile
from streams.core.queue import QueueConfig, TaskMeta
from streams.core.request import TaskRequest
from streams.profiles.compile import compile_profile
from streams.profiles.objectives import schedule_from_config
from streams.settings import read_objectives
from tests.timesched.helpers import end, submit

H = 3600.0
DAY = 86_400.0
CONFIG = {"rules": [
    {"name": "peak", "hours": [8, 20], "objectives": {"completion_time": 1.0}},
    {"name": "night-busy", "load": [0.5, None], "objectives": {"completion_time": 1.0}},
    {"name": "off-peak", "objectives": {"energy": 1.0, "utilisation": 0.0}},
]}
TOML = """
[[rules]]
name = "peak"
hours = [8, 20]
objectives = { completion_time = 1.0 }

[[rules]]
name = "off-peak"
objectives = { energy = 1.0 }
"""


def make_cell(schedule: WeightSchedule, config: QueueConfig | None = None) -> Cell:
    c = Cell("c", compile_profile(get_profile("bestfit")), config or QueueConfig(),
             objectives=schedule, explain=False)
    c.add_node(NodeAdded("a", "a100", 64_000, 262_144, 8, "A100"), now_s=0.0)
    c.add_node(NodeAdded("t", "t4", 64_000, 262_144, 8, "T4"), now_s=0.0)
    c.submit(TaskArrived("s0", TaskRequest("warm", 1000, 1024, 1, 1000)), None, TaskMeta(),
             now_s=0.0)
    return c


def place_at(c: Cell, task: str, t: float, gpus: int = 1) -> str:
    c.submit(TaskArrived(f"s/{task}", TaskRequest(task, 1000, 1024, gpus, 1000)), None,
             TaskMeta(), now_s=t)
    node = c.tasks[task].node
    assert node is not None
    return node


def test_the_hour_of_the_event_time_picks_the_weights(tmp_path):
    path = tmp_path / "objectives.json"
    path.write_text(json.dumps(CONFIG))
    schedule = schedule_from_config(read_objectives(path))
    c = make_cell(schedule)
    assert c.tasks["warm"].node == "t4"  # midnight: energy; nothing powered: the efficient T4
    assert place_at(c, "noon", 12 * H) == "a100"  # peak: the fastest free GPU
    assert place_at(c, "night", 22 * H) == "t4"  # off-peak again: efficient, powered
    assert place_at(c, "next-noon", DAY + 12 * H) == "a100"  # by hour of day, any day
    assert schedule.rule_name(DAY + 7.99 * H, 0.0) == "off-peak"
    assert schedule.rule_name(8 * H, 0.0) == "peak"


def test_load_switches_the_weights_and_toml_reads_the_same(tmp_path):
    schedule = schedule_from_config(CONFIG)
    assert schedule.rule_name(22 * H, 0.49) == "off-peak"
    assert schedule.rule_name(22 * H, 0.5) == "night-busy"
    c = make_cell(schedule)
    place_at(c, "big", 1.0, gpus=7)  # t4 or a100: 8 of 16 GPUs now allocated -> load 0.5
    assert place_at(c, "busy-night", 23 * H) == "a100"
    path = tmp_path / "objectives.toml"
    path.write_text(TOML)
    toml = schedule_from_config(read_objectives(path))
    assert [r.name for r in toml.rules] == ["peak", "off-peak"]
    assert toml.rule_name(9 * H, 0.0) == "peak"


def test_a_rule_can_change_the_tenants_fair_share_weights():
    config = {"rules": [{"name": "peak", "hours": [8, 20], "objectives": {"utilisation": 0.0,
                                                                          "completion_time": 1},
                         "tenant_weights": {"a": 3.0}}]}
    schedule = schedule_from_config(config, {"typical": None})
    c = Cell("c", compile_profile(get_profile("bestfit")), QueueConfig(), objectives=schedule,
             explain=False)
    for i in range(2):
        c.add_node(NodeAdded(f"n{i}", f"node-{i}", 64_000, 262_144, 6, "A100"), now_s=0.0)
    t0 = 9 * H
    for k in range(12):
        submit(c, f"x{k}", tenant="x", expected_s=100.0, t=t0)
    for k in range(60):
        submit(c, f"a{k}", t=t0 + 1, tenant="a", expected_s=100.0)
        submit(c, f"b{k}", t=t0 + 1, tenant="b", expected_s=100.0)
    for k in range(12):
        end(c, f"x{k}", t0 + 10 + k)
    held = {ten: sum(1 for r in c.tasks.values() if r.status == "running"
                     and r.meta.tenant == ten) for ten in "ab"}
    assert held == {"a": 9, "b": 3}


@pytest.mark.parametrize("bad, match", [
    ({"rules": [{"name": "x", "objectives": {"speed": 1}}]}, "rule 'x': unknown objectives"),
    ({"rules": [{"name": "y"}]}, "rule 'y': give either"),
    ({"rules": [{"name": "z", "hours": [8, 30], "objectives": {"energy": 1}}]}, "0..24"),
    ({"rules": [{"name": "w", "objectives": {"fairness": 1}}]}, "positive weight"),
])
def test_bad_configs_name_the_rule(bad, match):
    with pytest.raises(ValueError, match=match):
        schedule_from_config(bad)


def test_simulate_takes_an_objectives_file(tmp_path):
    from streams.commands import simulate
    from streams.sim.time.jobs import write_jobs
    from streams.sim.time.mixed import mixed_cluster, mixed_jobs

    nodes = mixed_cluster()[::4]
    write_jobs(tmp_path / "jobs.csv", mixed_jobs(7, 1800.0, 0.2, nodes))
    (tmp_path / "obj.json").write_text(json.dumps(CONFIG))
    parser = argparse.ArgumentParser()
    simulate.add_arguments(parser)
    args = parser.parse_args(["--mode", "time", "--jobs", str(tmp_path / "jobs.csv"),
                              "--objectives", str(tmp_path / "obj.json"), "--policies",
                              "hetsched", "--out", str(tmp_path / "out")])
    assert simulate.run(args) == 0
    (tmp_path / "bad.json").write_text(json.dumps({"rules": [{"name": "q"}]}))
    args.objectives = tmp_path / "bad.json"
    assert simulate.run(args) == 2


def test_the_service_compiles_the_objectives_file_with_its_own_mix(tmp_path):
    from streams.profiles.service import service_objectives

    assert service_objectives(None) is None
    schedule = service_objectives({"rules": [
        {"name": "day", "hours": [8, 20], "objectives": {"utilisation": 1.0, "energy": 0.2}}]})
    assert schedule is not None and schedule.rule_name(9 * H, 0.0) == "day"
    assert [p.name for p in schedule.rules[0].scheduler.policies] == ["hetsched", "energy"]
